"""``agentbranch decide --each FILE``: many states in one process, one JSON record a line.

The engine loads once; lines are read in batches (one ``decide_many`` per batch), and
each line's record is written as soon as its batch is decided. A line is a state: a JSON
object (``{"state": ...}`` or ``{"text": ...}``, with an optional ``"id"`` echoed back;
any other object is the state itself) or, when it does not start with ``{``, plain text.
A line that cannot be read or decided gets an error record and the others go on.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["Line", "Timings", "decide_lines", "parse_lines"]

#: Keys a line's state may sit under (as in labelled files); the first present wins.
STATE_KEYS = ("state", "text", "input")


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
    still count them)."""
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
        if key is None:
            yield Line(number, state=obj, id=obj.get("id"))
        else:
            yield Line(number, state=obj[key], id=obj.get("id"))


def _record(line: Line, decisions: Any = None, error: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"line": line.number}
    if line.id is not None:
        out["id"] = line.id
    if error is None:
        out["decisions"] = decisions.to_records()
    else:
        out["error"] = error
    return out


def _batches(lines: Iterable[Line], size: int) -> Iterator[list[Line]]:
    batch: list[Line] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def decide_lines(
    engine: Engine,
    raw: Iterable[bytes],
    questions: Mapping[str, Any],
    out: IO[str] | None = None,
    *,
    batch_size: int = 32,
) -> tuple[int, Timings]:
    """Decide every line of ``raw``; write one record a line to ``out``. Returns how many
    lines failed, and the timings. ``out`` defaults to ``sys.stdout`` as it is now."""
    from agentbranch.core.errors import AgentBranchError

    out = sys.stdout if out is None else out

    timings = Timings()
    start = time.perf_counter()
    engine.warmup()  # the model loads here, not inside the first batch
    timings.load_s = time.perf_counter() - start
    failed = 0
    for batch in _batches(parse_lines(raw), batch_size):
        records: dict[int, dict[str, Any]] = {}
        good = [line for line in batch if line.error is None]
        for line in batch:
            if line.error is not None:
                records[line.number] = _record(line, error=line.error)
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
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()
    return failed, timings
