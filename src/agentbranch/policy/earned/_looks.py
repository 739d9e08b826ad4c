"""When an earned threshold is re-estimated (looks), and what error each look spends.

A look re-runs the fixed-sequence test on the epoch's labels at its own error
``alpha_k``; the looks' errors sum to at most ``alpha`` (union bound). ``Looks.doubling``
(what ``Earned`` uses) looks at ``first, 2·first, 4·first …`` labels, look ``k``
spending ``alpha / 2**(k+1)``; ``Looks(first, growth, power)`` is the general schedule
(looks every ``growth`` more labels, polynomial spending ``alpha (k+1)^-power / ζ(power)``).
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


__all__ = [
    "Looks",
]
