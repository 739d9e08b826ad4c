"""Calibration metrics of scored examples: accuracy, ECE, Brier, NLL (``metrics``), and
the confidence threshold reaching a target precision with the coverage it leaves.

Thresholds are on ``Decision.confidence = 1 − H/ln K`` (what policies compare), not on
the top probability.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from agentbranch.calibration.scored import Scored, top_index
from agentbranch.core.decisions import confidence_from

__all__ = [
    "Metrics",
    "SuggestedThreshold",
    "brier",
    "check_threshold",
    "ece",
    "metrics",
    "nll",
    "suggest_threshold",
]


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


def nll(scored: Sequence[Scored], temperature: float = 1.0) -> float:
    """Mean negative log-likelihood of the true labels (capped at 50 nats each)."""
    if not scored:
        return float("nan")
    total = 0.0
    for s in scored:
        logs = [math.log(p) / temperature if p > 0 else -math.inf for p in s.probs]
        top = max(logs)
        log_z = top + math.log(sum(math.exp(x - top) for x in logs if x > -math.inf))
        total += min(50.0, log_z - logs[s.label_index])
    return total / len(scored)


@dataclass(frozen=True)
class Metrics:
    """Metrics of a set of scored examples (NaN where there are none)."""

    n: int
    accuracy: float
    ece: float
    brier: float
    nll: float
    mean_confidence: float
    threshold: SuggestedThreshold

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN becomes ``None``), the threshold's fields inline."""
        t = self.threshold
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "threshold"}
        out.update(
            target_precision=t.target_precision,
            threshold=t.threshold,
            coverage=t.coverage,
            precision_at_threshold=t.precision,
        )
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in out.items()}


def binned(scored: Sequence[Scored], bins: int) -> list[list[float]]:
    """``[count, Σ top probability, Σ correct]`` per equal-width bin of the top probability."""
    totals = [[0, 0.0, 0.0] for _ in range(bins)]
    for s in scored:
        top = top_index(s)
        p = s.probs[top]
        b = min(bins - 1, int(p * bins))
        totals[b][0] += 1
        totals[b][1] += p
        totals[b][2] += float(top == s.label_index)
    return totals


def ece(scored: Sequence[Scored], bins: int = 10) -> float:
    """Expected calibration error of the top probability over ``bins`` equal-width bins."""
    if not scored:
        return float("nan")
    return sum(abs(c - p) for n, p, c in binned(scored, bins) if n) / len(scored)


def brier(scored: Sequence[Scored]) -> float:
    """Multi-class Brier score, averaged over examples."""
    if not scored:
        return float("nan")
    return sum(
        sum((p - (i == s.label_index)) ** 2 for i, p in enumerate(s.probs)) for s in scored
    ) / len(scored)


def metrics(scored: Sequence[Scored], *, target_precision: float = 0.9, bins: int = 10) -> Metrics:
    """Accuracy, ECE, Brier, NLL and the target-precision threshold of ``scored``."""
    n = len(scored)
    correct = [top_index(s) == s.label_index for s in scored]
    confidences = [confidence_from(s.probs) for s in scored]
    return Metrics(
        n=n,
        accuracy=sum(correct) / n if n else float("nan"),
        ece=ece(scored, bins),
        brier=brier(scored),
        nll=nll(scored),
        mean_confidence=sum(confidences) / n if n else float("nan"),
        threshold=suggest_threshold(confidences, correct, target_precision),
    )
