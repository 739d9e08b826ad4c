"""``agentbranch``: the command line.

* ``agentbranch demo`` — the support-triage graph over the shipped sample tickets, on the
  engine ``engine_from_env()`` picks (the embedded CPU reader on a laptop), as a table.
* ``agentbranch decide STATE --choice/--yes-no/--score ...`` — one decision.
* ``agentbranch calibrate LABELED.jsonl`` — fit temperatures, report, save, diagram.
* ``agentbranch engine`` — which engine the environment selects, and why.
* ``agentbranch bench`` — the read paths timed side by side (``agentbranch.bench``).
"""

from __future__ import annotations

import json
import logging
import math
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
    """The CLI is an application: it may configure logging (the library never does)."""
    import structlog

    level = logging.INFO if verbose else logging.WARNING
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )


def _engine(calibration: Path | None, permutations: int = 1) -> tuple[Any, str]:
    from agentbranch.errors import AgentBranchError
    from agentbranch.selection import engine_from_env

    kwargs: dict[str, Any] = {"permutations": permutations}
    if calibration is not None:
        kwargs["calibration"] = str(calibration)
    try:
        return engine_from_env(**kwargs)
    except AgentBranchError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None


def _fmt_probs(probs: dict[str, float], top: int = 3) -> str:
    ranked = sorted(probs.items(), key=lambda kv: -kv[1])[:top]
    return " ".join(f"{k} {v:.2f}" for k, v in ranked)


def _short(text: str, width: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


# -- demo -----------------------------------------------------------------------------


def load_tickets(path: Path | None = None) -> list[dict[str, Any]]:
    """Tickets from a JSON Lines file (``{"id", "ticket"}`` per line; plain strings and
    ``{"state": ...}`` work too); the shipped sample by default."""
    if path is None:
        text = resources.files("agentbranch.demo").joinpath("tickets.jsonl").read_text("utf-8")
    else:
        text = Path(path).read_text("utf-8")
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        obj = json.loads(line)
        if isinstance(obj, str):
            obj = {"ticket": obj}
        ticket = obj.get("ticket", obj.get("state"))
        if not isinstance(ticket, str):
            raise typer.BadParameter(f"{path or 'tickets.jsonl'}:{i}: no 'ticket' text")
        out.append({"id": str(obj.get("id", f"#{i}")), "ticket": ticket})
    return out


def run_demo(
    engine: Any, tickets: list[dict[str, Any]], *, progress: bool = True
) -> list[dict[str, Any]]:
    """Run the triage graph over ``tickets``; one final state per ticket."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from agentbranch.demo.triage import DEFAULT_TEAM_TAKE_AT, build_triage_graph, default_policy

    take_at = DEFAULT_TEAM_TAKE_AT
    if engine.calibration is not None and "team" in engine.calibration.thresholds:
        take_at = engine.calibration.thresholds["team"]
    graph = build_triage_graph(engine, policy=default_policy(None, take_at=take_at))
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


def _decided(rec: dict[str, Any]) -> str:
    by = rec.get("decided_by", "?")
    if rec.get("goto"):
        return f"{by} → {rec['goto']}"
    return by


def demo_table(tickets: list[dict[str, Any]], states: list[dict[str, Any]], title: str) -> Table:
    table = Table(title=title, show_lines=False, expand=False)
    table.add_column("ticket", max_width=46, overflow="fold")
    table.add_column("question", style="cyan")
    table.add_column("label", style="bold")
    table.add_column("probabilities")
    table.add_column("entropy", justify="right")
    table.add_column("conf", justify="right")
    table.add_column("band")
    table.add_column("decided by")
    table.add_column("queue")
    for ticket, state in zip(tickets, states):
        records = state.get("decisions") or {}
        first = True
        for qid, rec in records.items():
            band = rec.get("band", "?")
            band_style = {"take": "green", "fallback": "yellow", "review": "magenta"}.get(
                band, "red"
            )
            queue = state.get("queue") or "-"
            table.add_row(
                f"{ticket['id']} {_short(ticket['ticket'], 70)}" if first else "",
                qid,
                str(rec.get("label")),
                _fmt_probs(rec.get("probabilities") or {}),
                f"{rec.get('entropy', float('nan')):.2f}",
                f"{rec.get('confidence', float('nan')):.2f}",
                f"[{band_style}]{band}[/{band_style}]",
                _decided(rec),
                (f"[yellow]{queue}[/yellow]" if queue == "human_triage" else queue)
                if first
                else "",
                end_section=qid == list(records)[-1],
            )
            first = False
    return table


@app.command()
def demo(
    tickets: Annotated[
        Path | None, typer.Option(help="JSON Lines tickets (default: the shipped sample).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N tickets.")] = None,
    calibration: Annotated[
        Path | None, typer.Option(help="A calibration file from `agentbranch calibrate`.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines instead.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every decision.")] = False,
) -> None:
    """Run the support-triage graph over sample tickets and show every decision."""
    _quiet_logs(verbose)
    rows = load_tickets(tickets)[:limit]
    with err.status("loading the engine…"):
        engine, reason = _engine(calibration)
    err.print(f"[dim]engine:[/dim] {engine.reader.name} ({engine.reader.model}) — {reason}")
    states = run_demo(engine, rows, progress=not as_json and len(rows) > 5)
    if as_json:
        for t, s in zip(rows, states):
            print(json.dumps({"id": t["id"], **s}, default=str))
        return
    console.print(demo_table(rows, states, f"support triage on {engine.reader.model}"))
    taken = sum(s.get("queue") != "human_triage" for s in states)
    console.print(
        f"{len(states)} tickets: {taken} routed by the engine, "
        f"{len(states) - taken} sent to [yellow]human_triage[/yellow] (low-confidence team). "
        "Bands: take ≥ the team threshold; fallback → human_triage."
    )


# -- decide ---------------------------------------------------------------------------


def _parse_option(text: str) -> tuple[str, str | None]:
    name, sep, desc = text.partition("=")
    return name.strip(), (desc.strip() or None) if sep else None


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
    questions: Annotated[
        Path | None, typer.Option(help="JSON file: {id: wire question} (System One shape).")
    ] = None,
    calibration: Annotated[Path | None, typer.Option()] = None,
    permutations: Annotated[int, typer.Option(help="Option orders to average.")] = 1,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Answer one or more questions about STATE and print the decisions."""
    import agentbranch as ab
    from agentbranch.errors import AgentBranchError

    _quiet_logs(verbose)
    if state == "-":
        state = sys.stdin.read()
    qs: dict[str, Any] = {}
    try:
        if questions is not None:
            qs.update(json.loads(questions.read_text("utf-8")))
        if choice_q:
            if not option:
                raise typer.BadParameter("--choice needs --option (at least two)")
            qs["choice"] = ab.choice(choice_q, dict(_parse_option(o) for o in option))
        if yes_no_q:
            qs["yes_no"] = ab.yes_no(yes_no_q, yes=yes, no=no)
        if score_q:
            if not level:
                raise typer.BadParameter("--score needs --level (at least two)")
            qs["score"] = ab.score(score_q, level)
        if not qs:
            raise typer.BadParameter("ask something: --choice, --yes-no, --score or --questions")
        engine, reason = _engine(calibration, permutations)
        decisions = engine.decide(state, qs)
    except AgentBranchError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
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
    labelled: Annotated[Path, typer.Argument(help="Labelled JSON Lines (docs/calibration.md).")],
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
    min_examples: Annotated[int, typer.Option(help="Fewer per question: use the type's T.")] = 10,
    permutations: Annotated[int, typer.Option(help="Option orders the engine averages.")] = 1,
    seed: Annotated[int, typer.Option()] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Fit temperatures on LABELLED examples; report accuracy, ECE, Brier and coverage
    before/after; save the calibration; draw a reliability diagram."""
    from rich.progress import Progress

    from agentbranch import calibrate as cal
    from agentbranch.errors import AgentBranchError

    _quiet_logs(verbose)
    if by not in ("question", "type"):
        raise typer.BadParameter("--by must be 'question' or 'type'")
    try:
        extra = json.loads(questions.read_text("utf-8")) if questions else None
        examples = cal.load_labelled(labelled, extra)
        engine, reason = _engine(None, permutations)
        err.print(f"[dim]engine:[/dim] {engine.reader.name} ({engine.reader.model}) — {reason}")
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task("reading examples", total=len(examples))
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
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    report.calibration.save(out)
    if diagram is not None:
        cal.reliability_diagram(report.eval_before, report.eval_after, diagram)
    if as_json:
        print(json.dumps(report.as_dict(), indent=2))
        return
    where = (
        "held-out" if report.held_out else "fit set (in-sample: use --holdout for an honest figure)"
    )
    table = Table(title=f"calibration: {report.n_fit} fit / {report.n_eval} evaluated ({where})")
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
    console.print(table)
    console.print(
        f"saved [bold]{out}[/bold] (load with DecisionEngine(calibration={str(out)!r}) or "
        f"AGENTBRANCH_CALIBRATION={out})"
        + (f"; reliability diagram [bold]{diagram}[/bold]" if diagram else "")
    )
    if report.calibration.thresholds:
        console.print(
            "suggested take thresholds (Policy(take_at=...)): "
            + ", ".join(f"{q}={v:.3f}" for q, v in report.calibration.thresholds.items())
        )


# -- engine ---------------------------------------------------------------------------


@app.command()
def engine(
    load: Annotated[bool, typer.Option(help="Also build the engine (loads the model).")] = False,
) -> None:
    """Print which engine the environment selects, and why."""
    import os

    from agentbranch import selection as sel
    from agentbranch.errors import AgentBranchError

    _quiet_logs(False)
    try:
        choice = sel.select()
    except AgentBranchError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    console.print(f"[bold]{choice.kind}[/bold]: {choice.reason}")
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
        else:
            console.print(f"  {key}={value}")
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

    _quiet_logs(False)
    raise typer.Exit(command(json_out, plot, quick, vllm, vllm_model, cpu))


if __name__ == "__main__":  # python -m agentbranch.cli
    app()
