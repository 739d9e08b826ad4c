"""Synthetic decision streams for earned-trust simulations (seeded numpy, vectorised).

A stream is what one question's policy sees: per decision, the engine's confidence and
whether its label agrees with the teacher. Each scenario fixes how confidence is
distributed and how likely a label at a given confidence is right:

* ``calibrated``: right with probability equal to the confidence;
* ``overconfident``: mostly very confident, but right only at the very top
  (``P(right | c) = c⁶``; the take band reaches 90 % only above c ≈ 0.965);
* ``anticorrelated``: the more confident, the more often wrong;
* ``ninety``: right about 89 % of the time overall, a little more often when more
  confident (confidence barely separates right from wrong);
* ``sharp``: right about 90 % of the time overall, and nearly always at the top
  (``P(right | c) = (1 + c²)/2`` with most confidences near 1);
* ``drifting``: calibrated until ``drift_at``, then right only ``P = max(0, c − 0.4)``
  of the time (a new kind of traffic the engine reads badly, with the same confidence).

Used by tests/test_earned_simulation.py (the guarantees) and
benchmarks/earned_simulation.py (the learning-speed figures).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Scenario:
    name: str
    alpha: float  # confidence ~ Beta(alpha, beta)
    beta: float
    drift_at: int | None = None  # decision index from which the stream drifts

    def p_right(self, conf: np.ndarray, drifted: np.ndarray | bool = False) -> np.ndarray:
        """P(the engine's label agrees with the teacher | confidence)."""
        if self.name in ("calibrated", "drifting"):
            p = conf
        elif self.name == "overconfident":
            p = conf**6
        elif self.name == "anticorrelated":
            p = 1.0 - 0.9 * conf
        elif self.name == "ninety":
            p = 0.70 + 0.25 * conf
        elif self.name == "sharp":
            p = 0.5 + 0.5 * conf**2
        else:
            raise ValueError(self.name)
        if self.name == "drifting":
            p = np.where(drifted, np.clip(conf - 0.4, 0.0, 1.0), p)
        return p


SCENARIOS = {
    "calibrated": Scenario("calibrated", 4.0, 1.0),
    "overconfident": Scenario("overconfident", 8.0, 1.0),
    "anticorrelated": Scenario("anticorrelated", 4.0, 1.5),
    "ninety": Scenario("ninety", 3.0, 1.0),
    "sharp": Scenario("sharp", 4.0, 0.5),
    "drifting": Scenario("drifting", 4.0, 1.0, drift_at=1500),
}


@dataclass(frozen=True)
class Streams:
    """``S`` streams of ``N`` decisions: confidence, agreement with the teacher, and a
    uniform draw per decision that decides the audit (audited when ``< rate``)."""

    confidence: np.ndarray  # (S, N) float
    right: np.ndarray  # (S, N) bool
    audit_draw: np.ndarray  # (S, N) float in [0, 1)
    drift_at: int | None


def streams(scenario: Scenario | str, n_streams: int, length: int, seed: int) -> Streams:
    """``n_streams`` independent streams of ``length`` decisions (seeded)."""
    sc = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
    rng = np.random.default_rng(seed)
    conf = rng.beta(sc.alpha, sc.beta, size=(n_streams, length))
    conf = np.round(conf, 4)  # confidences come rounded in records; ties happen
    drifted = np.arange(length)[None, :] >= sc.drift_at if sc.drift_at is not None else False
    right = rng.random((n_streams, length)) < sc.p_right(conf, drifted)
    return Streams(conf, right, rng.random((n_streams, length)), sc.drift_at)


def true_band_precision(
    sc: Scenario | str,
    thresholds: np.ndarray,
    n: int = 400_000,
    seed: int = 99,
    drifted: bool = False,
) -> np.ndarray:
    """The true precision of the take band ``confidence ≥ t`` for each ``t`` (Monte
    Carlo over ``n`` decisions, before the drift or after it; nan where the band is
    empty)."""
    sc = SCENARIOS[sc] if isinstance(sc, str) else sc
    rng = np.random.default_rng(seed)
    conf = np.sort(np.round(rng.beta(sc.alpha, sc.beta, size=n), 4))[::-1]
    cum = np.cumsum(sc.p_right(conf, drifted))
    kept = np.searchsorted(-conf, -np.asarray(thresholds, dtype=float), side="right")
    out = np.full(len(kept), np.nan)
    some = kept > 0
    out[some] = cum[kept[some] - 1] / kept[some]
    return out


def hindsight_best(
    conf: np.ndarray, right: np.ndarray, target: float
) -> tuple[float | None, float]:
    """The lowest fixed threshold whose decisions over the whole stream are right at
    least ``target`` of the time, and the share of the stream it takes (0 when none)."""
    order = np.argsort(-conf, kind="stable")
    c, r = conf[order], right[order]
    hits = np.cumsum(r)
    k = np.arange(1, len(c) + 1)
    # A threshold keeps every tie: only the last of a run of equal confidences counts.
    last = np.append(c[1:] != c[:-1], True)
    ok = (hits / k >= target) & last
    if not ok.any():
        return None, 0.0
    i = int(np.flatnonzero(ok)[-1])
    return float(c[i]), (i + 1) / len(c)


# -- driving the core ------------------------------------------------------------------


class SimRecord:
    """The fields of an evidence record the core's state machine reads (a light stand-in
    for ``agentbranch.policy.earned._evidence.Evidence``: building 10⁶ pydantic records would
    dominate the run; ``test_simulated_records_replay_like_real_evidence`` checks they
    are replayed alike)."""

    __slots__ = ("band", "confidence", "correct", "index", "rate", "take_at")
    id = "s"
    question_id = "simulated"
    floor = bet_alpha = None  # (no learned version's bets)

    def __init__(
        self,
        confidence: float,
        correct: bool,
        rate: float,
        band: str,
        take_at: float | None,
        index: int,
    ):
        self.confidence, self.correct, self.rate, self.band = confidence, correct, rate, band
        self.take_at, self.index = take_at, index

    @property
    def time(self) -> str:  # only read for events
        return f"{self.index:09d}"

    @property
    def order(self) -> tuple[int, str]:  # replay order (only compared, never shown)
        return (self.index, self.id)


@dataclass
class Run:
    """One stream run through an ``Earned`` policy."""

    taken: np.ndarray  # (N,) bool: decisions taken by the engine
    take_at: np.ndarray  # (N,) float: threshold in force per decision (nan: closed)
    labels: int  # teacher labels collected (fallback band + audits)
    labels_to_open: int | None  # labels collected before the first decision was taken
    withdrawn_at: list[int]  # decision indices at which a withdrawal happened
    audited_takes_after: list[int]  # per withdrawal: audited takes since ``drift_at``
    state: object  # the final ``TrustState``


def run_stream(
    earned: object,
    conf: np.ndarray,
    right: np.ndarray,
    audit_draw: np.ndarray,
    rate: float,
    drift_at: int | None = None,
) -> Run:
    """Run one stream through ``earned`` the way the policy does: a decision is taken
    when a threshold is in force and its confidence reaches it, and then labelled by the
    audit teacher with probability ``rate`` (evidence ``band="take"``, ``rate``); every
    other decision goes to the ``Generate`` fallback, whose answer is a label
    (``band="fallback"``, rate 1). The threshold in force is re-read after each label
    (the only thing that changes it), so only labelled decisions are visited."""
    from agentbranch.policy.earned._state import step

    st = earned._fresh()
    n = len(conf)
    taken = np.zeros(n, dtype=bool)
    take_at = np.full(n, np.nan)
    labels = 0
    labels_to_open: int | None = None
    withdrawn_at: list[int] = []
    audited_after: list[int] = []
    since_drift = 0
    confs, rights = conf.tolist(), right.tolist()
    pos = 0
    while pos < n:
        t = st.take_at
        take = conf[pos:] >= t if t is not None else np.zeros(n - pos, dtype=bool)
        labelled = np.flatnonzero(~take | (audit_draw[pos:] < rate)).tolist()
        takes = take.tolist()
        end = n
        for j in labelled:
            i = pos + j
            is_take = takes[j]
            labels += 1
            if is_take and drift_at is not None and i >= drift_at:
                since_drift += 1
            step(
                st,
                SimRecord(
                    confs[i],
                    rights[i],
                    rate if is_take else 1.0,
                    "take" if is_take else "fallback",
                    t,
                    i,
                ),
                earned,
            )
            if st.take_at != t:
                if t is None and labels_to_open is None:
                    labels_to_open = labels
                if t is not None and st.take_at is None:
                    withdrawn_at.append(i)
                    audited_after.append(since_drift)
                end = i + 1
                break
        if t is not None:
            taken[pos:end] = take[: end - pos]
            take_at[pos:end] = t
        pos = end
    return Run(taken, take_at, labels, labels_to_open, withdrawn_at, audited_after, st)


def run_many(earned: object, s: Streams, rate: float) -> list[Run]:
    """``run_stream`` over every stream of ``s``."""
    return [
        run_stream(earned, s.confidence[k], s.right[k], s.audit_draw[k], rate, s.drift_at)
        for k in range(s.confidence.shape[0])
    ]


def takes_after_history(
    history: int, before: float, after: float, precision: float, level: float
) -> int:
    """Audited takes the core's drift test needs to withdraw a band whose precision fell
    from ``before`` to ``after``, when ``history`` audited takes were made since it
    opened (the typical path: every count at its expected value)."""
    from agentbranch.policy.earned import takes_to_withdraw

    n = takes_to_withdraw(precision, after, level, history=history, before=before)
    if n == 0:
        raise AssertionError("never withdrawn")
    return n


def single_test_reference(
    coverage: np.ndarray, precision: np.ndarray, length: int, target: float, level: float
) -> tuple[float, int | None]:
    """A ceiling for any method at ``level``: given each candidate band's share of the
    decisions (``coverage``) and its precision, after ``i`` decisions — every one
    labelled — the lowest band a single exact binomial test at ``1 - level`` shows on
    the expected counts (no looks, no choice among thresholds to pay for). Returns its
    mean coverage over ``length`` decisions and the decisions before it first shows one."""
    from scipy.special import betainc

    total, first = 0.0, None
    for i in range(1, length + 1):
        m = i * coverage
        k = m * precision
        ok = (m > 0) & (k > 0)
        p = np.ones_like(m)
        p[ok] = betainc(k[ok], m[ok] - k[ok] + 1, target)
        shown = np.flatnonzero(p <= 1 - level)
        if len(shown):
            total += coverage[shown].max()
            first = i if first is None else first
    return total / length, first


def band_curve(conf: np.ndarray, right: np.ndarray, candidates: np.ndarray):
    """``(coverage, precision)`` of the band ``conf >= t`` for each candidate ``t``."""
    order = np.argsort(-conf, kind="stable")
    c, cum = conf[order], np.cumsum(right[order])
    kept = np.searchsorted(-c, -candidates, side="right")
    prec = np.where(kept > 0, cum[np.maximum(kept, 1) - 1] / np.maximum(kept, 1), 0.0)
    return kept / len(c), prec
