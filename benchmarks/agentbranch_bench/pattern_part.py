"""The calling patterns in ``benchmarks/bench.py``: each pattern's fraction of its bound
(``agentbranch_bench.patterns``) per reader that ran, with its target and whether the
pattern answered as ``decide_many``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentbranch_bench.patterns import measure, pattern_target
from agentbranch_bench.results import BenchResult, Report

__all__ = ["add_patterns", "embedded_patterns", "reader_patterns"]


def add_patterns(report: Report, result: dict[str, Any]) -> None:
    """One ``BenchResult`` per pattern of ``result`` (``measure``'s, variant ``now``)
    into ``report.patterns``."""
    differ = set(result["labels_differ"])
    for name, row in result["patterns"].items():
        now = row["now"]
        report.patterns.append(
            BenchResult(
                f"{result['reader']}: {name}",
                now["fraction"],
                "of the bound",
                pattern_target(name),
                {
                    "reader": result["reader"],
                    "pattern": name,
                    "labels_equal_decide_many": f"{name} (now)" not in differ,
                    "bound_s": row["bound_s"],
                    "decide_many_s": row["decide_many_s"],
                    "no_engine_s": row["no_engine_s"],
                    "no_engine_all_in_s": row["no_engine_all_in_s"],
                    "fraction_all_in": now["fraction_all_in"],
                    "pattern_s": now["pattern_s"],
                    "fraction_of_medians": now["fraction_of_medians"],
                    "reader_calls": now["reader_calls"],
                    "reads_per_run": now["reads_per_run"],
                    "questions": result["questions"],
                    "reps": result["reps"],
                },
            )
        )


def embedded_patterns(report: Report, tick: Callable[[str], None], *, quick: bool) -> None:
    """The patterns on the embedded CPU default (MiniLM), 32 callers."""
    from agentbranch.engine.readers.embedded import EmbeddedReader

    reader = EmbeddedReader().load()
    try:
        result = measure(
            reader,
            "embedded (MiniLM, CPU)",
            n=32,
            single=4 if quick else 16,
            reps=3 if quick else 5,
            tick=tick,
        )
    finally:
        reader.close()
    add_patterns(report, result)
    tick(f"embedded calling patterns: {_summary(result)}")


def _summary(result: dict[str, Any]) -> str:
    return ", ".join(
        f"{name} {row['now']['fraction']:.2f}" for name, row in result["patterns"].items()
    )


def reader_patterns(
    report: Report, tick: Callable[[str], None], reader: Any, label: str, *, quick: bool
) -> None:
    """The patterns on another reader (the vLLM part's in-process reader): one question,
    fewer repetitions (each read is slower)."""
    result = measure(
        reader,
        label,
        n=32,
        single=2 if quick else 4,
        reps=2 if quick else 3,
        questions=1,
        tick=tick,
    )
    add_patterns(report, result)
    tick(f"{label} calling patterns: {_summary(result)}")
