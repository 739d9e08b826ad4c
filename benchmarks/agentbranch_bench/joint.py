"""One joint 3-question read vs the same questions as 3 single reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentbranch_bench.results import BenchResult, Report
from agentbranch_bench.timing import paired
from agentbranch_bench.workload import THREAD, questions

__all__ = ["joint_vs_singles"]


def joint_vs_singles(
    report: Report, tick: Callable[[str], None], reader: Any, model: str, pairs: int
) -> None:
    """One joint 3-question read of ``THREAD`` vs the same 3 questions as single reads,
    through default engines on ``reader``."""
    import agentbranch as ab

    q = questions()
    single, joint = ab.DecisionEngine(reader), ab.DecisionEngine(reader, joint=True)
    t_single, t_joint = paired(
        lambda: single.decide(THREAD, q), lambda: joint.decide(THREAD, q), pairs
    )
    # What bounds the ratio: the model reads the state once instead of three times,
    # but the joint prompt also carries all three questions.
    tokens = {
        f"{name}_prompt_tokens": (e.decide(THREAD, q).usage or {}).get("input_tokens")
        for name, e in (("single", single), ("joint", joint))
    }
    report.results.append(
        BenchResult(
            f"one joint 3-question read vs 3 single reads ({model} DiffusionGemma)",
            t_single / t_joint,
            "× faster",
            "≥ 2",
            {"single_s": t_single, "joint_s": t_joint, "pairs": pairs, **tokens},
        )
    )
    tick(
        f"joint vs singles, {model}: {t_single / t_joint:.2f}× (prompt tokens "
        f"{tokens['single_prompt_tokens']} vs {tokens['joint_prompt_tokens']})"
    )
