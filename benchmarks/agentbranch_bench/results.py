"""What a run measured: ``BenchResult`` per comparison, the ``Report`` of a run, and
whether each result meets the target printed beside it."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "BenchResult",
    "Report",
    "better",
    "loaded",
    "machine_load",
    "target_met",
    "target_text",
]


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


def better(result: BenchResult) -> str:
    """``"higher"`` or ``"lower"``: which way the result improves (its target's sign; a
    time ratio without one is lower-better, every other ratio higher-better)."""
    match = _TARGET.fullmatch(result.target or "")
    if match is not None:
        return "higher" if match.group(1) == "≥" else "lower"
    return "lower" if "(time)" in result.unit else "higher"


#: The machine is loaded when its 1-minute load average exceeds this share of its CPUs:
#: the measured processes then shared the CPU with others, and timings are not
#: trustworthy (a ratio of two timings is, as far as both ran under the same load).
LOADED_SHARE = 0.8


def machine_load() -> dict[str, float]:
    """The 1-minute load average and the CPUs, now (empty where the OS has no load)."""
    import os

    try:
        one, _, _ = os.getloadavg()
    except (AttributeError, OSError):
        return {}
    return {"load1": round(one, 2), "cpus": float(os.cpu_count() or 1)}


def loaded(load: dict[str, float]) -> bool:
    """Whether a ``machine_load()`` reading says the machine was loaded."""
    return bool(load) and load["load1"] > LOADED_SHARE * load["cpus"]


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
    #: ``machine_load()`` when the run started and when it ended
    load_start: dict[str, float] = field(default_factory=dict)
    load_end: dict[str, float] = field(default_factory=dict)

    @property
    def trustworthy(self) -> bool:
        """No reading says the machine was loaded while it ran."""
        return not (loaded(self.load_start) or loaded(self.load_end))

    def load_text(self) -> str:
        """The load line the command prints, and what it means for the results."""
        if not (self.load_start and self.load_end):
            return "load average: unknown on this system"
        cpus = int(self.load_start["cpus"])
        line = (
            f"load average {self.load_start['load1']:.1f} at start, "
            f"{self.load_end['load1']:.1f} at end, on {cpus} CPUs"
        )
        if self.trustworthy:
            return line
        missed = [r for r in (*self.results, *self.patterns) if target_met(r) is False]
        line += (
            f": the machine was loaded (above {LOADED_SHARE:g} x {cpus}), so these timings "
            "are not trustworthy"
        )
        if missed:
            line += (
                f"; {len(missed)} target(s) missed, and load is the likely cause: run again "
                f"when the load average is below {LOADED_SHARE * cpus:.1f}"
            )
        return line

    def as_json(self) -> dict[str, Any]:
        return {
            "results": [{**asdict(r), "met": target_met(r)} for r in self.results],
            "patterns": [{**asdict(r), "met": target_met(r)} for r in self.patterns],
            "cold_start": self.cold_start,
            "sweep": {k: {str(n): v for n, v in pts.items()} for k, pts in self.sweep.items()},
            "notes": self.notes,
            "seconds": round(self.seconds, 1),
            "load": {"start": self.load_start, "end": self.load_end},
            "trustworthy": self.trustworthy,
        }
