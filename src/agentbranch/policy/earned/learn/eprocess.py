"""An anytime-valid test of a learned version's take bands: a betting e-process per
candidate threshold, checked after every label with no penalty for looking.

``Bets`` holds the e-processes of one walk, ``Walks`` one walk per entry, ``entry``
chooses where a walk starts from the version's out-of-fold reads (``oof_reads``).
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from agentbranch.policy.earned.learn import head as lh

__all__ = [
    "Bets",
    "FRACTIONS",
    "MIN_ENTRY_BAND",
    "SHARE",
    "WEIGHTS",
    "Walks",
    "confidences",
    "entry",
    "head_entries",
    "oof_reads",
]

#: Bet fractions of the mixture (of the boldest bet ``1/p`` on "right").
FRACTIONS: tuple[float, ...] = (0.5, 0.75, 0.9, 0.97)
#: The mixture's weight on each of ``FRACTIONS``: most on the boldest, so a band nearly
#: always right is shown sooner (chosen with ``benchmarks/learning_path.py``).
WEIGHTS: tuple[float, ...] = (0.1, 0.1, 0.1, 0.7)
#: Share of a version's error given to this test; the looks keep the rest.
SHARE = 0.9
#: Fewest pre-fit labels a band must hold, read out of fold, to be an entry.
MIN_ENTRY_BAND = 4


class Bets:
    """The e-processes of one version's candidates below ``entry`` (the bet and why it
    is valid: docs/learning_method.md, "The anytime-valid test of a learned version").
    A label in candidate ``t``'s band multiplies its wealth by ``1 + f w (1 - p) / p``
    when right and ``1 - f w`` when wrong (``w = floor / rate``, ``f`` each of
    ``FRACTIONS``, mixed by ``WEIGHTS``): a nonnegative supermartingale from 1 while the
    band's precision is at most ``p``, whose first crossing of ``1 / (alpha · boost)`` is
    an e-value.
    """

    __slots__ = ("candidates", "alpha", "_edge", "_at", "_rows", "_crossed", "labels", "_boost")

    def __init__(
        self, candidates: Sequence[float], entry: float, precision: float, alpha: float
    ) -> None:
        self.candidates = tuple(t for t in candidates if t <= entry + 1e-12)
        self.alpha = alpha
        self._edge = (1.0 - precision) / precision
        self._at = np.array(self.candidates, dtype=np.float64)
        #: log-wealths, a row (a value per fraction) per candidate
        self._rows = np.zeros((len(self.candidates), len(FRACTIONS)))
        self._crossed = [False] * len(self.candidates)
        self.labels = 0  #: labels bet on
        self._boost = 1.0  #: the last label's boost (``add``)

    def copy(self) -> Bets:
        new = copy.copy(self)
        new._rows = self._rows.copy()
        new._crossed = list(self._crossed)
        return new

    def add(self, confidence: Any, correct: Any, weight: float = 1.0, boost: float = 1.0) -> None:
        """Bet on one label at ``weight`` and check the wealths against ``1 / (alpha ·
        boost)`` (``boost``: the e-LOND factor, ``ladder.elond_alpha``; 1 unless in
        [1, inf)); no bet unless its confidence is a finite number, its label a boolean
        and its weight in (0, 1]."""
        real = isinstance(confidence, numbers.Real) and not isinstance(confidence, bool)
        if not (real and isinstance(correct, bool) and math.isfinite(confidence)):
            return  # (a string, None, NaN ...: not a confidence)
        if not (isinstance(weight, numbers.Real) and 0.0 < weight <= 1.0):
            return  # (NaN fails the comparison too)
        self.labels += 1
        step = [math.log1p(f * weight * self._edge if correct else -f * weight) for f in FRACTIONS]
        if not (isinstance(boost, numbers.Real) and 1.0 <= boost < math.inf):
            boost = 1.0  # (NaN fails the comparison too: fail closed, no boost)
        limit = math.log(1.0 / (self.alpha * boost))
        bet = self._at <= float(confidence)  # the candidates whose band holds the label
        self._rows[bet] += step
        # (only a row whose largest log reaches the limit can cross)
        near = np.flatnonzero(bet & (self._rows.max(axis=1) >= limit)).tolist()
        if boost > self._boost:  # a lower bar now: every candidate is checked against it
            near = range(len(self.candidates))
        self._boost = float(boost)
        for i in near:
            if not self._crossed[i] and _mean_log(self._rows[i].tolist()) >= limit:
                self._crossed[i] = True

    def wealth(self, t: float) -> float:
        """The mixture's wealth at candidate ``t`` (1 before any bet)."""
        return math.exp(_mean_log(self._rows[self.candidates.index(t)].tolist()))

    def shown(self) -> float | None:
        """The lowest candidate of the run of shown ones from the entry down (``None``:
        the entry is not shown yet)."""
        run = [*self._crossed, False].index(False)  # (crossed from the entry down)
        return self.candidates[run - 1] if run else None


class Walks:
    """One ``Bets`` walk per entry, each at an equal share of ``alpha`` (union bound);
    the lowest candidate any of them shows counts. A walk goes down fixed-sequence from
    its entry: a candidate is shown once it and every candidate above it has crossed.
    """

    __slots__ = ("walks",)

    def __init__(
        self, candidates: Sequence[float], entries: Sequence[float], precision: float, alpha: float
    ) -> None:
        share = alpha / max(1, len(entries))
        self.walks = [Bets(candidates, e, precision, share) for e in entries]

    def copy(self) -> Walks:
        new = Walks.__new__(Walks)
        new.walks = [w.copy() for w in self.walks]
        return new

    @property
    def labels(self) -> int:
        return max((w.labels for w in self.walks), default=0)

    def add(self, confidence: Any, correct: Any, weight: float = 1.0, boost: float = 1.0) -> None:
        for w in self.walks:
            w.add(confidence, correct, weight, boost)

    def shown(self) -> float | None:
        found = [t for w in self.walks if (t := w.shown()) is not None]
        return min(found) if found else None


def _mean_log(row: list[float]) -> float:
    """log of the ``WEIGHTS``-weighted mean of ``exp(row)`` (nan-safe: anything not
    finite gives -inf)."""
    m = max(row)
    if not math.isfinite(m):
        return -math.inf
    total = math.fsum(w * math.exp(v - m) for w, v in zip(WEIGHTS, row)) / math.fsum(WEIGHTS)
    out = m + math.log(total)
    return out if math.isfinite(out) else -math.inf


def entry(
    confidence: Sequence[float],
    right: Sequence[bool],
    *,
    candidates: Sequence[float],
    precision: float,
    scale: Sequence[float] | None = None,
) -> tuple[float, ...] | None:
    """The candidate to start the walk at, from out-of-fold reads of the version's
    pre-fit labels (``confidence``, ``right``): the one whose band they predict grows
    fastest (its share of the decisions times the best fraction's expected log-growth at
    its precision, shrunk towards the target by one label). ``None`` when no band of at
    least ``MIN_ENTRY_BAND`` labels is predicted above the target. ``scale``: the
    version's own (surer) confidences on the same states: the entry moves to the highest
    candidate whose band holds the same share of them."""
    pairs = [
        (float(c), bool(r))
        for c, r in zip(confidence, right)
        if isinstance(c, int | float) and math.isfinite(float(c))
    ]
    if not pairs:
        return None
    edge = (1.0 - precision) / precision
    best, best_rate = None, 0.0
    size = -1
    for t in candidates:
        band = [r for c, r in pairs if c >= t]
        n = len(band)
        if n == size or n < MIN_ENTRY_BAND:
            continue
        size = n
        p = (sum(band) + precision) / (n + 1.0)
        growth = max(p * math.log1p(f * edge) + (1 - p) * math.log1p(-f) for f in FRACTIONS)
        rate = growth * n / len(pairs)
        if rate > best_rate + 1e-12:
            best, best_rate = t, rate
    if best is None or scale is None:
        return None if best is None else (best,)
    share = sum(c >= best for c, _ in pairs) / len(pairs)
    ranked = sorted((float(c) for c in scale if math.isfinite(float(c))), reverse=True)
    at = ranked[max(0, math.ceil(share * len(ranked)) - 1)] if ranked else -math.inf
    return (next((t for t in candidates if t <= at + 1e-12), best),)


def head_entries(earned: Any, head: Any, vectors: Any, labels: Any) -> tuple[float, ...] | None:
    """The entries of a version (a ``head`` fitted on ``vectors``, ``labels``): ``entry``
    on its out-of-fold reads of its own labels, carried over to its own confidences."""
    conf, right = oof_reads(head, vectors, labels)
    scale = confidences(head, vectors, head.options)
    return entry(conf, right, candidates=earned.candidates, precision=earned.precision, scale=scale)


def confidences(head: Any, vectors: Any, options: Sequence[str]) -> Any:
    """A head's confidence ``1 - H / ln K`` for each of ``vectors``."""
    p = np.exp(head.log_probs(np.asarray(vectors, dtype=np.float64), list(options)))
    return _confidence(p, len(options))


def _confidence(p: Any, k: int) -> Any:
    """``1 - H / ln K`` of each row of probabilities ``p`` over ``k`` options."""
    h = -(p * np.log(np.clip(p, 1e-300, 1.0))).sum(1)
    return np.clip(1.0 - h / math.log(max(2, k)), 0.0, 1.0)


def oof_reads(head: Any, vectors: Any, labels: Sequence[str]) -> tuple[Any, Any]:
    """Out-of-fold reads of the labelled states a version's ``head`` was fitted on, as
    the version would read them (``head.oof_log_probs`` through the version's confidence
    map): ``(confidence, right)`` arrays (confidence nan where a fold could not be fitted)."""
    from scipy.special import softmax

    options, classes = list(head.options), list(head.classes)
    y = np.array([options.index(label) for label in labels])
    x = np.asarray(vectors, dtype=np.float64)
    conf, right = np.full(len(y), np.nan), np.zeros(len(y), bool)
    if len(y) < 2 * lh.FOLDS:
        return conf, right
    oof = lh.oof_log_probs(head, x, y)
    temperature, shift = lh.cross_fitted_map(head, x, y, oof=oof)
    ok = np.isfinite(oof).all(1)
    p = softmax(oof[ok] / temperature + shift, axis=1)
    conf[ok] = _confidence(p, len(options))
    right[ok] = np.array([classes[j] for j in p.argmax(1)]) == np.array([options[j] for j in y[ok]])
    return conf, right
