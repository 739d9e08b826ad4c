"""``agentbranch calibrate LABELLED.jsonl``: fit temperatures, report, save, diagram."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Column, Table

from agentbranch.cli.common import (
    LabelledQuestions,
    LineQuestion,
    Verbose,
    console,
    err,
    exit_on_error,
    fmt,
    key_value,
    print_table,
    quiet_logs,
    read_questions,
    shown_engine,
)

__all__ = ["calibrate"]


def calibrate(
    labelled: Annotated[
        Path | None, typer.Argument(help="Labelled JSON Lines (docs/calibration.md).")
    ] = None,
    questions: LabelledQuestions = None,
    out: Annotated[Path, typer.Option(help="Where to save the calibration.")] = Path(
        "calibration.json"
    ),
    diagram: Annotated[Path | None, typer.Option(help="Reliability diagram PNG.")] = Path(
        "reliability.png"
    ),
    by: Annotated[str, typer.Option(help="Fit a temperature per 'question' or per 'type'.")] = (
        "question"
    ),
    holdout: Annotated[float, typer.Option(help="Share held out for the report (0: none).")] = 0.3,
    target_precision: Annotated[float, typer.Option(help="Precision the threshold must reach.")] = (
        0.9
    ),
    min_examples: Annotated[
        int, typer.Option(min=1, help="Fewer per question: use the type's T.")
    ] = 10,
    permutations: Annotated[
        int, typer.Option(min=1, help="Option orders the engine averages.")
    ] = 1,
    seed: Annotated[int, typer.Option()] = 0,
    question: LineQuestion = None,
    evaluate: Annotated[
        Path | None,
        typer.Option(help="Score this saved calibration on LABELLED; fit and save nothing."),
    ] = None,
    reader: Annotated[
        str, typer.Option(help="Reader to read with: auto, embedded, remote or vllm.")
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    verbose: Verbose = False,
    from_audit: Annotated[
        Path | None, typer.Option(help="Fit on audit records' teacher labels (docs/audit.md).")
    ] = None,
    force: Annotated[
        bool,
        typer.Option(help="Save the fit even when it makes held-out ECE and Brier worse."),
    ] = False,
) -> None:
    """Fit temperatures on LABELLED examples; report accuracy, ECE, Brier and coverage
    before/after; save the calibration; draw a reliability diagram. With --evaluate,
    score an existing calibration instead (nothing is fitted or saved). A fit that makes
    both ECE and Brier worse on the held-out split is not saved unless --force.

    LABELLED is JSON Lines: {"state": ..., "question": ID, "label": OPTION} per line, or
    {"text": ..., "label": OPTION} with --question ID (see docs/calibration.md)."""
    from rich.progress import Progress

    from agentbranch import calibration as cal
    from agentbranch.core.files import check_writable
    from agentbranch.engine.calibration import Calibration

    quiet_logs(verbose)
    if by not in ("question", "type"):
        raise typer.BadParameter("--by must be 'question' or 'type'")
    if reader not in ("auto", "embedded", "remote", "vllm"):
        raise typer.BadParameter("--reader must be auto, embedded, remote or vllm")
    if (labelled is None) == (from_audit is None):
        raise typer.BadParameter("give a LABELLED file or --from-audit AUDITS.jsonl (one)")
    if from_audit is not None and evaluate is not None:
        raise typer.BadParameter("--evaluate scores a LABELLED file; it does not take --from-audit")
    with exit_on_error():
        # Before any work: an output that cannot be written would lose the fit.
        if evaluate is None:
            check_writable(out, "--out")
        if diagram is not None:
            check_writable(diagram, "--diagram")
        fit: dict[str, Any] = {  # how to fit, from audits or from labelled examples
            "by": by,
            "holdout": holdout,
            "target_precision": target_precision,
            "seed": seed,
            "min_examples": min_examples,
        }
        if from_audit is not None:  # the engine's logged distributions, the teacher's labels
            from agentbranch.audit import calibrate_from_audit

            report = calibrate_from_audit(from_audit, **fit)
        else:
            extra = read_questions(questions) if questions else None
            examples = cal.load_labelled(labelled, extra, default_question=question)
            engine = shown_engine(None, permutations, reader)
            with Progress(console=err, transient=True) as bar:
                task = bar.add_task("reading examples", total=len(examples))
                advance = partial(bar.advance, task)
                if evaluate is not None:
                    saved = Calibration.load(evaluate)
                    report = cal.evaluate(
                        engine, examples, saved, target_precision=target_precision, progress=advance
                    )
                else:
                    report = cal.calibrate(engine, examples, **fit, progress=advance)
    for warning in report.warnings:
        if not warning.startswith(cal.WORSE_FIT):  # logged already, and said below
            err.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    refused = evaluate is None and report.worse and not force
    with exit_on_error(also=(OSError,)):  # written after all checks: disk full, ...
        if evaluate is None and not refused:
            report.calibration.save(out)
        if diagram is not None:
            cal.reliability_diagram(report.eval_before, report.eval_after, diagram)
    if as_json:
        print(json.dumps(report.as_dict(), indent=2))
        if refused:
            _refuse_worse(report, out)
        return
    where = (
        "held-out" if report.held_out else "fit set (in-sample: use --holdout for an honest figure)"
    )
    title = f"calibration: {report.n_fit} fit / {report.n_eval} evaluated ({where})"
    if evaluate is not None:
        title = f"evaluating {evaluate} on {report.n_eval} examples (nothing fitted)"

    columns = ["n", "T", "accuracy", "ECE before→after", "Brier before→after"]
    columns += [f"threshold @{target_precision:.0%}", "coverage (precision)"]
    table = Table("question", *(Column(c, justify="right") for c in columns), title=title)
    types = {s.question_id: s.type for s in report.eval_before}
    for question_id, (b, a) in report.per_question.items():
        t = report.held_out_thresholds[question_id]
        reach = "none reaches it"
        if t.threshold is not None:
            reach = f"{fmt(t.coverage, 2)} ({fmt(t.precision, 2)})"
        temperature = fmt(report.calibration.temperature(question_id, types[question_id]), 2)
        table.add_row(question_id, str(b.n), temperature, *_scores(b, a), fmt(t.threshold), reach)
    b, a = report.before, report.after
    table.add_row("[bold]all[/bold]", str(b.n), "", *_scores(b, a), "", "", end_section=True)
    print_table(console, table, lambda: _folded(table))
    if evaluate is not None or refused:
        if diagram:
            console.print(f"reliability diagram [bold]{diagram}[/bold]")
        if refused:
            _refuse_worse(report, out)
        return
    console.print(
        ("saved anyway (--force): " if report.worse else "saved ")
        + f"[bold]{out}[/bold] (load with DecisionEngine(calibration={str(out)!r}) or "
        f"AGENTBRANCH_CALIBRATION={out})"
        + (f"; reliability diagram [bold]{diagram}[/bold]" if diagram else ""),
        soft_wrap=True,
    )
    if report.calibration.thresholds:
        console.print(
            "suggested take thresholds (Policy(take_at=...)): "
            + ", ".join(f"{q}={v:.3f}" for q, v in report.calibration.thresholds.items()),
            soft_wrap=True,
        )


def _scores(b: Any, a: Any) -> list[str]:
    """Accuracy, and ECE and Brier before → after."""
    return [fmt(b.accuracy), f"{fmt(b.ece)} → {fmt(a.ece)}", f"{fmt(b.brier)} → {fmt(a.brier)}"]


def _folded(table: Table) -> list[Table]:
    """The calibrate table for a narrow terminal: one two-column table per row."""
    headers = [str(c.header) for c in table.columns]
    cells = [list(c.cells) for c in table.columns]
    parts = [table.title] if table.title else []
    for row in zip(*cells):
        pairs = [(h, str(v)) for h, v in zip(headers[1:], row[1:]) if str(v)]
        parts.append(key_value(str(row[0]), pairs))
    return parts


def _refuse_worse(report: Any, out: Path) -> None:
    """A fit that made the evaluation split worse is not saved: say so and what to do."""
    b, a = report.before, report.after
    err.print(
        f"[red]not saved:[/red] the fit makes the held-out examples worse (ECE {fmt(b.ece)} → "
        f"{fmt(a.ece)}, Brier {fmt(b.brier)} → {fmt(a.brier)}), so {out} was not written. Keep "
        "the calibration you use now (or none), and collect more labelled examples or audits "
        "before fitting again; --force saves it anyway.",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(1)
