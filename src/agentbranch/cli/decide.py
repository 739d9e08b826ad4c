"""``agentbranch decide STATE --choice/--yes-no/--score ...``: one decision, as a table;
``--each FILE`` decides every line of FILE with one engine, a ``decide_many`` per batch,
each line's JSON record written as soon as its batch is decided (``decide_lines``).
``--timings`` says where the time went (loading the model, deciding); a one-shot call
that took longer than ``SLOW_S`` says it unasked, on stderr.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from agentbranch.cli.common import (
    console,
    err,
    exit_on_error,
    fail,
    load_engine,
    quiet_logs,
    read_questions,
)

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["SLOW_S", "Line", "Timings", "decide", "decide_lines", "parse_lines"]

#: A one-shot decide slower than this says on stderr where its time went.
SLOW_S = 5.0


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


def decide(
    state: Annotated[
        str | None, typer.Argument(help="The state text ('-' reads stdin); or use --each.")
    ] = None,
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
        Path | None,
        typer.Option(help="The questions file: JSON {id: question} (docs/questions.md)."),
    ] = None,
    calibration: Annotated[Path | None, typer.Option()] = None,
    permutations: Annotated[int, typer.Option(min=1, help="Option orders to average.")] = 1,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    each: Annotated[
        Path | None,
        typer.Option(
            help="Decide every line of this file ('-': stdin) in one process: JSON Lines "
            '({"state": ..., "id": ...}) or plain text lines; one JSON record a line.'
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="States a read holds (--each).")] = 32,
    timings: Annotated[
        bool, typer.Option("--timings", help="Say on stderr where the time went: load, decide.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Answer one or more questions about STATE and print the decisions.

    With --each FILE, decide every line of FILE (or stdin, '-') with one engine: one JSON
    record per line, {"line": N, "id": ..., "decisions": {...}}, or {"line": N, "error":
    ...} for a line that could not be read or decided; the exit status is 1 when any
    line failed."""
    import agentbranch as ab

    quiet_logs(verbose)
    if (state is None) == (each is None):
        raise typer.BadParameter("give one STATE ('-' reads stdin) or --each FILE, not both")
    if state == "-":
        try:
            state = sys.stdin.read()
        except UnicodeDecodeError as e:
            raise fail(f"the state on stdin is not UTF-8 text (byte {e.start})") from None
    qs: dict[str, Any] = {}
    answers: list[str] = []  # what an --example may name
    with exit_on_error():
        if questions is not None:
            qs.update(read_questions(questions))
        if choice_q:
            if not option:
                raise typer.BadParameter("--choice needs --option (at least two)")
            split = (o.partition("=") for o in option)  # NAME or NAME=description
            parsed = [(name.strip(), desc.strip() or None) for name, _, desc in split]
            names = [name for name, _ in parsed]
            if len(set(names)) < len(names):  # a dict would keep one silently
                ab.choice(choice_q, names)  # raises the library's own message
            qs["choice"] = ab.choice(choice_q, dict(parsed), examples=_examples_for(example, names))
            answers += names
        if yes_no_q:
            qs["yes_no"] = ab.yes_no(
                yes_no_q, yes=yes, no=no, examples=_examples_for(example, ["yes", "no"])
            )
            answers += ["yes", "no"]
        if score_q:
            if not level:
                raise typer.BadParameter("--score needs --level (at least two)")
            qs["score"] = ab.score(score_q, level, examples=_examples_for(example, level))
            answers += level
        if example and not _examples_for(example, answers):
            raise typer.BadParameter(
                "--example ANSWER=TEXT must name an option, level, yes or no of a question "
                "given with --choice, --score or --yes-no"
            )
        if not qs:
            raise typer.BadParameter("ask something: --choice, --yes-no, --score or --questions")
        engine, reason = load_engine(calibration, permutations)
        if each is not None:
            _each(engine, each, qs, batch_size, timings)
        start = time.perf_counter()
        engine.warmup()  # loads the model: timed apart from the decision
        loaded = time.perf_counter()
        decisions = engine.decide(state, qs)
        spent = Timings(loaded - start, time.perf_counter() - loaded, 1)
    if timings or spent.load_s + spent.decide_s > SLOW_S:
        hint = "" if timings else "; to decide many states with one load, use --each FILE"
        err.print(f"[dim]took {spent.line()}{hint}[/dim]", highlight=False, soft_wrap=True)
    if as_json:
        print(json.dumps(decisions.to_records(), indent=2))
        return
    title = f"{engine.reader.name} ({engine.reader.model})"
    table = Table("question", "label", "probabilities", "entropy", "confidence", title=title)
    for question_id, d in decisions.items():
        top = sorted(d.probabilities.items(), key=lambda kv: -kv[1])[:5]
        probs = " ".join(f"{k} {v:.2f}" for k, v in top)
        table.add_row(question_id, d.label, probs, f"{d.entropy:.3f}", f"{d.confidence:.3f}")
    console.print(table)
    err.print(f"[dim]{reason}[/dim]")


def _each(
    engine: Engine, source: Path, questions: dict[str, Any], size: int, timings: bool
) -> None:
    """``--each``: every line decided, one record each; exit 1 when any line failed."""
    try:
        raw = sys.stdin.buffer if str(source) == "-" else source.open("rb")
    except OSError as e:
        raise fail(f"--each {source}: {e.strerror or e}") from None
    with raw:
        failed, spent = decide_lines(engine, raw, questions, batch_size=size)
    if timings:
        err.print(f"[dim]took {spent.line()}[/dim]", highlight=False, soft_wrap=True)
    if failed:
        raise fail(f"{failed} line(s) could not be decided; their records say why", 1)
    raise typer.Exit(0)


@dataclass
class Line:
    """One input line: its number, the state and id it gave, or why it is unusable."""

    number: int
    state: Any = None
    id: Any = None
    error: str | None = None


@dataclass
class Timings:
    """Where the time went: loading the model, and deciding."""

    load_s: float = 0.0
    decide_s: float = 0.0
    states: int = 0

    def line(self) -> str:
        per = f", {1000 * self.decide_s / self.states:.1f} ms a state" if self.states else ""
        return (
            f"{self.load_s + self.decide_s:.2f} s: loading the model {self.load_s:.2f} s "
            f"(once per process), deciding {self.states} state(s) {self.decide_s:.2f} s{per}"
        )


def parse_lines(raw: Iterable[bytes]) -> Iterator[Line]:
    """Each non-blank line of ``raw`` as a ``Line`` (blank lines are skipped, numbers
    still count them). A line is a state: a JSON object (its state under one of the
    labelled files' ``STATE_KEYS``, with an optional ``"id"`` echoed back; any other
    object is the state itself) or, when it does not start with ``{``, plain text."""
    from agentbranch.calibration.labelled import STATE_KEYS

    for number, data in enumerate(raw, 1):
        try:
            text = data.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            yield Line(number, error=f"line {number} is not UTF-8 text (byte {e.start})")
            continue
        if not text:
            continue
        if not text.startswith("{"):
            yield Line(number, state=text)
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            yield Line(
                number,
                error=f"line {number} starts with '{{' but is not a JSON object ({e.msg} at "
                f"column {e.colno}); write one JSON object per line, or text that does not "
                "start with '{'",
            )
            continue
        key = next((k for k in STATE_KEYS if k in obj), None)
        yield Line(number, state=obj if key is None else obj[key], id=obj.get("id"))


def _record(line: Line, decisions: Any = None, error: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"line": line.number}
    if line.id is not None:
        out["id"] = line.id
    return out | ({"decisions": decisions.to_records()} if error is None else {"error": error})


def decide_lines(
    engine: Engine,
    raw: Iterable[bytes],
    questions: Mapping[str, Any],
    *,
    batch_size: int = 32,
) -> tuple[int, Timings]:
    """Decide every line of ``raw``; write one record a line to stdout (a line that cannot
    be read or decided gets an error record and the others go on). Returns how many lines
    failed, and the timings."""
    from agentbranch.core.errors import AgentBranchError

    timings = Timings()
    start = time.perf_counter()
    engine.warmup()  # the model loads here, not inside the first batch
    timings.load_s = time.perf_counter() - start
    failed = 0
    lines = parse_lines(raw)
    while batch := list(islice(lines, batch_size)):
        good = [line for line in batch if line.error is None]
        records = {line.number: _record(line, error=line.error) for line in batch if line.error}
        start = time.perf_counter()
        try:
            decided = engine.decide_many([line.state for line in good], questions) if good else []
            for line, decisions in zip(good, decided):
                records[line.number] = _record(line, decisions)
        except AgentBranchError:
            # One bad state refuses the whole batch: decide each alone, to say which.
            for line in good:
                try:
                    records[line.number] = _record(line, engine.decide(line.state, questions))
                except AgentBranchError as e:
                    records[line.number] = _record(line, error=f"line {line.number}: {e}")
        timings.decide_s += time.perf_counter() - start
        for line in batch:
            record = records[line.number]
            failed += "error" in record
            timings.states += "decisions" in record
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return failed, timings
