"""The reference forms of the earned-threshold statistics, over plain lists of labels.

Production keeps counts per confidence cell (``agentbranch.policy.earned._statistics``);
the tests check the cell forms against these list forms, which read as the statistics
are written down. What they compute, and why each rule fails closed:

**Opening (Learn-then-Test).** Candidate thresholds form a fixed grid (``step`` apart,
from ``max_take_at`` down to ``min_take_at``). At a look, for each candidate ``t`` from
the safest (highest) down, the null hypothesis "decisions with confidence ≥ ``t`` are
right less than ``precision`` of the time" is tested with an exact binomial
(Clopper–Pearson) p-value; the sequence stops at the first hypothesis not rejected and
the threshold is the last rejected ``t``. Fixed-sequence testing keeps the chance of
opening a band below the target at ``alpha`` however many candidates there are
(Angelopoulos, Bates, Candès, Jordan & Lei, "Learn then Test", 2021). Candidates whose
band holds too few labels to ever reject are skipped, and so are candidates that add no
label to the band above (the threshold never goes below the lowest confidence seen);
both depend on the confidences only, never on the labels.

**Re-estimating (looks).** Thresholds are recomputed only at looks
(``agentbranch.policy.earned._statistics``): by default on a doubling schedule of labels since
learning (re)started, ``first``, ``2·first``, ``4·first`` ..., look ``k`` spending
``alpha_k = alpha / 2**(k + 1)`` (total ≤ ``alpha``). The testing across looks is
hierarchical (group-sequential testing of ordered hypotheses: Hung, Wang & O'Neill 2007;
Tamhane, Mehta & Liu 2010): a candidate is rejected at look ``k`` when its test passes at
``alpha_k`` and every candidate above it was rejected at this look or an earlier one,
so a look resumes the walk just below the threshold in force (``shown``) instead of
starting again at the top. Each candidate's own tests over all looks spend at most
``alpha``, and the first hypothesis of the fixed order that is true (band below the
target) must itself be rejected at some look for any error to happen: with probability
≥ ``level`` no threshold ever in force has a take band below the target. (Restarting
at the top, as the first release did, made a look after the opening test first the top
bands, whose labels are the few made before the opening plus audits: a chance failure
there ended the walk and the threshold stayed where it was.) A look only ever lowers
the threshold in force. Assumes exchangeable traffic within an epoch (between
withdrawals), takes the teacher as the reference, and — for the skipping of candidates
whose band is still too small to test, which depends on the confidences only — that
the bands below the target are the lowest candidates (precision does not rise again as
the threshold falls); where that fails each extra run of such candidates can cost up
to another ``alpha``. Denser looks (every 25 % more labels, polynomial
spending) were measured and do not help: under the union bound each look costs error,
and what a question gains by not waiting for the next doubling it loses to the smaller
``alpha_k`` (``benchmarks/earned_simulation.py``).

**Two walks while nothing is shown.** A walk from the top starts at the smallest band
that could reject at all (a few dozen labels, nearly all of which must be right), and a
fixed sequence ends at its first failure: a question whose surest answers are only a
little above the target — right ~94 % of the time whatever its confidence — fails
there at every look, however many labels arrive. So from the third look on
(``Earned.second_walk_from``), a look that has shown nothing yet runs two fixed-sequence
walks at half its error each: from the top, and from the band the confidences predict
is easiest to show (``predicted_entry``: the smallest p-value if each label were right
with the probability its confidence says; it reads no label). By the union bound the
two err together with probability at most the look's error, and which walks run
depends on the confidences only. Skipping the candidates above the entry rejects
nothing, so it needs no further assumption. An over-confident question predicts too
wide a band and its second walk fails; its walk from the top keeps half the error.
(Measured in ``benchmarks/earned_simulation.py``: a question right ~89 % of the time
whose confidence barely separates opens in every stream of 16,000 decisions instead of
one in three; calibrated and sharp questions gain a little, an over-confident one
loses a little.)

**Two sources, stratified.** While learning nothing is taken and every decision is
labelled (the ``Generate`` fallback answers each one), so the first opening is tested on
complete labels with an exact test. Afterwards, decisions below the threshold in force
are still all labelled but taken ones only at the audit rate ``r``. A band is then cut
into strata at every threshold that was in force when one of its labels was made (and
the review band apart): at any one moment every decision of a stratum was labelled with
the same probability (all of them, or a share ``r``), so under exchangeable traffic its
labels — the ones made before the band opened and the audits after — are a plain
sample of it and pool unweighted. Strata are weighted by their share of the band's
decisions, estimated with inverse-probability weights (``Σ 1/rate``), and the binomial
test runs on the stratified share right with Kish's effective size
``1 / Σ share²/n_stratum`` (exact with one stratum, approximate otherwise, like any
weighted Clopper–Pearson interval). The Korn–Graubard size (each stratum with its own
variance; Korn & Graubard 1998) was tried: it lowers thresholds a little sooner, but at
an audit rate of 0.005 — each audit standing for 200 decisions, so the strata's shares
are themselves noisy — 5.4 % of 500 simulated streams ended below the target, over the
5 % allowed (Kish: 1.0 %), so it is not used. Weighting every label by ``1/rate`` in
one sample instead would count 100 labels and 10 audits at ``r = 0.05`` as about 22. A
look never raises the threshold.

**Drift (anytime-valid, restarting).** Audited takes are a uniform sample of the take
band. One e-process for "precision ≥ target" is the mixture likelihood ratio over
alternatives below the target, ``E = mean_q (q/p)^s ((1-q)/(1-p))^f`` (``s`` right,
``f`` wrong audited takes since it started); under the null it is a nonnegative
supermartingale. The test (``Drift``) mixes such e-processes started after 0 audited
takes (weight 1/2) and at evenly spaced points of each doubling ``[2^k, 2^(k+1))`` (at
least 64 of them, at most 128 takes apart, sharing weight ``1/((k+2)(k+3))``), counting
those not started yet at their weight: one supermartingale starting at 1, so by Ville's
inequality it ever reaches ``1/alpha`` with probability ≤ ``alpha`` — checking after
every audit is valid over the whole life of the band. A recent start carries little of
the good record before a drop, so a long good record delays withdrawal only
logarithmically. ``withdrawal.takes_to_withdraw`` gives the audited takes it needs on the typical
path (at precision 0.9, level 0.95: 93 audited takes when the precision falls to 0.8,
25 to 0.7, 7 to 0.5; to 0.6 from 0.95: 12 from the opening, 42 after 1,000 good audits
and 57 after 10,000). Withdrawing closes the band at once and starts a new epoch:
learning again from fresh labels only.

**Learning speed (simulated, defaults).** ``benchmarks/earned_simulation.py`` and
docs/earned.md give the figures: a question right ~90 % of the time whose surest answers
are nearly always right opens after a median of 100 labels; one whose confidence barely
separates right from wrong needs many hundreds (even one exact test at 0.05 on the
expected counts, with no looks to pay for, needs 642); one whose confidence is
anti-correlated never opens.

**Failing closed.** A statistic that cannot be computed opens nothing: a p-value that is
not a finite number never passes (``learn_then_test`` goes on only while it is a finite
number at most ``alpha``), a band whose weights are not all finite and positive is not
tested, and a band that holds a stratum with no label at all is not shown: its labels
say nothing about part of the decisions the band would take (with ``start_at`` and no
audits, the decisions above the hand-chosen threshold were taken unlabelled, and labels
below it cannot show them right). The work is bounded: at most ``MAX_CANDIDATES``
candidate thresholds, and ``withdrawal.takes_to_withdraw`` refuses drops the drift test cannot see
and paths longer than ``TAKES_LIMIT`` audited takes after the drop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from agentbranch.policy.earned._statistics import (
    DRIFT_DROPS,
    HISTORY_LIMIT,
    MAX_CANDIDATES,
    TAKES_LIMIT,
    Looks,
    drifted,
    grid,
    min_band,
    pvalue_below,
    restart_weight,
    takes_to_withdraw,
)

__all__ = [
    "DRIFT_DROPS",
    "HISTORY_LIMIT",
    "MAX_CANDIDATES",
    "TAKES_LIMIT",
    "Drift",
    "drift_evalue",
    "drifted",
    "grid",
    "learn_then_test",
    "look_alpha",
    "look_at",
    "min_band",
    "predicted_entry",
    "pvalue_below",
    "restart_weight",
    "stratified",
    "takes_to_withdraw",
]


def look_alpha(alpha: float, look: int) -> float:
    """The error spent at look ``look`` of the doubling schedule."""
    return Looks(1).alpha(alpha, look)


def look_at(first: int, look: int) -> int:
    """Labels at which look ``look`` of the doubling schedule happens."""
    return Looks(first).at(look)


def stratified(
    confidence: np.ndarray,
    right: np.ndarray,
    weights: np.ndarray,
    in_force: np.ndarray,
    review: np.ndarray,
    t: float,
) -> tuple[float, float]:
    """``(n, right)`` of the band ``confidence >= t`` as a stratified sample (see the
    module docstring): strata are cut at every threshold that was in force when a label
    was made (``in_force``, nan: nothing was taken) and split into the review band and
    the rest (``review``). Within a stratum the labels are a plain sample of its
    decisions, pooled unweighted; strata are weighted by their estimated share of the
    band's decisions (``Σ 1/rate``), and ``n`` is Kish's effective size
    ``1 / Σ share²/n_stratum``. One stratum: the plain counts (the test is exact).

    Fails closed with ``(0, 0)`` (nothing to test): when a confidence range of the band
    between two thresholds that were in force (or above the highest) holds no label at
    all, so part of what the band takes was never labelled; and when a weight is not a
    finite positive number."""
    import numpy as np

    band = confidence >= t
    if not band.any():
        return 0.0, 0.0
    w = weights[band]
    if not np.all(np.isfinite(w) & (w > 0)):
        return 0.0, 0.0
    cuts = np.unique(in_force[~np.isnan(in_force) & (in_force > t)])
    k = len(cuts) + 1
    ranges = np.searchsorted(cuts, confidence[band], side="right")
    if np.count_nonzero(np.bincount(ranges, minlength=k)) < k:
        return 0.0, 0.0  # a stratum without a single label: the band cannot be shown
    stratum = ranges + k * review[band]
    n_s = np.bincount(stratum, minlength=2 * k).astype(float)
    if np.count_nonzero(n_s) == 1:
        return float(band.sum()), float(right[band].sum())
    right_s = np.bincount(stratum, weights=right[band], minlength=2 * k)
    share = np.bincount(stratum, weights=w, minlength=2 * k)
    some = n_s > 0
    share, n_s, right_s = share[some] / share[some].sum(), n_s[some], right_s[some]
    n = 1.0 / float((share * share / n_s).sum())
    right_n = n * float((share * right_s / n_s).sum())
    if not (math.isfinite(n) and math.isfinite(right_n)):
        return 0.0, 0.0
    return n, right_n


def _arrays(
    confidence: Sequence[float],
    weights: Sequence[float] | None,
    in_force: Sequence[float | None] | None,
    review: Sequence[bool] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The labels' confidences, weights (default 1), thresholds in force (nan: none) and
    review flags (default 0) as arrays, for ``stratified``."""
    import numpy as np

    conf = np.asarray(confidence, dtype=float)
    w = np.ones_like(conf) if weights is None else np.asarray(weights, dtype=float)
    tau = np.full(len(conf), np.nan)
    if in_force is not None:
        tau = np.array([np.nan if x is None else x for x in in_force], dtype=float)
    rev = np.zeros(len(conf), dtype=int) if review is None else np.asarray(review, dtype=int)
    return conf, w, tau, rev


def learn_then_test(
    confidence: Sequence[float],
    correct: Sequence[bool],
    *,
    precision: float,
    alpha: float,
    candidates: Sequence[float],
    weights: Sequence[float] | None = None,
    in_force: Sequence[float | None] | None = None,
    review: Sequence[bool] | None = None,
    shown: float | None = None,
    entry: float | None = None,
) -> float | None:
    """The lowest candidate threshold whose take band ``confidence >= t`` is shown to
    reach ``precision`` at error ``alpha`` by fixed-sequence testing from the safest
    candidate down (``None``: none shown).

    ``weights`` (default 1) are inverse labelling probabilities: 1 for a decision every
    one of which is labelled, ``1/rate`` for an audited one; ``in_force`` (default: none)
    the threshold in force when each label was made (``None``: nothing was taken) and
    ``review`` (default: none) whether it was in the review band, by which bands are
    stratified (``stratified``). ``shown``: the threshold an earlier look showed; the
    walk resumes below it (hierarchical testing across looks, see the module doc).
    ``entry``: a walk that has shown nothing yet starts at this candidate, skipping the
    ones above it (``predicted_entry``; chosen from the confidences only)."""
    import numpy as np

    conf, w, tau, rev = _arrays(confidence, weights, in_force, review)
    ok = np.asarray(correct, dtype=float)
    need = min_band(precision, alpha)
    chosen: float | None = None
    carried = shown is not None  # every candidate above `shown` was rejected already
    # A candidate whose band holds no label more than the one before it shows nothing new.
    size = -1 if shown is None else int((conf >= shown).sum())
    for t in candidates:
        if (shown is not None and t >= shown) or (not carried and entry is not None and t > entry):
            continue
        band = conf >= t
        if int(band.sum()) == size:
            continue  # no label between this candidate and the last: nothing shown below
        size = int(band.sum())
        n, right = stratified(conf, ok, w, tau, rev, t)
        if n < need and not carried:
            continue  # too few to ever reject here: skipping depends on no label
        p = pvalue_below(right, n, precision)
        if not (math.isfinite(p) and p <= alpha):
            break  # not shown (a NaN never passes)
        chosen, carried = t, True
    return chosen


def predicted_entry(
    confidence: Sequence[float],
    *,
    precision: float,
    alpha: float,
    candidates: Sequence[float],
    weights: Sequence[float] | None = None,
    in_force: Sequence[float | None] | None = None,
    review: Sequence[bool] | None = None,
) -> float | None:
    """The candidate whose band a test at ``alpha`` would most likely show if the engine
    were right as often as it says: the one with the smallest p-value when each label's
    confidence stands in for its correctness (``None``: no band can reject yet, or the
    best is the first band that can, where the walk from the top starts anyway). Uses
    the confidences and labelling rates only, never the labels, so a walk may start
    there (``learn_then_test(entry=...)``) without spending more than its ``alpha``.

    The walk from the top starts at the smallest band that could reject at all, whose
    few labels must nearly all be right: fine when the surest answers are nearly always
    right, hopeless when every band is only a little above the target (a question right
    ~90 % of the time whose confidence barely separates right from wrong). This entry is
    the band the confidences say has the most evidence; an over-confident question
    predicts too much and its walk from here fails, which is why it is a second walk
    (``Earned`` gives it half of a look's error from the third look on), not the only one."""
    import numpy as np

    conf, w, tau, rev = _arrays(confidence, weights, in_force, review)
    pred = np.clip(conf, 0.0, 1.0)
    need = min_band(precision, alpha)
    first: float | None = None
    best: float | None = None
    best_p = 1.0
    size = -1
    for t in candidates:
        band = conf >= t
        if int(band.sum()) == size:
            continue
        size = int(band.sum())
        n, right = stratified(conf, pred, w, tau, rev, t)
        if n < need:
            continue
        first = t if first is None else first
        p = pvalue_below(right, n, precision)
        if math.isfinite(p) and p < best_p:
            best, best_p = t, p
    return None if best == first else best


def drift_evalue(right: int, wrong: int, precision: float) -> float:
    """One drift e-process after ``right``/``wrong`` audited takes since it started: the
    mixture likelihood ratio over ``DRIFT_DROPS`` (see module doc)."""
    import numpy as np

    logs = _drift_logs(np.array([right], dtype=float), np.array([wrong], dtype=float), precision)
    return float(np.exp(logs[0]))


def _drift_logs(right: np.ndarray, wrong: np.ndarray, precision: float) -> np.ndarray:
    """Log of ``drift_evalue`` for arrays of counts (one e-process each)."""
    import numpy as np

    qs = [precision - d for d in DRIFT_DROPS if precision - d > 0.0]
    if not qs:
        return np.zeros(len(right))
    lr = np.array([math.log(q / precision) for q in qs])
    lw = np.array([math.log((1 - q) / (1 - precision)) for q in qs])
    v = right[:, None] * lr[None, :] + wrong[:, None] * lw[None, :]
    m = v.max(axis=1)
    return m + np.log(np.exp(v - m[:, None]).mean(axis=1))


@dataclass
class Drift:
    """The drift test of an open band: fed every audited take (``add``), it withdraws
    when ``evalue >= 1/alpha`` (see module doc).

    ``evalue`` is ``Σ_j w_j E_j + (1 - Σ_j w_j)``: e-processes ``E_j`` (``drift_evalue``)
    started after ``s_j`` audited takes, weighted ``w_j = restart_weight(s_j)``, and the
    weight of those not started yet. Under the null each ``E_j`` is a nonnegative
    supermartingale from its start (1 before), so the mixture is one starting at 1 and
    by Ville's inequality it ever reaches ``1/alpha`` with probability ≤ ``alpha``.
    A recent start carries little of the good record before a drop."""

    precision: float
    right: int = 0
    wrong: int = 0
    evalue: float = 1.0
    _r0: list[int] = field(default_factory=list, repr=False)
    _w0: list[int] = field(default_factory=list, repr=False)
    _weight: list[float] = field(default_factory=list, repr=False)

    def add(self, correct: bool) -> float:
        """Count one audited take; the e-value after it."""
        import numpy as np

        w = restart_weight(self.right + self.wrong)
        if w > 0.0:
            self._r0.append(self.right)
            self._w0.append(self.wrong)
            self._weight.append(w)
        if correct:
            self.right += 1
        else:
            self.wrong += 1
        weight = np.array(self._weight)
        logs = _drift_logs(
            self.right - np.array(self._r0, dtype=float),
            self.wrong - np.array(self._w0, dtype=float),
            self.precision,
        )
        self.evalue = float((weight * np.exp(logs)).sum() + max(0.0, 1.0 - weight.sum()))
        return self.evalue

    def drifted(self, alpha: float) -> bool:
        """Whether the audited takes so far show the precision below target (an e-value
        that is not a number counts as drift: the band closes rather than stay open on a
        test that cannot be computed)."""
        return self.wrong > 0 and not (self.evalue < 1.0 / alpha)
