"""The compact statistics of one question's epoch: what the looks and the drift test need,
kept as counts per confidence cell instead of a list of every label.

A look (``agentbranch.policy.thresholds``) tests bands ``confidence >= t`` for each
candidate ``t``, cut into strata at every threshold that was in force when one of the
band's labels was made (and the review band apart). So a label only matters through
which side of each candidate and each threshold in force its confidence lies on, its
review flag, its weight (``1/rate``), whether it was right and (for the predicted entry)
its confidence. ``Cells`` bins labels at ``boundaries`` (the candidate grid, ``start_at``
and every threshold in force seen) and keeps, per cell and review flag, the number of
labels, of right ones, the sum of weights and the sum of confidences: O(1) per label,
a fixed size per question (``2 × (boundaries + 1) × 4`` numbers of 8 bytes: 6.5 KB at
the default grid) however many labels.

``learn_then_test_cells`` and ``predicted_entry_cells`` are the cell forms of
``thresholds.learn_then_test`` / ``thresholds.predicted_entry``: the same walk, the same
stratified counts (``thresholds.stratified``), the same p-values (``pvalue_below``), read
from the cells. ``DriftState`` is ``thresholds.Drift`` kept as one running sum per
alternative (O(alternatives) per audited take instead of O(restarts)).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agentbranch.policy.thresholds import DRIFT_DROPS, min_band, pvalue_below, restart_weight

if TYPE_CHECKING:
    import numpy as np


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

    def view(self) -> _View:
        return _View(self)


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
        """``thresholds.stratified`` of the band ``confidence >= t`` from the cells
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
    """``thresholds.learn_then_test`` on the cells' labels (same walk, same skips)."""
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
    """``thresholds.predicted_entry`` on the cells (the confidences only, no label)."""
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


class DriftState:
    """``thresholds.Drift`` in constant space: ``Σ_j w_j E_j`` is kept per alternative
    ``q`` as one running sum (each started e-process is multiplied by the same factor
    per audited take, and a restart adds its weight at 1), so an audited take costs
    O(alternatives), not O(restarts). Equal to ``Drift`` up to float rounding."""

    __slots__ = ("precision", "right", "wrong", "evalue", "_sums", "_started", "_up", "_down")

    def __init__(self, precision: float) -> None:
        self.precision = precision
        self.right = self.wrong = 0
        self.evalue = 1.0
        qs = [precision - d for d in DRIFT_DROPS if precision - d > 0.0]
        self._up = [q / precision for q in qs]  # factor per right audited take
        self._down = [(1 - q) / (1 - precision) for q in qs]  # per wrong one
        self._sums = [0.0] * len(qs)
        self._started = 0.0

    def add(self, correct: bool) -> float:
        """Count one audited take; the e-value after it."""
        w = restart_weight(self.right + self.wrong)
        if w > 0.0:
            self._started += w
            self._sums = [s + w for s in self._sums]
        factors = self._up if correct else self._down
        self._sums = [s * f for s, f in zip(self._sums, factors)]
        if correct:
            self.right += 1
        else:
            self.wrong += 1
        mixed = sum(self._sums) / len(self._sums) if self._sums else self._started
        self.evalue = mixed + max(0.0, 1.0 - self._started)
        return self.evalue

    def drifted(self, alpha: float) -> bool:
        # An e-value that is not a number counts as drift (fail closed).
        return self.wrong > 0 and not (self.evalue < 1.0 / alpha)

    def copy(self) -> DriftState:
        new = DriftState.__new__(DriftState)
        new.precision, new.right, new.wrong, new.evalue = (
            self.precision,
            self.right,
            self.wrong,
            self.evalue,
        )
        new._sums, new._started = list(self._sums), self._started
        new._up, new._down = self._up, self._down
        return new
