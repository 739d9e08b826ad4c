"""The anytime-valid test of learned versions (``agentbranch.policy.earned.learn.eprocess``):
it errs within its level however often it is checked, it fails closed on labels it
cannot read, it bets only on labels made while every decision was labelled, each label
counts once, and its entry comes from pre-fit reads only."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _evidence_records import evidence
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbranch.policy.earned import Earned
from agentbranch.policy.earned._state import replay, step
from agentbranch.policy.earned.learn import eprocess
from agentbranch.policy.earned.learn import ladder as ld

GRID = [round(1.0 - 0.01 * k, 2) for k in range(101)]


def _crossing_share(p: float, alpha: float, streams: int, length: int, seed: int) -> float:
    """Share of streams (every label in the entry's band, right with probability ``p``)
    in which the bet ever shows the entry, checked after every label."""
    rng = np.random.default_rng(seed)
    shown = 0
    for _ in range(streams):
        bets = eprocess.Bets([0.5], 0.5, 0.9, alpha)
        for right in rng.random(length) < p:
            bets.add(0.7, bool(right))
            if bets.shown() is not None:
                shown += 1
                break
    return shown / streams


def test_checked_after_every_label_it_errs_within_its_level():
    """At the boundary of the null (precision exactly the target), over 600 labels each
    checked: at most alpha of the streams ever show the band (binomial slack 3 sd)."""
    alpha, n = 0.05, 2000
    share = _crossing_share(0.9, alpha, n, 600, seed=1)
    assert share <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / n)


def test_a_band_above_the_target_is_shown_and_one_below_it_is_not():
    assert _crossing_share(0.99, 0.0125, 200, 200, seed=2) > 0.95
    assert _crossing_share(0.8, 0.0125, 300, 600, seed=3) == 0.0


def test_at_best_it_needs_about_log_one_over_alpha_labels():
    bets = eprocess.Bets([0.5], 0.5, 0.9, 0.0125)
    n = 0
    while bets.shown() is None:
        bets.add(0.9, True)
        n += 1
    bold = math.log(1 / 0.0125) / math.log(1 + 0.97 / 9)
    # the mixture costs at most log(1 / the boldest fraction's weight) on top
    weight = eprocess.WEIGHTS[-1] / sum(eprocess.WEIGHTS)
    assert bold < n <= bold + math.log(1 / weight) / math.log(1 + 0.97 / 9) + 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(
                st.just(math.nan), st.just(math.inf), st.just(-math.inf), st.none(), st.text()
            ),
            st.one_of(st.booleans(), st.none(), st.integers(), st.just(math.nan)),
            st.one_of(st.just(1.0), st.just(math.nan), st.just(0.0), st.just(-1.0), st.just(2.0)),
        ),
        max_size=300,
    )
)
def test_labels_it_cannot_read_open_nothing(labels):
    """Confidences that are not finite numbers, labels that are not booleans, weights
    outside (0, 1]: no bet."""
    bets = eprocess.Bets(GRID, 1.0, 0.9, 0.05)
    for conf, right, weight in labels:
        bets.add(conf, right, weight)
    assert bets.labels == 0 and bets.shown() is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=200))
def test_wrong_labels_only_lower_the_wealth(rights):
    bets = eprocess.Bets([0.5], 0.5, 0.9, 0.05)
    before = 1.0
    for r in rights:
        bets.add(0.6, r)
        now = bets.wealth(0.5)
        assert math.isfinite(now) and now >= 0
        assert (now > before) if r else (now < before)
        before = now


class _Rec:
    """An evidence record as the trust state machine reads it."""

    def __init__(self, i, confidence, correct, floor, band="fallback", rate=1.0, rid=None):
        self.id = rid or f"r{i}"
        self.time = f"2026-01-01T00:00:{i:09.3f}"
        self.order = (self.time, self.id)
        self.question_id = "q"
        self.band, self.rate, self.take_at = band, rate, None
        self.confidence, self.correct, self.floor = confidence, correct, floor
        self.decision = self.bet_alpha = None


def _version(entry: float = 0.9) -> Earned:
    cfg = ld.version_earned(Earned(precision=0.9, level=0.95), 1, entry=(entry,))
    share = 0.05 * ld.version_share(1) * eprocess.SHARE
    assert cfg.anytime == ((entry,), pytest_approx(share))
    assert 1 - cfg.level == pytest_approx(0.05 * ld.version_share(1) - share)
    return cfg


def pytest_approx(x):
    import pytest

    return pytest.approx(x)


def test_a_version_opens_on_labels_made_while_everything_was_labelled():
    cfg = _version()
    st_ = cfg._fresh()
    for i in range(200):
        step(st_, _Rec(i, 0.95, True, 1.0), cfg)
        if st_.take_at is not None:
            break
    assert st_.take_at is not None and st_.trust == "earned"
    assert st_.events[-1].reason.startswith("anytime-valid test")
    assert i + 1 < 100  # before the looks could have opened it (first at 50, then 100)


def test_labels_whose_sampling_is_not_known_are_no_bet():
    """A label whose record does not say how decisions were labelled (earlier releases,
    a human review: ``floor`` absent), or says a floor above its own rate: no bet."""
    cfg = _version()
    for floor, band, rate in ((None, "fallback", 1.0), (0.5, "review", 0.2)):
        st_ = cfg._fresh()
        for i in range(49):  # below the first look
            step(st_, _Rec(i, 0.95, True, floor, band, rate), cfg)
        assert st_._bets is None or st_._bets.labels == 0
        assert st_.take_at is None


def test_while_a_band_is_open_fallback_labels_bet_at_the_audit_rate():
    """Audited takes (rate = floor) bet at full weight, fallback labels at floor / 1."""
    cfg = _version()
    audited, fallback = cfg._fresh(), cfg._fresh()
    for i in range(40):
        step(audited, _Rec(i, 0.95, True, 0.2, "review", 0.2), cfg)
        step(fallback, _Rec(i, 0.95, True, 0.2, "fallback", 1.0), cfg)
    full, fifth = audited._bets.walks[0].wealth(0.9), fallback._bets.walks[0].wealth(0.9)
    assert full > 10 * fifth and fifth > 1


def test_inverse_weighted_bets_err_within_the_level_whichever_decisions_are_taken():
    """A band at precision 0.88 whose wrong answers sit where the version in force takes
    (audited at 0.2) and right ones where it does not (all labelled): the labels
    over-represent the right ones, and the weighted bet still errs within alpha."""
    rng = np.random.default_rng(5)
    alpha, n, shown = 0.05, 1500, 0
    for _ in range(n):
        bets = eprocess.Bets([0.5], 0.5, 0.9, alpha)
        for _ in range(800):
            taken = rng.random() < 0.5  # the version in force takes half of the band
            right = rng.random() < (0.76 if taken else 1.0)  # 0.88 over the band
            if taken and rng.random() >= 0.2:
                continue  # not audited: no label
            bets.add(0.7, bool(right), 0.2 / (0.2 if taken else 1.0))
            if bets.shown() is not None:
                shown += 1
                break
    assert shown / n <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / n)


def test_each_label_counts_once_in_replay():
    """The same record delivered many times, or records of one decision, bet once."""
    cfg = _version()
    records = [_Rec(0, 0.95, True, 1.0) for _ in range(300)]  # one id, 300 copies
    st_ = replay(records, cfg)
    assert st_.take_at is None and st_._bets.labels == 1
    twice = [_Rec(i, 0.95, True, 1.0) for i in range(30)]
    twice += [_Rec(i, 0.95, True, 1.0, rid=f"r{i}") for i in range(30)]
    assert replay(twice, cfg)._bets.labels == 30


def test_the_entry_comes_from_pre_fit_reads_and_screens_out_chance():
    rng = np.random.default_rng(0)
    conf = rng.random(64)
    chance = rng.random(64) < 0.5
    args = {"candidates": GRID, "precision": 0.9}
    assert eprocess.entry(conf, chance, **args) is None  # no band above the target
    sharp = conf > 0.3  # right exactly where it is sure
    (start,) = eprocess.entry(conf, sharp, **args)
    assert 0.3 <= start <= 1.0
    assert eprocess.entry([math.nan] * 10, [True] * 10, **args) is None
    # with the version's own (surer) confidences: the band of the same share on them,
    # one walk
    surer = np.clip(conf + 0.5, 0, 1)
    (moved,) = eprocess.entry(conf, sharp, scale=surer, **args)
    share = float(np.mean(conf >= start))
    assert moved > start and abs(float(np.mean(surer >= moved)) - share) <= 0.05


def test_two_walks_share_the_error_and_the_lowest_shown_counts():
    walks = eprocess.Walks(GRID, (0.9, 0.5), 0.9, 0.02)
    assert [w.alpha for w in walks.walks] == [0.01, 0.01]
    for _ in range(80):
        walks.add(0.6, True)  # only in the lower walk's bands
    assert walks.walks[0].shown() is None and walks.shown() is not None
    assert walks.shown() <= 0.5


@pytest.mark.parametrize(
    ("field", "kept", "refused"),
    [
        ("floor", 0.2, (math.nan, math.inf, 0.0, 1.5, True, "0.2")),
        ("bet_alpha", 0.004, (math.nan, math.inf, 0.0, 1.0, -0.1, True, "0.2")),
    ],
)
def test_the_floor_and_the_bar_are_kept_with_the_record_and_checked(field, kept, refused):
    from agentbranch.policy.earned._evidence import Evidence

    rec = evidence(key="k", question_id="q", **{field: kept})
    again = Evidence.model_validate(rec.to_json(), context={"stored": True})
    assert getattr(again, field) == kept
    assert field not in evidence(key="k", question_id="q").to_json()
    for bad in refused:
        with pytest.raises(ValueError):
            evidence(key="k", question_id="q", **{field: bad})


# -- e-LOND across versions (``ladder.elond_alpha``) -----------------------------------


def _labels_to_open(bet_alpha) -> int:
    cfg = _version()
    st_ = cfg._fresh()
    for i in range(300):
        rec = _Rec(i, 0.95, True, 1.0)
        rec.bet_alpha = bet_alpha
        step(st_, rec, cfg)
        if st_.take_at is not None:
            return i + 1
    return 10**6


def test_a_threshold_earned_elsewhere_lowers_the_bar_of_a_version():
    """The bar a label is checked at is the one its record says (``Evidence.bet_alpha``):
    a version whose labels were made after other versions earned thresholds opens
    sooner; a record without one, or with a bar below the version's own, NaN or
    infinite, is checked at the version's own error (fail closed: never a lower bar)."""
    own = _version().anytime[1]
    alone = _labels_to_open(None)
    assert _labels_to_open(own) == alone
    assert _labels_to_open(3 * own) < alone
    for bad in (own / 2, math.nan, math.inf, -1.0):
        assert _labels_to_open(bad) == alone, bad
    bets = eprocess.Bets([0.5], 0.5, 0.9, 0.01)
    bets.add(0.7, True, 1.0, boost=math.nan)
    assert bets._boost == 1.0


def test_a_lower_bar_is_checked_on_every_candidate():
    """A candidate whose wealth already passes the new bar is shown at the label the
    bar comes down, even when that label is not in its band."""
    bets = eprocess.Bets([0.9, 0.5], 0.9, 0.9, 0.001)
    while bets.wealth(0.9) < 200:
        bets.add(0.95, True)
    assert bets.shown() is None  # 1/0.001 = 1000 not reached
    bets.add(0.1, True, boost=10.0)  # below every band: only the bar moved
    assert bets.shown() == 0.5  # both candidates' wealths passed the lower bar


def test_elond_counts_other_versions_once_and_is_capped_at_the_level():
    lad = ld.Ladder()
    lad.rungs = [ld.Rung(j, ld.refit_at(j) if j else 0) for j in range(4)]
    lad.adopt([True, False, True, False])  # versions 0 and 2 hold thresholds: 2 in force
    assert [r.index for r in lad.fed] == [2, 3]
    lad.adopt([True, False])  # counted once each
    assert lad.discoveries(lad.rungs[2]) == 1 and lad.discoveries(lad.rungs[3]) == 2
    lad.adopt([False, False])  # withdrawn: still discoveries (they were put in force)
    assert lad.discoveries(lad.rungs[1]) == 2
    error = 0.05 * eprocess.SHARE * ld.version_share(1)
    assert ld.elond_alpha(error, 0, 0.95) == error
    assert ld.elond_alpha(error, 2, 0.95) == pytest_approx(3 * error)
    most = ld.elond_alpha(error, 1000, 0.95)
    assert most == pytest_approx(eprocess.SHARE * 0.05)  # the level per threshold


def test_a_written_read_that_cannot_open_keeps_no_share():
    """On the embedded reader a bare yes/no (no descriptions, no examples) or bare score
    words give the written read's share to the versions; a described question, or any
    other reader, keeps ``BASE_SHARE``. The shares still add up to 1."""
    import agentbranch as ab

    bare = ab.yes_no("Is this about sport?")
    described = ab.yes_no("Is this about sport?", yes="a sports report", no="anything else")
    assert ld.base_share("embedded", "q", bare) == ld.BARE_BASE
    assert ld.base_share("embedded", "q", described) == ld.BASE_SHARE
    assert ld.base_share("vllm", "q", bare) == ld.BASE_SHARE
    assert ld.base_share(None, "q", bare) == ld.BASE_SHARE
    for base in (ld.BARE_BASE, ld.BASE_SHARE):
        total = sum(ld.version_share(j, base) for j in range(200_000))
        assert abs(total - 1.0) < 1e-4
