"""Confidence thresholds: the lowest one reaching a target precision, and checking one.

Thresholds are on ``Decision.confidence = 1 − H/ln K`` (what policies compare), not on
the top probability; coverage is the share of decisions at or above the threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentbranch.calibration.scored import Scored, top_index
from agentbranch.core.decisions import confidence_from

__all__ = ["SuggestedThreshold", "check_threshold", "suggest_threshold"]


@dataclass(frozen=True)
class SuggestedThreshold:
    """The lowest confidence threshold whose kept decisions reach the target precision."""

    target_precision: float
    threshold: float | None  # None: no threshold reaches the target
    coverage: float  # share of decisions at or above the threshold
    precision: float  # precision of those decisions (nan when none kept)


def suggest_threshold(
    confidences: Sequence[float], correct: Sequence[bool], target_precision: float
) -> SuggestedThreshold:
    """The lowest confidence threshold at which the decisions kept (confidence ≥ it)
    are correct at least ``target_precision`` of the time: maximum coverage."""
    pairs = sorted(zip(confidences, correct), key=lambda x: -x[0])
    best: SuggestedThreshold = SuggestedThreshold(target_precision, None, 0.0, float("nan"))
    hits = 0
    for k, (conf, ok) in enumerate(pairs, 1):
        hits += ok
        if k < len(pairs) and pairs[k][0] == conf:
            continue  # a threshold keeps every tie
        if hits / k >= target_precision:
            best = SuggestedThreshold(target_precision, conf, k / len(pairs), hits / k)
    return best


def check_threshold(
    scored: Sequence[Scored], threshold: float | None, target_precision: float
) -> SuggestedThreshold:
    """Coverage and precision of a given threshold on ``scored`` (e.g. a held-out split)."""
    if threshold is None or not scored:
        return SuggestedThreshold(target_precision, threshold, 0.0, float("nan"))
    kept = [top_index(s) == s.label_index for s in scored if confidence_from(s.probs) >= threshold]
    return SuggestedThreshold(
        target_precision,
        threshold,
        len(kept) / len(scored),
        sum(kept) / len(kept) if kept else float("nan"),
    )
