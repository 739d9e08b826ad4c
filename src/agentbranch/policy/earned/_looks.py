"""When an earned threshold is re-estimated (looks), and what error each look spends.

A look re-runs the fixed-sequence test on the epoch's labels at its own error
``alpha_k``; the looks' errors sum to at most ``alpha`` (union bound). ``Looks.doubling``
(what ``Earned`` uses) looks at ``first, 2·first, 4·first …`` labels, look ``k``
spending ``alpha / 2**(k+1)``; ``Looks(first, growth, power)`` is the general schedule
(looks every ``growth`` more labels, polynomial spending ``alpha (k+1)^-power / ζ(power)``).
``Looks.doubling(first, head)`` spends the fractions ``head`` of ``alpha`` at its first
looks and halves of what is left after them (a learning question's written read: its
first looks spend what they would spend without learning, ``learn.ladder``).
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

    ``power`` ``None``: ``alpha / 2**(k+1)``, or with ``head`` the fraction ``head[k]`` of
    ``alpha`` at its first ``len(head)`` looks and ``rest / 2**(k - len(head) + 1)`` after
    them (``rest``: ``alpha`` less what ``head`` spends); otherwise
    ``alpha (k+1)^-power / ζ(power)``.
    """

    first: int
    growth: float = 1.25
    power: float | None = 1.3
    head: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.first < 1 or not self.growth > 1.0:
            raise ValueError(f"bad look schedule {self!r}")
        if self.power is not None and not self.power > 1.0:
            raise ValueError(f"spending power must be > 1, got {self.power!r}")
        if self.head and (
            self.power is not None
            or not all(0.0 < h < 1.0 for h in self.head)
            or not math.fsum(self.head) < 1.0
        ):
            raise ValueError(f"bad first looks' spending {self.head!r} for {self!r}")
        if self.power is not None:
            object.__setattr__(self, "_norm", _zeta(self.power))

    @classmethod
    def doubling(cls, first: int, head: tuple[float, ...] = ()) -> Looks:
        """Looks at ``first · 2**k`` labels spending ``alpha / 2**(k+1)`` (with ``head``:
        those fractions of ``alpha`` first, then halves of the rest)."""
        return cls(first, 2.0, None, tuple(head))

    def at(self, k: int) -> int:
        """Labels at which look ``k`` happens (strictly increasing in ``k``)."""
        n = self.first
        for _ in range(k):
            n = max(n + 1, math.ceil(n * self.growth - 1e-9))
        return n

    def alpha(self, alpha: float, k: int) -> float:
        """The error look ``k`` spends out of ``alpha``."""
        if self.power is None:
            if k < len(self.head):
                return alpha * self.head[k]
            rest = 1.0 - math.fsum(self.head)
            return alpha * rest * 0.5 ** (k - len(self.head) + 1)
        return alpha * (k + 1) ** -self.power / self._norm  # type: ignore[attr-defined]

    def due(self, labels: int, done: int) -> bool:
        """Whether look ``done`` (the next one) is due at ``labels`` labels."""
        return labels >= self.at(done)


__all__ = [
    "Looks",
]
