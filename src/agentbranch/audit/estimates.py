"""How many decisions labels stand for (the sum of ``1/rate``): a count when every rate
is 1, else an estimate said with its interval; and levels as a person writes them."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["DecisionsEstimate", "decisions_estimate", "decisions_text", "level_text", "percent"]


def _digits(level: float) -> int:
    """Decimals of ``level`` as a percentage: all of them when it has four or fewer as a
    fraction (95%, 98.75%), else enough to show its error ``1 - level`` to within a tenth
    of itself (99.6% for 0.995833)."""
    for d in range(5):
        if abs(round(level, d) - level) < 1e-12:
            return max(0, d - 2)
    error = 100.0 * (1.0 - level)
    for d in range(7):
        shown = 100.0 - round(100.0 * level, d)
        if error > 0 and shown > 0 and abs(shown - error) <= 0.1 * error:
            return d
    return 6


def percent(level: float) -> str:
    """``level`` as a person writes it: ``"95%"``, ``"99.6%"`` (never ``"100%"`` for
    a level below 1)."""
    if not 0.0 < level < 1.0:  # (NaN and infinities too)
        return f"{level:.0%}"
    return f"{100.0 * level:.{_digits(level)}f}%"


def level_text(level: float) -> str:
    """``level`` as a fraction, rounded the same way: ``"0.95"``, ``"0.9"``, ``"0.996"``."""
    if not 0.0 < level < 1.0:
        return f"{level:g}"
    return f"{round(level, _digits(level) + 2):g}"


@dataclass(frozen=True)
class DecisionsEstimate:
    """How many decisions some labels stand for: ``value`` and its interval."""

    labels: int
    value: float
    low: float
    high: float
    level: float

    @property
    def exact(self) -> bool:
        """Every label was kept at rate 1: the value is a count."""
        return self.low == self.value == self.high


def decisions_estimate(weights: Iterable[float], level: float = 0.95) -> DecisionsEstimate:
    """The decisions labels of ``weights`` (each ``1/rate``) stand for, with the
    two-sided ``level`` interval (it describes the traffic, it decides nothing): exact
    (Garwood, Poisson) with one rate, Horvitz–Thompson with a normal interval with
    several; never below the labels themselves."""
    ws = [float(w) for w in weights]
    counted = sum(1 for w in ws if w == 1.0)
    sampled = Counter(w for w in ws if w != 1.0)
    value = counted + sum(w * m for w, m in sampled.items())
    if not sampled:
        return DecisionsEstimate(len(ws), value, value, value, level)
    alpha = 1 - level
    if len(sampled) == 1:
        from scipy.stats import chi2

        ((w, m),) = sampled.items()
        low = counted + w * chi2.ppf(alpha / 2, 2 * m) / 2
        high = counted + w * chi2.ppf(1 - alpha / 2, 2 * m + 2) / 2
    else:
        from scipy.stats import norm

        variance = sum((w * w - w) * m for w, m in sampled.items())  # Σ (1 - π) / π²
        spread = norm.ppf(1 - alpha / 2) * math.sqrt(variance)
        low, high = value - spread, value + spread
    return DecisionsEstimate(len(ws), value, max(low, float(len(ws))), high, level)


def decisions_text(estimate: DecisionsEstimate) -> str:
    """``"75 labels standing for 75 decisions"`` when it is a count; ``"62 labels
    standing for an estimated 78 decisions (95% interval 66–101)"`` when it is not."""
    e = estimate
    if e.exact:
        return f"{e.labels} labels standing for {e.value:.0f} decisions"
    return (
        f"{e.labels} labels standing for an estimated {e.value:.0f} decisions "
        f"({percent(e.level)} interval {math.floor(e.low):.0f}–{math.ceil(e.high):.0f})"
    )
