"""``agentbranch``: the command line.

* ``agentbranch demo`` — the support-triage graph over the shipped sample tickets, on the
  engine ``DecisionEngine.from_env()`` picks (the embedded CPU reader on a laptop), as a table.
* ``agentbranch decide STATE --choice/--yes-no/--score ...`` — one decision.
* ``agentbranch calibrate LABELED.jsonl`` — fit temperatures, report, save, diagram.
* ``agentbranch engine`` — which engine the environment selects, and why.
* ``agentbranch replay diff OLD NEW`` — drift between two cassettes (``agentbranch.replay.cli``).
* ``agentbranch audit report AUDITS.jsonl`` — the take band's precision vs a teacher.
* ``agentbranch bench`` — the read paths timed side by side (``agentbranch.bench``).

Over 500 lines: it holds the top-level commands; the planned layout restructuring splits
them into one typer sub-app module per command group, as audit, replay and deploy
already are.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    name="agentbranch",
    help="LangGraph agents branch on typed, measured decisions.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
err = Console(stderr=True)


def _quiet_logs(verbose: bool) -> None:
    """The CLI is an application: it may configure logging (the library never does).
    Warnings always, every decision with ``--verbose``, on stderr."""
    logger = logging.getLogger("agentbranch")
    for h in [h for h in logger.handlers if getattr(h, "_agentbranch_cli", False)]:
        logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler._agentbranch_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)


def _engine(
    calibration: Path | None, permutations: int = 1, reader: str | None = None
) -> tuple[Any, str]:
    from agentbranch.core.errors import AgentBranchError
    from agentbranch.engine.engine import DecisionEngine
    from agentbranch.engine.selection import ENV_ENGINE

    kwargs: dict[str, Any] = {"permutations": permutations}
    if calibration is not None:
        kwargs["calibration"] = str(calibration)
    # --reader NAME forces that engine, as AGENTBRANCH_ENGINE=NAME would.
    env = None if reader in (None, "auto") else {**os.environ, ENV_ENGINE: str(reader)}
    try:
        engine = DecisionEngine.from_env(env, **kwargs)
        return engine, engine.selection_reason or ""
    except AgentBranchError as e:
        raise _fail(e) from None


def _fail(message: object) -> typer.Exit:
    """Print ``error: message`` on stderr; raise the result (exit status 2)."""
    err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(2)


def _read_questions(path: Path) -> dict[str, Any]:
    """``--questions FILE.json``: a JSON object ``{id: wire question}``."""
    from agentbranch.core.files import read_json

    data = read_json(path, "questions file")
    if not isinstance(data, dict):
        from agentbranch.core.errors import InvalidFileError

        raise InvalidFileError(
            f"questions file {path}: expected a JSON object {{id: question}}, such as "
            '{"urgent": {"type": "noul", "instructions": "Is it urgent?"}}; got '
            f"{type(data).__name__}"
        )
    return data


def _fmt_probs(probs: dict[str, float], top: int = 3) -> str:
    ranked = sorted(probs.items(), key=lambda kv: -kv[1])[:top]
    return " ".join(f"{k} {v:.2f}" for k, v in ranked)


# -- demo -----------------------------------------------------------------------------


def load_tickets(path: Path | None = None) -> list[dict[str, Any]]:
    """Tickets from a JSON Lines file (``{"id", "ticket"}`` per line; plain strings and
    ``{"state": ...}`` work too); the shipped sample by default."""
    from agentbranch.core.errors import InvalidFileError
    from agentbranch.core.files import json_lines, loads

    if path is None:
        text = resources.files("agentbranch.demo").joinpath("tickets.jsonl").read_text("utf-8")
        numbered = (
            (i, loads(line, f"tickets.jsonl:{i}"))
            for i, line in enumerate(text.splitlines(), 1)
            if line.strip()
        )
    else:
        numbered = json_lines(path, "tickets file")
    out = []
    for i, obj in numbered:
        if isinstance(obj, str):
            obj = {"ticket": obj}
        ticket = obj.get("ticket", obj.get("state")) if isinstance(obj, dict) else None
        if not isinstance(ticket, str):
            raise InvalidFileError(
                f"{path or 'tickets.jsonl'}:{i}: no 'ticket' text; each line is a JSON string "
                'or an object such as {"id": "T-1", "ticket": "The site is down"}'
            )
        out.append({"id": str(obj.get("id", f"#{i}")), "ticket": ticket})
    if not out:
        raise InvalidFileError(f"tickets file {path} holds no tickets")
    return out


def demo_policy(engine: Any) -> dict[str, Any]:
    """The triage policy: the team's take threshold from the engine's calibration
    (when it suggests one), else ``DEFAULT_TEAM_TAKE_AT``; other questions always taken."""
    from agentbranch.demo.triage import DEFAULT_TEAM_TAKE_AT, default_policy

    take_at = DEFAULT_TEAM_TAKE_AT
    if engine.calibration is not None and "team" in engine.calibration.thresholds:
        take_at = engine.calibration.thresholds["team"]
    return default_policy(None, take_at=take_at)


def run_demo(
    engine: Any, tickets: list[dict[str, Any]], *, progress: bool = True
) -> list[dict[str, Any]]:
    """Run the triage graph over ``tickets``; one final state per ticket."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from agentbranch.demo.triage import build_triage_graph

    graph = build_triage_graph(engine, policy=demo_policy(engine))
    states: list[dict[str, Any]] = []
    if not progress:
        return [dict(graph.invoke({"ticket": t["ticket"]})) for t in tickets]
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("triaging tickets", total=len(tickets))
        for t in tickets:
            states.append(dict(graph.invoke({"ticket": t["ticket"]})))
            bar.advance(task)
    return states


def _has_band(policy: Any) -> bool:
    """Whether the policy put the decision in a band (it has a threshold to apply)."""
    return bool(policy.has_fallback_band or policy.can_review)


def _top_probs(probs: dict[str, float], width: int) -> str:
    """The most probable options, as many as fit in ``width`` (at least one)."""
    out = ""
    for name, p in sorted(probs.items(), key=lambda kv: -kv[1]):
        item = f"{name} {p:.2f}"
        if out and len(out) + 2 + len(item) > width:
            break
        out = f"{out}  {item}" if out else item
    return out


def demo_report(
    tickets: list[dict[str, Any]], states: list[dict[str, Any]], policy: Any, width: int = 80
) -> list[str]:
    """The demo's output as plain lines of at most ``width`` characters (words are never
    broken): per ticket its text, one line per decision and where it went. The band
    column shows the band where the question's policy applies a threshold; an
    informative question (urgency, frustration) the engine is not sure of shows ``—``
    and ``not sure`` (the demo does not use its answer)."""
    import textwrap

    from agentbranch.demo.triage import INFO_QUESTIONS, sure_label
    from agentbranch.policy import policy_for

    head = f"  {'question':<11} {'answer':<15} {'entropy':>7} {'conf':>5}  {'band':<9} "
    probs_width = max(12, width - len(head))
    lines = [head + "probabilities", "  " + "─" * (width - 2)]
    for ticket, state in zip(tickets, states):
        lines += textwrap.wrap(
            ticket["ticket"],
            width=width,
            initial_indent=f"{ticket['id']}  ",
            subsequent_indent=" " * (len(ticket["id"]) + 2),
            break_long_words=False,
            break_on_hyphens=False,
        )
        records = state.get("decisions") or {}
        for qid, rec in records.items():
            band = rec.get("band", "") if _has_band(policy_for(policy, qid)) else ""
            label = str(rec.get("label"))
            if qid in INFO_QUESTIONS and sure_label(rec) is None:
                label, band = "—", "not sure"
            row = (
                f"  {qid:<11} {label:<15} "
                f"{rec.get('entropy', float('nan')):>7.2f} "
                f"{rec.get('confidence', float('nan')):>5.2f}  {band:<9} "
                + _top_probs(rec.get("probabilities") or {}, probs_width)
            )
            lines.append(row.rstrip())
        by = [f"{q}: {r['decided_by']}" for q, r in records.items() if r.get("goto")]
        queue = state.get("queue") or "-"
        lines.append(f"  → {queue}" + (f" ({', '.join(by)})" if by else ""))
        lines.append("")
    return lines


@app.command()
def demo(
    tickets: Annotated[
        Path | None, typer.Option(help="JSON Lines tickets (default: the shipped sample).")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N tickets.")] = None,
    calibration: Annotated[
        Path | None, typer.Option(help="A calibration file from `agentbranch calibrate`.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines instead.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every decision.")] = False,
) -> None:
    """Run the support-triage graph over sample tickets and show every decision."""
    from agentbranch.core.errors import AgentBranchError

    _quiet_logs(verbose)
    try:
        rows = load_tickets(tickets)[:limit]
    except AgentBranchError as e:
        raise _fail(e) from None
    with err.status("loading the engine…"):
        engine, reason = _engine(calibration)
    err.print(f"[dim]engine:[/dim] {engine.reader.name} ({engine.reader.model}) — {reason}")
    states = run_demo(engine, rows, progress=not as_json and len(rows) > 5)
    if as_json:
        for t, s in zip(rows, states):
            print(json.dumps({"id": t["id"], **s}, default=str))
        return
    import textwrap

    width = max(60, min(console.width, 100))
    policy = demo_policy(engine)
    taken = sum(s.get("queue") != "human_triage" for s in states)
    from agentbranch.demo.triage import INFO_TAKE_AT

    summary = (
        f"{len(states)} tickets: {taken} routed by the engine, {len(states) - taken} sent to "
        f"human_triage. team: take when its confidence ≥ {policy['team'].take_at:.2f}, "
        f"else fallback → human_triage. urgent and frustration do not route: their "
        f"answer is used at confidence ≥ {INFO_TAKE_AT:.2f}, else — (not sure; the "
        "probabilities show what the engine leaned to). "
        "conf = 1 − entropy / ln(number of options)."
    )
    lines = [f"support triage on {engine.reader.model}", ""]
    lines += demo_report(rows, states, policy, width)
    lines += textwrap.wrap(summary, width=width, break_long_words=False)
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


# -- decide ---------------------------------------------------------------------------


def _parse_option(text: str) -> tuple[str, str | None]:
    name, sep, desc = text.partition("=")
    return name.strip(), (desc.strip() or None) if sep else None


def _examples_for(examples: list[str] | None, names: list[str]) -> dict[str, list[str]] | None:
    """The ``--example ANSWER=TEXT`` values whose ANSWER is one of ``names``."""
    out: dict[str, list[str]] = {}
    for raw in examples or []:
        name, sep, text = raw.partition("=")
        if not sep or not text.strip():
            raise typer.BadParameter(
                f"--example {raw!r}: write ANSWER=TEXT, e.g. billing='Refund me'"
            )
        if name.strip() in names:
            out.setdefault(name.strip(), []).append(text.strip())
    return out or None


@app.command()
def decide(
    state: Annotated[str, typer.Argument(help="The state text ('-' reads stdin).")],
    choice_q: Annotated[
        str | None, typer.Option("--choice", help="A pick-one question; give --option.")
    ] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="NAME or NAME=description.")
    ] = None,
    yes_no_q: Annotated[str | None, typer.Option("--yes-no", help="A yes/no question.")] = None,
    yes: Annotated[str | None, typer.Option(help="What 'yes' means.")] = None,
    no: Annotated[str | None, typer.Option(help="What 'no' means.")] = None,
    score_q: Annotated[
        str | None, typer.Option("--score", help="A score question; give --level (lowest first).")
    ] = None,
    level: Annotated[list[str] | None, typer.Option("--level", "-l")] = None,
    example: Annotated[
        list[str] | None,
        typer.Option(
            "--example",
            "-e",
            help="ANSWER=TEXT: an example state for that option/level/yes/no (repeat).",
        ),
    ] = None,
    questions: Annotated[
        Path | None, typer.Option(help="JSON file: {id: wire question} (System One shape).")
    ] = None,
    calibration: Annotated[Path | None, typer.Option()] = None,
    permutations: Annotated[int, typer.Option(min=1, help="Option orders to average.")] = 1,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Answer one or more questions about STATE and print the decisions."""
    import agentbranch as ab
    from agentbranch.core.errors import AgentBranchError

    _quiet_logs(verbose)
    if state == "-":
        try:
            state = sys.stdin.read()
        except UnicodeDecodeError as e:
            raise _fail(f"the state on stdin is not UTF-8 text (byte {e.start})") from None
    qs: dict[str, Any] = {}
    try:
        if questions is not None:
            qs.update(_read_questions(questions))
        if choice_q:
            if not option:
                raise typer.BadParameter("--choice needs --option (at least two)")
            options = dict(_parse_option(o) for o in option)
            ex = _examples_for(example, list(options))
            qs["choice"] = ab.choice(choice_q, options, examples=ex)
        if yes_no_q:
            qs["yes_no"] = ab.yes_no(
                yes_no_q, yes=yes, no=no, examples=_examples_for(example, ["yes", "no"])
            )
        if score_q:
            if not level:
                raise typer.BadParameter("--score needs --level (at least two)")
            qs["score"] = ab.score(score_q, level, examples=_examples_for(example, level))
        if example and not any(
            _examples_for(example, names)
            for names in (
                [_parse_option(o)[0] for o in option or []] if choice_q else [],
                ["yes", "no"] if yes_no_q else [],
                level or [] if score_q else [],
            )
        ):
            raise typer.BadParameter(
                "--example ANSWER=TEXT must name an option, level, yes or no of a question "
                "given with --choice, --score or --yes-no"
            )
        if not qs:
            raise typer.BadParameter("ask something: --choice, --yes-no, --score or --questions")
        engine, reason = _engine(calibration, permutations)
        decisions = engine.decide(state, qs)
    except AgentBranchError as e:
        raise _fail(e) from None
    if as_json:
        print(json.dumps(decisions.to_records(), indent=2))
        return
    table = Table(title=f"{engine.reader.name} ({engine.reader.model})")
    for col in ("question", "label", "probabilities", "entropy", "confidence"):
        table.add_column(col)
    for qid, d in decisions.items():
        table.add_row(
            qid,
            d.label,
            _fmt_probs(d.probabilities, top=5),
            f"{d.entropy:.3f}",
            f"{d.confidence:.3f}",
        )
    console.print(table)
    err.print(f"[dim]{reason}[/dim]")


# -- calibrate ------------------------------------------------------------------------


def _f(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


@app.command()
def calibrate(
    labelled: Annotated[
        Path | None, typer.Argument(help="Labelled JSON Lines (docs/calibration.md).")
    ] = None,
    questions: Annotated[
        Path | None, typer.Option(help="JSON file {id: wire question} the lines refer to.")
    ] = None,
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
    question: Annotated[
        str | None,
        typer.Option(help="The question id of lines that carry only text + label."),
    ] = None,
    evaluate: Annotated[
        Path | None,
        typer.Option(help="Score this saved calibration on LABELLED; fit and save nothing."),
    ] = None,
    reader: Annotated[
        str, typer.Option(help="Reader to read with: auto, embedded, remote or vllm.")
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
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
    from agentbranch.core.errors import AgentBranchError
    from agentbranch.core.files import check_writable
    from agentbranch.engine.calibration import Calibration

    _quiet_logs(verbose)
    if by not in ("question", "type"):
        raise typer.BadParameter("--by must be 'question' or 'type'")
    if reader not in ("auto", "embedded", "remote", "vllm"):
        raise typer.BadParameter("--reader must be auto, embedded, remote or vllm")
    if (labelled is None) == (from_audit is None):
        raise typer.BadParameter("give a LABELLED file or --from-audit AUDITS.jsonl (one)")
    if from_audit is not None and evaluate is not None:
        raise typer.BadParameter("--evaluate scores a LABELLED file; it does not take --from-audit")
    try:
        # Before any work: an output that cannot be written would lose the fit.
        if evaluate is None:
            check_writable(out, "--out")
        if diagram is not None:
            check_writable(diagram, "--diagram")
        if from_audit is not None:  # the engine's logged distributions, the teacher's labels
            from agentbranch.audit import calibrate_from_audit

            report = calibrate_from_audit(
                from_audit,
                by=by,  # type: ignore[arg-type]
                holdout=holdout,
                target_precision=target_precision,
                seed=seed,
                min_examples=min_examples,
            )
        else:
            extra = _read_questions(questions) if questions else None
            examples = cal.load_labelled(labelled, extra, default_question=question)
            engine, reason = _engine(None, permutations, reader)
            err.print(f"[dim]engine:[/dim] {engine.reader.name} ({engine.reader.model}) — {reason}")
            with Progress(console=err, transient=True) as bar:
                task = bar.add_task("reading examples", total=len(examples))
                if evaluate is not None:
                    report = cal.evaluate(
                        engine,
                        examples,
                        Calibration.load(evaluate),
                        target_precision=target_precision,
                        progress=lambda n: bar.advance(task, n),
                    )
                else:
                    report = cal.calibrate(
                        engine,
                        examples,
                        by=by,  # type: ignore[arg-type]
                        holdout=holdout,
                        target_precision=target_precision,
                        seed=seed,
                        min_examples=min_examples,
                        progress=lambda n: bar.advance(task, n),
                    )
    except AgentBranchError as e:
        raise _fail(e) from None
    for warning in report.warnings:
        if not warning.startswith(cal.WORSE_FIT):  # logged already, and said below
            err.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    refused = evaluate is None and report.worse and not force
    try:
        if evaluate is None and not refused:
            report.calibration.save(out)
        if diagram is not None:
            cal.reliability_diagram(report.eval_before, report.eval_after, diagram)
    except (AgentBranchError, OSError) as e:  # written after all checks: disk full, ...
        raise _fail(e) from None
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
    from agentbranch.tables import print_table

    table = Table(title=title)
    for col in (
        "question",
        "n",
        "T",
        "accuracy",
        "ECE before→after",
        "Brier before→after",
        f"threshold @{target_precision:.0%}",
        "coverage (precision)",
    ):
        table.add_column(col, justify="right" if col != "question" else "left")
    types = {s.question_id: s.type for s in report.eval_before}
    for qid, (b, a) in report.per_question.items():
        t = report.held_out_thresholds[qid]
        table.add_row(
            qid,
            str(b.n),
            _f(report.calibration.temperature(qid, types[qid]), 2),
            _f(b.accuracy),
            f"{_f(b.ece)} → {_f(a.ece)}",
            f"{_f(b.brier)} → {_f(a.brier)}",
            _f(t.threshold),
            f"{_f(t.coverage, 2)} ({_f(t.precision, 2)})"
            if t.threshold is not None
            else "none reaches it",
        )
    b, a = report.before, report.after
    table.add_row(
        "[bold]all[/bold]",
        str(b.n),
        "",
        _f(b.accuracy),
        f"{_f(b.ece)} → {_f(a.ece)}",
        f"{_f(b.brier)} → {_f(a.brier)}",
        "",
        "",
        end_section=True,
    )
    print_table(console, table, lambda: _folded(table))
    if evaluate is not None:
        if diagram:
            console.print(f"reliability diagram [bold]{diagram}[/bold]")
        return
    if refused:
        if diagram:
            console.print(f"reliability diagram [bold]{diagram}[/bold]")
        _refuse_worse(report, out)
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


def _folded(table: Table) -> list[Table]:
    """The calibrate table for a narrow terminal: one two-column table per row."""
    from agentbranch.tables import key_value

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
        f"[red]not saved:[/red] the fit makes the held-out examples worse (ECE {_f(b.ece)} → "
        f"{_f(a.ece)}, Brier {_f(b.brier)} → {_f(a.brier)}), so {out} was not written. Keep "
        "the calibration you use now (or none), and collect more labelled examples or audits "
        "before fitting again; --force saves it anyway.",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(1)


# -- engine ---------------------------------------------------------------------------


@app.command()
def engine(
    load: Annotated[bool, typer.Option(help="Also build the engine (loads the model).")] = False,
) -> None:
    """Print which engine the environment selects, and why."""
    import os

    from rich.markup import escape

    from agentbranch.core.errors import AgentBranchError
    from agentbranch.core.redact import redact_url
    from agentbranch.engine import selection as sel

    _quiet_logs(False)
    try:
        choice = sel.select()
    except AgentBranchError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    console.print(f"[bold]{choice.kind}[/bold]: {escape(choice.reason)}")
    for key in (
        sel.ENV_ENGINE,
        sel.ENV_VLLM_MODEL,
        sel.ENV_REMOTE_URL,
        sel.ENV_REMOTE_MODEL,
        sel.ENV_REMOTE_API_KEY,
        sel.ENV_CALIBRATION,
    ):
        value = os.environ.get(key)
        if not value:
            console.print(f"  {key} (unset)")
        elif key == sel.ENV_REMOTE_API_KEY:
            console.print(f"  {key} (set)")
        elif key == sel.ENV_REMOTE_URL:  # user:password@ and ?token= masked
            console.print(f"  {key}={redact_url(value)}", markup=False, highlight=False)
        else:
            console.print(f"  {key}={value}", markup=False, highlight=False)
    if load:
        built, _ = _engine(None)
        console.print(f"built: {built.reader.name} ({built.reader.model})")


@app.command()
def bench(
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
    plot: Annotated[Path | None, typer.Option(help="Write the plot (PNG) here.")] = None,
    quick: Annotated[bool, typer.Option(help="Fewer repetitions.")] = False,
    vllm: Annotated[
        bool | None, typer.Option(help="Run the vLLM part (default: when vllm imports).")
    ] = None,
    vllm_model: Annotated[
        Path | None, typer.Option(help="A causal model folder for the vLLM part.")
    ] = None,
    cpu: Annotated[bool, typer.Option(help="Run the CPU (transformers) part.")] = True,
) -> None:
    """Time the read paths side by side and print every ratio (see docs/benchmarks.md)."""
    from agentbranch.bench import command
    from agentbranch.core.errors import AgentBranchError
    from agentbranch.core.files import check_writable

    _quiet_logs(False)
    try:  # before minutes of measuring, not after
        if plot is not None:
            check_writable(plot, "--plot")
        if vllm_model is not None and not vllm_model.is_dir():
            raise _fail(f"--vllm-model {vllm_model} is not a folder (a causal model's files)")
    except AgentBranchError as e:
        raise _fail(e) from None
    raise typer.Exit(command(json_out, plot, quick, vllm, vllm_model, cpu))


def _add_subcommands() -> None:
    """`agentbranch replay ...` and `agentbranch audit ...` live in their own modules."""
    from agentbranch.audit.cli import audit_app
    from agentbranch.replay.cli import replay_app

    app.add_typer(replay_app, name="replay")
    app.add_typer(audit_app, name="audit")
    from agentbranch.deploy.cli import register as register_deploy  # size, deploy kserve

    register_deploy(app)


_add_subcommands()


if __name__ == "__main__":  # python -m agentbranch.cli
    app()
