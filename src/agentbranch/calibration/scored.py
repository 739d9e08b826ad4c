"""Scored examples: the engine's uncalibrated reads of labelled examples, read once
(``read_examples``) for everything downstream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentbranch.calibration.labelled import Example
from agentbranch.core.questions import Question

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine


@dataclass(frozen=True)
class Scored:
    """One example read by the engine, uncalibrated."""

    question_id: str
    type: str
    options: tuple[str, ...]
    probs: tuple[float, ...]
    label_index: int


def decide_by_line(
    engine: Engine, examples: Sequence[Example], batch_size: int
) -> Iterator[tuple[int, list[tuple[Example, Any]]]]:
    """``engine``'s decisions of ``examples``, the questions about one source line (one
    state) in one request, one ``decide_many`` per ``batch_size`` lines: per batch, how
    many lines it read and each of its examples with its decision, in file order."""
    requests: list[tuple[Any, dict[str, Question], list[Example]]] = []
    by_line: dict[int, int] = {}
    for i, ex in enumerate(examples):
        key = ex.line or -(i + 1)
        if key in by_line and ex.question_id not in requests[by_line[key]][1]:
            requests[by_line[key]][1][ex.question_id] = ex.question
            requests[by_line[key]][2].append(ex)
            continue
        by_line[key] = len(requests)
        requests.append((ex.state, {ex.question_id: ex.question}, [ex]))
    for start in range(0, len(requests), batch_size):
        chunk = requests[start : start + batch_size]
        results = engine.decide_many([c[0] for c in chunk], [c[1] for c in chunk])
        decided = [
            (ex, decisions[ex.question_id])
            for (_, _, exs), decisions in zip(chunk, results)
            for ex in exs
        ]
        yield len(chunk), decided


def read_examples(
    engine: Engine,
    examples: Sequence[Example],
    *,
    batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
) -> list[Scored]:
    """Read every example with ``engine`` ignoring its calibration (temperature 1),
    batched: one ``decide_many`` per ``batch_size`` states; questions about the same
    source line share one request."""
    import copy

    raw = copy.copy(engine)
    raw.calibration = None
    scored: list[Scored] = []
    for lines, decided in decide_by_line(raw, examples, batch_size):
        scored += [
            Scored(
                ex.question_id, d.type, tuple(d.options), tuple(d.probs), d.options.index(ex.label)
            )
            for ex, d in decided
        ]
        if progress is not None:
            progress(lines)
    return scored


def top_index(s: Scored) -> int:
    """Index of the option with the highest probability (the first of ties)."""
    return max(range(len(s.probs)), key=s.probs.__getitem__)


__all__ = ["Scored", "decide_by_line", "read_examples", "top_index"]
