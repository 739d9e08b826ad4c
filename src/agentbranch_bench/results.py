"""What a run measured: ``BenchResult`` per comparison, the ``Report`` of a run, and
whether each result meets the target printed beside it."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class BenchResult:
    """One measurement: ``value`` (a ratio, or decisions/s for the sweep) and what it
    compares."""

    name: str
    value: float
    unit: str
    target: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


_TARGET = re.compile(r"\s*([≥≤])\s*([0-9.]+)(?:\s+at\s+([0-9]+))?\s*")


def target_met(result: BenchResult) -> bool | None:
    """Whether ``result`` meets its target (``"≥ 0.85"``, ``"≤ 1.05"``, ``"≥ 3 at 32"``:
    only for the result measured at 32 callers); ``None`` when there is no target, it
    is not for this result, or it cannot be read."""
    match = _TARGET.fullmatch(result.target or "")
    if match is None:
        return None
    sign, bound, at = match.groups()
    if at is not None and not re.search(rf"\b{at} callers\b", result.name):
        return None
    try:
        value = float(bound)
    except ValueError:
        return None
    return result.value >= value if sign == "≥" else result.value <= value


def target_text(result: BenchResult) -> str:
    """The target column of the bench table: the target and whether it was met."""
    met = target_met(result)
    if met is None:
        return result.target or ""
    return f"{result.target} {'✓ met' if met else '✗ missed'}"


@dataclass
class Report:
    """A run: the comparisons (``results``), the concurrency sweep, the calling patterns
    (each a fraction of its bound, ``agentbranch_bench.pattern_part``), the cold start
    (median seconds per phase by kind of process, ``agentbranch_bench.cold_start``)."""

    results: list[BenchResult] = field(default_factory=list)
    sweep: dict[str, dict[int, float]] = field(default_factory=dict)
    patterns: list[BenchResult] = field(default_factory=list)
    cold_start: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "results": [{**asdict(r), "met": target_met(r)} for r in self.results],
            "patterns": [{**asdict(r), "met": target_met(r)} for r in self.patterns],
            "cold_start": self.cold_start,
            "sweep": {k: {str(n): v for n, v in pts.items()} for k, pts in self.sweep.items()},
            "notes": self.notes,
            "seconds": round(self.seconds, 1),
        }
