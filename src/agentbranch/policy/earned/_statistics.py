"""The statistics of earned thresholds, in the compact form production runs.

An epoch is counts per confidence cell (``Cells``) that ``learn_then_test_cells`` walks
(Learn-then-Test) at the looks ``Looks`` schedules; ``DriftState`` is the drift test of
an open band, a mixture of e-processes valid when checked after every audit. Each rule
fails closed (docs/earned_method.md; tests/_reference_statistics.py has the list forms).
"""

from __future__ import annotations

import base64
import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agentbranch.core.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np


#: The most candidate thresholds a grid may hold (``step`` 0.001 over [0, 1]).
MAX_CANDIDATES = 1001


def finite(*values: float) -> bool:
    """Whether every value is a finite number (numpy scalars included)."""
    try:
        return all(math.isfinite(float(v)) for v in values)
    except (TypeError, ValueError, OverflowError):
        return False


def pvalue_below(right: float, n: float, precision: float) -> float:
    """Exact one-sided p-value of H0 "precision < ``precision``" after ``right`` of ``n``
    labels agreed: ``P(X >= right)`` for ``X ~ Binomial(n, precision)`` (non-integer
    counts: the same beta-function form). Fails closed: 1 for ``n == 0`` and any input
    that is not finite or in range, never a NaN."""
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


def grid(max_take_at: float, min_take_at: float, step: float) -> list[float]:
    """``Earned``'s candidate thresholds, safest first (``step`` a positive number);
    ``ConfigurationError`` when there would be more than ``MAX_CANDIDATES``."""
    size = math.floor((max_take_at - min_take_at) / step + 1e-9) + 1
    if size > MAX_CANDIDATES:
        raise ConfigurationError(
            f"Earned(step={step!r}) makes more than {MAX_CANDIDATES} candidate thresholds "
            f"between min_take_at={min_take_at} and max_take_at={max_take_at}; every look "
            f"tests them all. Use step >= {(max_take_at - min_take_at) / (MAX_CANDIDATES - 1):.3g} "
            "(0.01, the default, is finer than confidences are meaningful)"
        )
    steps = (round(max_take_at - k * step, 10) for k in range(size + 1))
    return [t for t in steps if t >= min_take_at - 1e-12]


class OffGrid(Exception):  # noqa: N818 - a signal, not an error a user sees
    """A threshold in force that is not a cell boundary: the question's cells must be
    rebuilt from its records with that boundary added (``value``)."""

    def __init__(self, value: float) -> None:
        super().__init__(value)
        self.value = value


class Cells:
    """Counts per confidence cell and review flag for one epoch: cell ``c`` holds the
    confidences ``x`` with ``boundaries[c-1] <= x < boundaries[c]``, so ``x >= t`` for a
    boundary ``t`` is exactly "cell above ``t``'s index"."""

    __slots__ = ("boundaries", "in_force", "n", "right", "weight", "conf")

    def __init__(self, boundaries: Sequence[float]) -> None:
        self.boundaries: tuple[float, ...] = tuple(boundaries)
        zeros = bytes(8 * 2 * (len(self.boundaries) + 1))  # (8 bytes per cell)
        self.n, self.right = array("q", zeros), array("q", zeros)
        self.weight, self.conf = array("d", zeros), array("d", zeros)
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

    def weighted_share(self, t: float) -> float | None:
        """The share of the labels' weight (each ``1 / rate``) at confidence ``>= t``, the
        decisions the band ``t`` holds; ``None`` without weight or when not finite."""
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
            **{k: base64.b64encode(bytes(getattr(self, k))).decode() for k in _ARRAYS},
            "in_force": [[k, v] for k, v in self.in_force.items()],
        }

    @classmethod
    def from_dict(cls, raw: dict) -> Cells:
        """The inverse of ``to_dict``; ``ValueError`` when the arrays do not fit."""
        cells = cls(raw["boundaries"])
        for name in _ARRAYS:
            values = array(getattr(cells, name).typecode, base64.b64decode(raw[name]))
            if len(values) != len(getattr(cells, name)):
                raise ValueError("cells of another size")
            setattr(cells, name, values)
        cells.in_force = {float(k): int(v) for k, v in raw["in_force"]}
        return cells


#: The counts ``Cells`` keeps as arrays (a checkpoint keeps each base64-encoded).
_ARRAYS = ("n", "right", "weight", "conf")


class _View:
    """The cells as arrays, for one look."""

    def __init__(self, cells: Cells) -> None:
        import numpy as np

        b = cells.boundaries
        self.index = {t: i for i, t in enumerate(b)}
        self.lower = np.array([-math.inf, *b])  # cell c holds x >= lower[c]
        self.n, self.right, self.weight, self.conf = (
            np.array(a, dtype=float).reshape(len(b) + 1, 2)
            for a in (cells.n, cells.right, cells.weight, cells.conf)
        )
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
        stratum = np.concatenate([s, s + k])  # (the cells' columns one after the other)
        n_s, right_s, share = (
            np.bincount(stratum, weights=a.T.ravel(), minlength=2 * k) for a in (n_c, r_c, w_c)
        )
        if np.count_nonzero(n_s[:k] + n_s[k:]) < k:
            return 0.0, 0.0  # a stratum without a single label: the band cannot be shown
        if np.count_nonzero(n_s) == 1:
            return float(n_c.sum()), float(r_c.sum())
        some = n_s > 0
        share, n_s, right_s = share[some] / share[some].sum(), n_s[some], right_s[some]
        n = 1.0 / float((share * share / n_s).sum())
        right_n = n * float((share * right_s / n_s).sum())
        if not (math.isfinite(n) and math.isfinite(right_n)):
            return 0.0, 0.0
        return n, right_n


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
        p = pvalue_below(right, n, precision)
        if not (math.isfinite(p) and p <= alpha):
            break  # (NaN, inf or above alpha: fail closed)
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


@dataclass(frozen=True)
class Looks:
    """The look schedule: look ``k`` (0-based) at ``first · 2**k`` labels (counted from
    the start of the epoch), spending ``alpha / 2**(k+1)``; with ``head``, the fraction
    ``head[k]`` of ``alpha`` at its first ``len(head)`` looks and halves of the rest after
    them. The looks' errors sum to at most ``alpha``."""

    first: int
    head: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.first < 1:
            raise ValueError(f"bad look schedule {self!r}")
        if self.head and (
            not all(0.0 < h < 1.0 for h in self.head) or not math.fsum(self.head) < 1.0
        ):
            raise ValueError(f"bad first looks' spending {self.head!r} for {self!r}")

    def at(self, k: int) -> int:
        """Labels at which look ``k`` happens."""
        return self.first * 2**k

    def alpha(self, alpha: float, k: int) -> float:
        """The error look ``k`` spends out of ``alpha``."""
        if k < len(self.head):
            return alpha * self.head[k]
        rest = 1.0 - math.fsum(self.head)
        return alpha * rest * 0.5 ** (k - len(self.head) + 1)


#: Alternatives of the drift e-process, as drops below the target precision.
DRIFT_DROPS: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5)


def _alternatives(precision: float) -> list[float]:
    """The drift e-process's alternative precisions (``DRIFT_DROPS`` below the target)."""
    return [precision - d for d in DRIFT_DROPS if precision - d > 0.0]


def drifted(right: int, wrong: int, precision: float, alpha: float) -> bool:
    """Whether one drift e-process after ``right``/``wrong`` audited takes since it
    started (the mixture likelihood ratio over ``DRIFT_DROPS``) reaches ``1/alpha``."""
    if wrong == 0:
        return False
    qs = _alternatives(precision)
    v = [right * math.log(q / precision) + wrong * math.log((1 - q) / (1 - precision)) for q in qs]
    v = v or [0.0]  # (no alternative: the e-value is 1)
    m = max(v)
    e = math.exp(m + math.log(sum(math.exp(x - m) for x in v) / len(v)))
    # A NaN e-value counts as drift: a test that cannot be computed keeps nothing open.
    return not math.isfinite(e) or e >= 1.0 / alpha


#: Restarts of the drift test: per octave of audited takes ``[2**k, 2**(k+1))`` at
#: least this many start points, evenly spaced ...
RESTARTS_PER_OCTAVE = 64
#: ... and never more than this many audited takes apart.
RESTART_SPACING = 128


def restart_weight(n: int) -> float:
    """The weight of the drift e-process started after ``n`` audited takes (0 if none
    starts there): 1/2 at 0; the start points of octave ``k`` share ``1/((k+2)(k+3))``
    evenly. The weights sum to 1."""
    if n == 0:
        return 0.5
    k = n.bit_length() - 1
    per = min(2**k, max(RESTARTS_PER_OCTAVE, 2**k // RESTART_SPACING))
    if (n - 2**k) % (2**k // per):
        return 0.0
    return 1.0 / ((k + 2) * (k + 3) * per)


#: The most audited takes after the drop ``takes_to_withdraw`` follows before it gives
#: up, and the longest good record (``history``) it replays first.
TAKES_LIMIT = 10_000
HISTORY_LIMIT = 100_000


def takes_to_withdraw(
    precision: float,
    true_precision: float,
    level: float,
    *,
    history: int = 0,
    before: float = 1.0,
) -> int:
    """Audited takes the drift test needs to withdraw a band whose precision fell to
    ``true_precision`` after ``history`` audited takes at ``before``, when the audits
    show exactly those rates (the typical path: after ``n`` audits, the number wrong is
    the expected one, rounded). ``0`` if it never would (``true_precision >=
    precision``).

    ``ValueError`` when the answer cannot be computed with bounded work: arguments that
    are not numbers in range, a drop too small for the drift test's alternatives
    (``DRIFT_DROPS``) to ever see on this path, more than ``TAKES_LIMIT`` audited takes
    after the drop, or a ``history`` longer than ``HISTORY_LIMIT``."""
    if not (
        finite(precision, true_precision, level, before)
        and 0.0 < precision < 1.0
        and 0.0 < level < 1.0
        and 0.0 <= true_precision <= 1.0
        and 0.0 <= before <= 1.0
    ):
        raise ValueError(
            "takes_to_withdraw needs precision and level in (0, 1) and true_precision and "
            f"before in [0, 1]; got {precision!r}, {true_precision!r}, {level!r}, {before!r}"
        )
    if not isinstance(history, int) or isinstance(history, bool) or history < 0:
        raise ValueError(f"history must be a whole number >= 0, got {history!r}")
    if true_precision >= precision:
        return 0
    if history > HISTORY_LIMIT:
        raise ValueError(f"history={history} is more than {HISTORY_LIMIT} audited takes")
    qs = _alternatives(precision)
    gain = max(
        (
            true_precision * math.log(q / precision)
            + (1 - true_precision) * math.log((1 - q) / (1 - precision))
            for q in qs
        ),
        default=0.0,
    )
    if gain <= 0.0:
        raise ValueError(
            f"the drift test cannot withdraw a band whose precision fell from {precision:g} "
            f"to {true_precision:g}: its alternatives are {sorted(round(q, 6) for q in qs)} "
            "and none fits audits right that often better than the target does"
        )
    alpha = 1.0 - level
    if math.log(1.0 / alpha) / gain > TAKES_LIMIT:
        raise ValueError(
            f"withdrawing a band whose precision fell from {precision:g} to "
            f"{true_precision:g} takes more than {TAKES_LIMIT} audited takes"
        )
    drift = DriftState(precision)
    for n in range(1, history + TAKES_LIMIT + 1):
        after = max(0, n - history)
        wrong = round(min(n, history) * (1.0 - before) + after * (1.0 - true_precision))
        drift.add(wrong == drift.wrong)
        if n > history and drift.drifted(alpha):
            return n - history
    raise ValueError(
        f"withdrawing a band whose precision fell from {precision:g} to {true_precision:g} "
        f"takes more than {TAKES_LIMIT} audited takes"
    )


@dataclass
class DriftState:
    """the reference ``Drift`` in constant space: ``Σ_j w_j E_j`` is kept per alternative
    ``q`` as one running sum (each started e-process is multiplied by the same factor
    per audited take, and a restart adds its weight at 1), so an audited take costs
    O(alternatives), not O(restarts). Equal to ``Drift`` up to float rounding. Its
    fields are JSON values (a checkpoint keeps ``dataclasses.asdict`` of it)."""

    precision: float
    right: int = 0
    wrong: int = 0
    evalue: float = 1.0
    sums: list[float] = field(default_factory=list)  # per alternative (from the first take)
    started: float = 0.0  # the restarts' weight so far

    def add(self, correct: bool) -> float:
        """Count one audited take; the e-value after it."""
        qs = _alternatives(self.precision)
        sums = self.sums or [0.0] * len(qs)
        w = restart_weight(self.right + self.wrong)
        if w > 0.0:
            self.started += w
            sums = [s + w for s in sums]
        if correct:
            self.right += 1
            factors = [q / self.precision for q in qs]
        else:
            self.wrong += 1
            factors = [(1 - q) / (1 - self.precision) for q in qs]
        self.sums = [s * f for s, f in zip(sums, factors)]
        mixed = sum(self.sums) / len(self.sums) if self.sums else self.started
        self.evalue = mixed + max(0.0, 1.0 - self.started)
        return self.evalue

    def drifted(self, alpha: float) -> bool:
        # An e-value that is not a number counts as drift (fail closed).
        return self.wrong > 0 and not (self.evalue < 1.0 / alpha)

    def copy(self) -> DriftState:
        return replace(self, sums=list(self.sums))


__all__ = [
    "MAX_CANDIDATES",
    "finite",
    "Cells",
    "OffGrid",
    "grid",
    "learn_then_test_cells",
    "min_band",
    "predicted_entry_cells",
    "pvalue_below",
    "Looks",
    "DRIFT_DROPS",
    "HISTORY_LIMIT",
    "TAKES_LIMIT",
    "DriftState",
    "drifted",
    "restart_weight",
    "takes_to_withdraw",
]
