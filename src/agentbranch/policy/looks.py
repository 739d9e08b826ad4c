"""When an earned threshold is re-estimated (looks), and what error each look spends.

A look re-runs the fixed-sequence test (``thresholds.learn_then_test``) on the labels of
the epoch so far. Each look is a valid test at its own error ``alpha_k`` (conditional on
the confidences seen, which alone decide where looks fall and which candidates are
tested), and the looks' errors sum to at most ``alpha``: by the union bound, with
probability ≥ ``1 - alpha`` no look of the epoch ever opens or lowers a band below the
target, however many looks there are.

Two spendings:

* ``Looks.doubling(first)`` (what ``Earned`` uses): looks at ``first, 2·first, 4·first,
  …`` labels, look ``k`` spending ``alpha / 2**(k+1)`` (cheap early looks, but a label
  count just short of a look waits until it doubles, and late looks spend almost
  nothing);
* ``Looks.dense(first)`` (measured, not adopted): looks every time the labels grow by ``growth``
  (1.25: at 50, 63, 79, 99, 124, … labels), look ``k`` spending
  ``alpha · (k+1)^-power / ζ(power)`` (``power`` 1.3). The errors still sum to
  ``alpha`` (ζ is the Riemann zeta function), but they fall polynomially in the number
  of looks — that is, like a power of ``log(labels)`` — instead of geometrically, so a
  question waits at most a quarter more labels for its next look and a look after
  thousands of labels can still lower the threshold.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

#: ζ(p) for the powers used (scipy-free: ``import agentbranch.policy`` stays light).
_ZETA_TERMS = 200_000


@functools.cache
def _zeta(power: float) -> float:
    """Riemann ζ(power) for power > 1: a partial sum and its integral tail (rel. err ~1e-9)."""
    n = _ZETA_TERMS
    head = math.fsum(k**-power for k in range(1, n))
    return head + n ** (1 - power) / (power - 1) + 0.5 * n**-power


@dataclass(frozen=True)
class Looks:
    """A look schedule: looks at ``ceil(first · growth**k)`` labels (counted from the start
    of the epoch), look ``k`` (0-based) spending ``alpha_k(alpha, k)``.

    ``power`` ``None``: ``alpha / 2**(k+1)``; otherwise ``alpha (k+1)^-power / ζ(power)``.
    """

    first: int
    growth: float = 1.25
    power: float | None = 1.3

    def __post_init__(self) -> None:
        if self.first < 1 or not self.growth > 1.0:
            raise ValueError(f"bad look schedule {self!r}")
        if self.power is not None and not self.power > 1.0:
            raise ValueError(f"spending power must be > 1, got {self.power!r}")
        if self.power is not None:
            object.__setattr__(self, "_norm", _zeta(self.power))

    @classmethod
    def doubling(cls, first: int) -> Looks:
        """Looks at ``first · 2**k`` labels spending ``alpha / 2**(k+1)``."""
        return cls(first, 2.0, None)

    @classmethod
    def dense(cls, first: int) -> Looks:
        """Looks every 25 % more labels, polynomial spending (slower to open than
        ``doubling`` in ``benchmarks/earned_simulation.py``; kept for comparison)."""
        return cls(first)

    def at(self, k: int) -> int:
        """Labels at which look ``k`` happens (strictly increasing in ``k``)."""
        n = self.first
        for _ in range(k):
            n = max(n + 1, math.ceil(n * self.growth - 1e-9))
        return n

    def alpha(self, alpha: float, k: int) -> float:
        """The error look ``k`` spends out of ``alpha``."""
        if self.power is None:
            return alpha * 0.5 ** (k + 1)
        return alpha * (k + 1) ** -self.power / self._norm  # type: ignore[attr-defined]

    def due(self, labels: int, done: int) -> bool:
        """Whether look ``done`` (the next one) is due at ``labels`` labels."""
        return labels >= self.at(done)
