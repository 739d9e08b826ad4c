"""The statistics of earned thresholds, in the compact form production runs.

One question's epoch is kept as counts per confidence cell (``Cells``), not a list of
labels: ``learn_then_test_cells`` walks the candidate grid (Learn-then-Test, stratified
by the thresholds in force), ``predicted_entry_cells`` picks the second walk's entry
from the confidences only; ``pvalue_below`` and ``grid`` are the scalar pieces (the
drift test is ``_drift``). When a threshold is re-estimated, and what error each look
spends, is ``Looks``: each look re-runs the test on the epoch's labels at its own
``alpha_k``, and the looks' errors sum to at most ``alpha`` (union bound);
``Looks.doubling`` (what ``Earned`` uses) looks at ``first, 2·first, 4·first …`` labels
spending ``alpha / 2**(k+1)``, with ``head`` the fractions of ``alpha`` its first looks
spend (a learning question's written read, ``learn.ladder``). The guarantee and why each
rule fails closed: docs/earned.md and tests/_reference_statistics.py, the list forms
these are checked against.
"""

from __future__ import annotations

import base64
import functools
import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: The most candidate thresholds a grid may hold (``step`` 0.001 over [0, 1]): a look
#: walks them all, and confidences finer than that separate nothing.
MAX_CANDIDATES = 1001


def finite(*values: float) -> bool:
    """Whether every value is a finite number (numpy scalars included)."""
    try:
        return all(math.isfinite(float(v)) for v in values)
    except (TypeError, ValueError, OverflowError):
        return False


def pvalue_below(right: float, n: float, precision: float) -> float:
    """Exact one-sided p-value of H0 "precision < ``precision``" after ``right`` of ``n``
    labels agreed: ``P(X >= right)`` for ``X ~ Binomial(n, precision)`` (the boundary of
    H0 is the worst case). 1 when ``n == 0``. Non-integer counts (effective sizes of a
    weighted sample) use the same beta-function form. Fails closed: any input that is
    not a finite number (or a count outside ``0 <= right <= n``) gives 1, never a NaN."""
    if not finite(right, n, precision) or not 0.0 < precision < 1.0:
        return 1.0
    if n <= 0 or right <= 0 or right > n * (1 + 1e-9):
        return 1.0
    right = min(right, n)
    # Imported here: scipy.special costs ~0.3 s, paid by Earned users at their first
    # test rather than by every `import agentbranch`.
    from scipy.special import betainc

    # P(X >= k) = I_p(k, n - k + 1), the Clopper–Pearson relation.
    p = float(betainc(right, n - right + 1, precision))
    return p if math.isfinite(p) else 1.0


def min_band(precision: float, alpha: float) -> int:
    """The fewest labels with which a band can reject at all (every label right)."""
    return max(1, math.ceil(math.log(alpha) / math.log(precision)))


def grid_size(max_take_at: float, min_take_at: float, step: float) -> float:
    """How many candidates ``grid`` would make (``inf`` when it cannot be said)."""
    if not finite(max_take_at, min_take_at, step) or step <= 0:
        return math.inf
    return math.floor((max_take_at - min_take_at) / step + 1e-9) + 1


def grid(max_take_at: float, min_take_at: float, step: float) -> list[float]:
    """Candidate thresholds, safest first. ``ValueError`` when there would be more than
    ``MAX_CANDIDATES`` (or ``step`` is not a positive finite number)."""
    if grid_size(max_take_at, min_take_at, step) > MAX_CANDIDATES:
        raise ValueError(
            f"step {step!r} from {max_take_at!r} down to {min_take_at!r} makes more than "
            f"{MAX_CANDIDATES} candidate thresholds; use a step of at least "
            f"{max(0.0, max_take_at - min_take_at) / (MAX_CANDIDATES - 1):.3g}"
        )
    out, k = [], 0
    while True:
        t = round(max_take_at - k * step, 10)
        if t < min_take_at - 1e-12:
            break
        out.append(t)
        k += 1
    return out


class OffGrid(Exception):  # noqa: N818 - a signal, not an error a user sees
    """A threshold in force that is not a cell boundary: the question's cells must be
    rebuilt from its records with that boundary added (``value``)."""

    def __init__(self, value: float) -> None:
        super().__init__(value)
        self.value = value


class Cells:
    """Counts per confidence cell and review flag for one epoch (see the module doc).

    Cell ``c`` holds the confidences ``x`` with ``bisect_right(boundaries, x) == c``:
    ``boundaries[c-1] <= x < boundaries[c]``, so ``x >= t`` for a boundary ``t`` is
    exactly "cell above ``t``'s index", with the same float comparisons a list of labels
    would make."""

    __slots__ = ("boundaries", "in_force", "n", "right", "weight", "conf")

    def __init__(self, boundaries: Sequence[float]) -> None:
        self.boundaries: tuple[float, ...] = tuple(boundaries)
        size = 2 * (len(self.boundaries) + 1)
        self.n = array("q", bytes(8 * size))
        self.right = array("q", bytes(8 * size))
        self.weight = array("d", bytes(8 * size))
        self.conf = array("d", bytes(8 * size))
        #: thresholds in force when this epoch's labels were made, with their label counts
        self.in_force: dict[float, int] = {}

    def add(
        self, confidence: float, correct: bool, weight: float, in_force: float | None, review: bool
    ) -> None:
        """Count one label (``OffGrid`` if ``in_force`` is not a boundary)."""
        if in_force is not None and in_force not in self.in_force:
            i = bisect_right(self.boundaries, in_force)
            if i == 0 or self.boundaries[i - 1] != in_force:
                raise OffGrid(in_force)
        j = 2 * bisect_right(self.boundaries, confidence) + (1 if review else 0)
        self.n[j] += 1
        self.right[j] += 1 if correct else 0
        self.weight[j] += weight
        self.conf[j] += min(1.0, max(0.0, confidence))
        if in_force is not None:
            self.in_force[in_force] = self.in_force.get(in_force, 0) + 1

    def copy(self) -> Cells:
        new = Cells.__new__(Cells)
        new.boundaries = self.boundaries
        new.n, new.right = self.n[:], self.right[:]
        new.weight, new.conf = self.weight[:], self.conf[:]
        new.in_force = dict(self.in_force)
        return new

    @property
    def labels(self) -> int:
        return sum(self.n)

    def weighted_share(self, t: float) -> float | None:
        """The share of the labels' weight (each ``1 / rate``) at confidence ``>= t``:
        the share of the decisions the band ``t`` holds; ``None`` when there is no
        weight or the share is not a finite number."""
        lo = 2 * (bisect_left(self.boundaries, t) + 1)  # the first cell with x >= t
        total = math.fsum(self.weight)
        share = math.fsum(self.weight[lo:]) / total if total > 0 else math.nan
        return share if math.isfinite(share) else None

    def view(self) -> _View:
        return _View(self)

    def to_dict(self) -> dict:
        """The counts as JSON-safe values (arrays base64-encoded), for a checkpoint."""
        return {
            "boundaries": list(self.boundaries),
            **{name: _b64(getattr(self, name)) for name in ("n", "right", "weight", "conf")},
            "in_force": [[k, v] for k, v in self.in_force.items()],
        }

    @classmethod
    def from_dict(cls, raw: dict) -> Cells:
        """The inverse of ``to_dict``; ``ValueError`` when the arrays do not fit."""
        cells = cls(raw["boundaries"])
        for name, code in (("n", "q"), ("right", "q"), ("weight", "d"), ("conf", "d")):
            values = array(code, base64.b64decode(raw[name]))
            if len(values) != len(getattr(cells, name)):
                raise ValueError("cells of another size")
            setattr(cells, name, values)
        cells.in_force = {float(k): int(v) for k, v in raw["in_force"]}
        return cells


def _b64(a: array) -> str:
    return base64.b64encode(bytes(a)).decode("ascii")


class _View:
    """The cells as arrays, for one look."""

    def __init__(self, cells: Cells) -> None:
        import numpy as np

        b = cells.boundaries
        self.index = {t: i for i, t in enumerate(b)}
        self.lower = np.array([-math.inf, *b])  # cell c holds x >= lower[c]
        shape = (len(b) + 1, 2)
        self.n = np.array(cells.n, dtype=float).reshape(shape)
        self.right = np.array(cells.right, dtype=float).reshape(shape)
        self.weight = np.array(cells.weight, dtype=float).reshape(shape)
        self.conf = np.array(cells.conf, dtype=float).reshape(shape)
        self.in_force = np.array(sorted(cells.in_force), dtype=float)
        # labels at or above each cell: the size of the band of the boundary below it
        self.above = np.cumsum(self.n.sum(axis=1)[::-1])[::-1]

    def band_size(self, t: float) -> int:
        return int(self.above[self.index[t] + 1])

    def stratified(self, t: float, right: np.ndarray) -> tuple[float, float]:
        """the reference ``stratified`` of the band ``confidence >= t`` from the cells
        (``right``: the per-cell right counts, or the confidence sums)."""
        import numpy as np

        lo = self.index[t] + 1
        n_c = self.n[lo:]
        if not n_c.any():
            return 0.0, 0.0
        r_c, w_c = right[lo:], self.weight[lo:]
        held = n_c > 0
        if not np.all(np.isfinite(w_c)) or np.any(w_c[held] <= 0):
            return 0.0, 0.0  # a weight that is not finite and positive: nothing to test
        cuts = self.in_force[self.in_force > t]
        k = len(cuts) + 1
        s = np.searchsorted(cuts, self.lower[lo:], side="right")
        labelled = np.bincount(s, weights=n_c.sum(axis=1), minlength=k)
        if np.count_nonzero(labelled) < k:
            return 0.0, 0.0  # a stratum without a single label: the band cannot be shown
        stratum = np.concatenate([s, s + k])
        n_s = np.bincount(stratum, weights=np.concatenate([n_c[:, 0], n_c[:, 1]]), minlength=2 * k)
        if np.count_nonzero(n_s) == 1:
            return float(n_c.sum()), float(r_c.sum())
        right_s = np.bincount(
            stratum, weights=np.concatenate([r_c[:, 0], r_c[:, 1]]), minlength=2 * k
        )
        share = np.bincount(
            stratum, weights=np.concatenate([w_c[:, 0], w_c[:, 1]]), minlength=2 * k
        )
        some = n_s > 0
        share, n_s, right_s = share[some] / share[some].sum(), n_s[some], right_s[some]
        n = 1.0 / float((share * share / n_s).sum())
        right_n = n * float((share * right_s / n_s).sum())
        if not (math.isfinite(n) and math.isfinite(right_n)):
            return 0.0, 0.0
        return n, right_n


def _fails(p: float, alpha: float) -> bool:
    """A p-value that does not reject (NaN, inf or above ``alpha``: fail closed)."""
    return not (math.isfinite(p) and p <= alpha)


def learn_then_test_cells(
    view: _View,
    *,
    precision: float,
    alpha: float,
    candidates: Sequence[float],
    shown: float | None = None,
    entry: float | None = None,
) -> float | None:
    """the reference ``learn_then_test`` on the cells' labels (same walk, same skips)."""
    need = min_band(precision, alpha)
    chosen: float | None = None
    carried = shown is not None
    size = -1 if shown is None else view.band_size(shown)
    for t in candidates:
        if (shown is not None and t >= shown) or (not carried and entry is not None and t > entry):
            continue
        here = view.band_size(t)
        if here == size:
            continue
        size = here
        n, right = view.stratified(t, view.right)
        if not math.isfinite(n):
            break  # a weight that cannot be computed shows nothing
        if n < need and not carried:
            continue  # too few to ever reject here: skipping depends on no label
        if _fails(pvalue_below(right, n, precision), alpha):
            break
        chosen, carried = t, True
    return chosen


def predicted_entry_cells(
    view: _View, *, precision: float, alpha: float, candidates: Sequence[float]
) -> float | None:
    """the reference ``predicted_entry`` on the cells (the confidences only, no label)."""
    need = min_band(precision, alpha)
    first: float | None = None
    best: float | None = None
    best_p = 1.0
    size = -1
    for t in candidates:
        here = view.band_size(t)
        if here == size:
            continue
        size = here
        n, right = view.stratified(t, view.conf)
        if not math.isfinite(n) or n < need:
            continue
        first = t if first is None else first
        p = pvalue_below(right, n, precision)
        if math.isfinite(p) and p < best_p:
            best, best_p = t, p
    return None if best == first else best


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
    "MAX_CANDIDATES",
    "finite",
    "Cells",
    "OffGrid",
    "grid",
    "grid_size",
    "learn_then_test_cells",
    "min_band",
    "predicted_entry_cells",
    "pvalue_below",
    "Looks",
]
