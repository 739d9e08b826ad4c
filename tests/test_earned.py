"""Earned thresholds (agentbranch.policy.earned): statistics, the policy, drift, keys."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from _earned_fixtures import (
    URGENT,
    URGENT_KEY,
    Oracle,
    UrgentState,
    engine,
    observe_fallback,
    state,
    urgent_graph,
)
from _evidence_records import evidence
from _reference_statistics import (
    Drift,
    grid,
    learn_then_test,
    look_alpha,
    min_band,
    pvalue_below,
    stratified,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError
from agentbranch.policy import Earned, Generate, GotoNode, Policy, Resolver, replay
from agentbranch.policy.earned import QuestionKey, takes_to_withdraw

_T0 = datetime(2026, 1, 1, tzinfo=UTC)

# -- statistics -------------------------------------------------------------------------


@pytest.mark.parametrize(("right", "n"), [(9, 10), (45, 50), (50, 50), (0, 5), (80, 100)])
def test_pvalue_is_the_exact_one_sided_binomial(right, n):
    expected = binomtest(right, n, 0.9, alternative="greater").pvalue if right else 1.0
    assert pvalue_below(right, n, 0.9) == pytest.approx(expected, rel=1e-9)


def test_min_band_is_the_smallest_all_right_band_that_rejects():
    n = min_band(0.9, 0.025)
    assert pvalue_below(n, n, 0.9) <= 0.025 < pvalue_below(n - 1, n - 1, 0.9)


def test_look_alphas_sum_below_alpha():
    assert sum(look_alpha(0.05, k) for k in range(60)) <= 0.05


def _calibrated(rng, n, right=0.9):
    ok = rng.random(n) < right
    conf = np.where(ok, 0.5 + 0.5 * rng.beta(5, 1, n), 0.5 + 0.5 * rng.beta(1.5, 2, n))
    return conf, ok


def test_a_question_right_90_percent_opens_within_100_labels():
    cands = grid(1.0, 0.0, 0.01)
    opened = 0
    for seed in range(40):
        conf, ok = _calibrated(np.random.default_rng(seed), 100)
        looks = [(50, look_alpha(0.05, 0)), (100, look_alpha(0.05, 1))]
        if any(
            learn_then_test(conf[:n], ok[:n], precision=0.9, alpha=a, candidates=cands) is not None
            for n, a in looks
        ):
            opened += 1
    assert opened >= 26  # measured 31/40 (0.77 over 300 streams)


def test_anti_correlated_confidence_never_opens():
    cands = grid(1.0, 0.0, 0.02)
    for seed in range(30):
        rng = np.random.default_rng(seed)
        conf = rng.uniform(0.5, 1.0, 400)
        ok = rng.random(400) < (1.5 - conf)  # the surer, the more often wrong
        for k, n in enumerate((50, 100, 200, 400)):
            t = learn_then_test(
                conf[:n], ok[:n], precision=0.9, alpha=look_alpha(0.05, k), candidates=cands
            )
            assert t is None


def test_threshold_never_goes_below_the_lowest_confidence_seen():
    conf = [0.8] * 40
    t = learn_then_test(conf, [True] * 40, precision=0.8, alpha=0.05, candidates=grid(1, 0, 0.02))
    assert t is not None and 0.78 < t <= 0.8


def test_the_chosen_band_reaches_the_precision_on_average_over_streams():
    """LTT at alpha: the share of streams whose opened band is below target stays <= alpha
    (checked against the band's true precision, known for this synthetic family)."""
    cands = grid(1.0, 0.0, 0.02)
    bad = opened = 0
    for seed in range(300):
        rng = np.random.default_rng(1000 + seed)
        conf = rng.uniform(0.5, 1.0, 200)
        ok = rng.random(200) < conf  # calibrated: true band precision = mean conf above t
        t = learn_then_test(conf, ok, precision=0.85, alpha=0.05, candidates=cands)
        if t is not None:
            opened += 1
            lo = max(t, 0.5)
            bad += (1 + lo) / 2 < 0.85  # E[conf | conf >= lo] for uniform(0.5, 1)
    assert opened > 120 and bad / 300 <= 0.05  # measured 164 opened, bad 0


def _opened_then_audited():
    """100 labels while nothing was taken (60 at 0.97 all right, 40 at 0.85, 36 right);
    then, with 0.96 in force, 100 fallback labels at 0.85-0.95 (93 right) and 10
    audited takes at 0.97 (rate 0.05, all right)."""
    conf = [0.97] * 60 + [0.85] * 40 + list(np.linspace(0.85, 0.95, 100)) + [0.97] * 10
    ok = [True] * 60 + [True] * 36 + [False] * 4 + [True] * 93 + [False] * 7 + [True] * 10
    w = [1.0] * 200 + [20.0] * 10
    in_force = [None] * 100 + [0.96] * 110
    return (np.array(conf), np.array(ok, dtype=float), np.array(w), in_force)


def test_labels_made_before_the_opening_still_count_once_audits_arrive():
    conf, ok, w, in_force = _opened_then_audited()
    tau = np.array([np.nan if x is None else x for x in in_force])
    rev = np.zeros(len(conf), dtype=int)
    n, right = stratified(conf, ok, w, tau, rev, 0.85)
    band = conf >= 0.85
    kish = w[band].sum() ** 2 / (w[band] ** 2).sum()  # one 1/rate-weighted sample
    assert kish < 40 and n > 140  # strata [0.85, 0.96) and [0.96, 1]: 140 + 70 labels
    assert right / n == pytest.approx(0.35 * 129 / 140 + 0.65 * 70 / 70)
    t = learn_then_test(
        conf, ok, weights=w, in_force=in_force, precision=0.9, alpha=0.05,
        candidates=grid(1.0, 0.8, 0.01),
    )  # fmt: skip
    assert t == 0.85
    # 37.6 of 38.1 right: the weighted sample as a whole cannot show 0.9 at the same band
    assert pvalue_below(kish * 0.9725, kish, 0.9) > 0.05


def test_one_stratum_is_the_exact_test():
    conf = np.array([0.99, 0.95, 0.9, 0.8])
    ok = np.array([1.0, 1.0, 0.0, 1.0])
    none = np.full(4, np.nan)
    assert stratified(conf, ok, np.ones(4), none, np.zeros(4, dtype=int), 0.85) == (3.0, 2.0)
    # the same probability for every label: plain counts, whatever it is
    assert stratified(conf, ok, np.full(4, 20.0), none, np.zeros(4, dtype=int), 0.0) == (4.0, 3.0)


def _drift_after(right: int, wrong: int, precision: float) -> Drift:
    """The drift test after ``right`` agreeing then ``wrong`` disagreeing audited takes."""
    drift = Drift(precision)
    for ok in [True] * right + [False] * wrong:
        drift.add(ok)
    return drift


def test_drift_needs_a_bounded_number_of_audited_takes():
    assert takes_to_withdraw(0.9, 0.95, 0.95) == 0
    n70, n50 = takes_to_withdraw(0.9, 0.7, 0.95), takes_to_withdraw(0.9, 0.5, 0.95)
    assert 0 < n50 < n70 <= 40
    drift, wrong = Drift(0.9), 0
    for n in range(1, n70 + 1):  # the typical path: the expected number wrong, rounded
        drift.add(round(n * 0.3) == wrong)
        wrong = round(n * 0.3)
        assert drift.drifted(0.05) == (n == n70)


def test_drift_false_alarm_rate_under_the_null():
    rng = random.Random(0)
    alarms = 0
    for _ in range(300):
        drift = Drift(0.9)
        for _ in range(300):
            drift.add(rng.random() < 0.9)
            if drift.drifted(0.05):
                alarms += 1
                break
    assert alarms / 300 <= 0.05


# -- configuration ----------------------------------------------------------------------


@given(
    st.sampled_from(["precision", "level"]),
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not 0 < x < 1),
        st.just(float("nan")),
        st.booleans(),
        st.text(max_size=3),
    ),
)
@settings(max_examples=60, deadline=None)
def test_bad_precision_or_level_is_a_clear_error(name, value):
    with pytest.raises(ConfigurationError, match=rf"Earned\({name}=\.\.\.\)"):
        Earned(**{name: value})


@pytest.mark.parametrize(
    "kw",
    [
        {"start_at": 1.5},
        {"start_at": float("nan")},
        {"max_take_at": -0.1},
        {"min_take_at": 0.9, "max_take_at": 0.5},
        {"min_evidence": 0},
        {"min_evidence": 2.5},
        {"step": 0},
        {"refresh_s": -1},
        {"store": 42},
        {"store": "  "},
    ],
)
def test_bad_options_are_clear_errors(kw):
    with pytest.raises(ConfigurationError, match="Earned"):
        Earned(**kw)


def test_earned_without_a_label_source_says_what_to_add():
    with pytest.raises(ConfigurationError, match=r"fallbacks=\[Generate\(chat_model\)\]"):
        Policy(take_at=Earned(), fallbacks=[GotoNode("human")])
    with pytest.raises(ConfigurationError, match="Audit"):
        Policy(
            take_at=Earned(),
            fallbacks=[GotoNode("human")],
            audit=ab.Audit(rate=0.0, model=Oracle()),
        )
    Policy(take_at=Earned(), fallbacks=[GotoNode("human")], audit=ab.Audit(model=Oracle()))
    Policy(take_at=Earned(), fallbacks=[Generate(Oracle())])


def test_earned_without_audits_warns_that_drift_goes_unnoticed(caplog):
    # The fallback's labels earn a threshold, but nothing checks what is taken above it.
    with caplog.at_level("WARNING", logger="agentbranch"):
        Policy(take_at=Earned(), fallbacks=[Generate(Oracle())])
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "drift cannot withdraw it" in caplog.text and "Audit(rate=0.05)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="agentbranch"):
        Policy(take_at=Earned(), fallbacks=[Generate(Oracle())], audit=ab.Audit(rate=0.05))
        Policy(take_at=0.8, fallbacks=[Generate(Oracle())])
    assert caplog.records == []


def test_earned_is_exported_at_the_top():
    assert ab.Earned is Earned


# -- the policy ---------------------------------------------------------------------------


def run(resolver, states, use_async=False):
    out = []
    for s in states:
        rec = asyncio.run(resolver.aresolve(s)) if use_async else resolver.resolve(s)
        out.append(rec["urgent"])
    return out


def stream(n, p=0.99, wrong_every=0, start=0):
    """Confident 'yes' answers; every ``wrong_every``-th one the truth is 'no'."""
    out = []
    for i in range(start, start + n):
        truth = "no" if wrong_every and i % wrong_every == 0 else "yes"
        out.append(state(i, "yes", p, truth))
    return out


@pytest.mark.parametrize("use_async", [False, True])
def test_learning_takes_nothing_then_earns_and_takes(use_async):
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    teacher = Oracle()
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(teacher)])
    )
    first = run(r, stream(20), use_async)
    assert all(rec["decided_by"] == "fallback" for rec in first)
    assert all(rec["trust"] == "learning" and rec["take_at"] is None for rec in first)
    assert all(rec["engine_label"] == "yes" and rec["band"] == "fallback" for rec in first)
    assert teacher.calls == 20
    later = run(r, stream(5, start=20), use_async)
    assert all(rec["decided_by"] == "engine" and rec["trust"] == "earned" for rec in later)
    take_at = later[0]["take_at"]
    assert 0 < take_at <= later[0]["confidence"]
    assert teacher.calls == 20  # taken: no teacher call
    ev = earned.state(URGENT_KEY).events
    assert [e.kind for e in ev] == ["earned"]


def test_fixed_threshold_records_say_fixed():
    r = Resolver(engine(), {"urgent": URGENT}, Policy(take_at=0.5, fallbacks=[GotoNode("x")]))
    rec = r.resolve(state(1, "yes", 0.99, "yes"))["urgent"]
    assert (rec["take_at"], rec["trust"]) == (0.5, "fixed")


def test_a_question_mostly_wrong_never_opens():
    earned = Earned(precision=0.9, min_evidence=20, refresh_s=0)
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    )
    recs = run(r, stream(160, wrong_every=2))
    assert all(rec["decided_by"] == "fallback" and rec["trust"] == "learning" for rec in recs)


def test_changed_question_or_model_starts_learning_again():
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    policy = Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    r = Resolver(engine(), {"urgent": URGENT}, policy)
    run(r, stream(20))
    assert r.resolve(stream(1)[0])["urgent"]["trust"] == "earned"
    reworded = ab.yes_no("Is the ticket urgent? Answer for the on-call team.")
    r2 = Resolver(engine(), {"urgent": reworded}, policy)
    assert r2.resolve(stream(1)[0])["urgent"]["trust"] == "learning"
    with_examples = ab.yes_no("Is the ticket urgent?", examples={"yes": ["site down"]})
    r3 = Resolver(engine(), {"urgent": with_examples}, policy)
    assert r3.resolve(stream(1)[0])["urgent"]["trust"] == "learning"
    r4 = Resolver(engine(model="other-model"), {"urgent": URGENT}, policy)
    assert r4.resolve(stream(1)[0])["urgent"]["trust"] == "learning"


def test_start_at_takes_from_a_hand_chosen_threshold():
    earned = Earned(precision=0.8, min_evidence=20, start_at=0.5, refresh_s=0)
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    )
    rec = r.resolve(stream(1)[0])["urgent"]
    assert (rec["decided_by"], rec["take_at"], rec["trust"]) == ("engine", 0.5, "fixed")


def test_max_take_at_caps_the_threshold():
    earned = Earned(precision=0.8, min_evidence=20, max_take_at=0.6, refresh_s=0)
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    )
    run(r, stream(20))
    rec = r.resolve(stream(1)[0])["urgent"]
    assert rec["trust"] == "earned" and rec["take_at"] <= 0.6


def test_teacher_answering_outside_the_options_gives_no_evidence():
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    bad = Oracle(answer="maybe")
    policy = Policy(take_at=earned, fallbacks=[Generate(bad), GotoNode("human")])
    r = Resolver(engine(), {"urgent": URGENT}, policy)
    recs = run(r, stream(30))
    assert all(rec["goto"] == "human" for rec in recs)
    st_ = earned.state(URGENT_KEY)
    assert st_.records == 0 and st_.trust == "learning"


def test_bad_evidence_is_ignored_with_a_warning(caplog):
    earned = Earned(refresh_s=0)
    caplog.set_level(logging.WARNING, logger="agentbranch")
    for conf, teacher in ((0.9, "maybe"), (math.nan, "yes"), (1.5, "yes")):
        got = observe_fallback(earned, teacher, conf, QuestionKey("urgent", URGENT, "r", "m"))
        assert got is None
    assert earned.state(QuestionKey("urgent", URGENT, "r", "m")).records == 0
    assert caplog.text.count("evidence for 'urgent' ignored") == 3


def test_frozen_writes_nothing_and_keeps_the_threshold():
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    )
    run(r, stream(20))
    earned.freeze()
    before = earned.state(URGENT_KEY).records
    recs = run(r, [state(i, "yes", 0.6, "yes") for i in range(30)])  # below: fallbacks
    assert all(rec["decided_by"] == "fallback" for rec in recs)
    assert earned.state(URGENT_KEY).records == before
    assert r.resolve(stream(1)[0])["urgent"]["trust"] == "earned"


def test_replay_is_deterministic_whatever_the_order():
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    )
    run(r, stream(45, p=0.97, wrong_every=9))
    key = earned.key(URGENT_KEY)
    records = earned.evidence.load(key)
    shuffled = list(records)
    random.Random(3).shuffle(shuffled)
    a, b = replay(records, earned), replay(shuffled, earned)
    assert (a.take_at, a.trust, a.events) == (b.take_at, b.trust, b.events)


# -- drift --------------------------------------------------------------------------------


def test_drift_withdraws_trust_with_a_warning(caplog):
    caplog.set_level(logging.WARNING, logger="agentbranch")
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    audit = ab.Audit(rate=1.0)
    teacher = Oracle()
    r = Resolver(
        engine(),
        {"urgent": URGENT},
        Policy(take_at=earned, fallbacks=[Generate(teacher)], audit=audit),
    )
    run(r, stream(20))
    taken = run(r, stream(10, start=20))
    assert all(rec["decided_by"] == "engine" for rec in taken)
    audit.flush()
    # the traffic turns: the engine still says yes, the truth is now no
    for i in range(40):
        rec = r.resolve(state(100 + i, "yes", 0.99, "no"))["urgent"]
        audit.flush()
        if rec["trust"] == "withdrawn":
            break
    else:
        pytest.fail("drift never withdrew the band")
    assert rec["decided_by"] == "fallback" and rec["take_at"] is None
    # decisions 0..i-1 were audited wrong; withdrawn at the first audit that takes the
    # e-process over 1/alpha, not later
    assert _drift_after(10, i, 0.8).drifted(0.05)
    assert not _drift_after(10, i - 1, 0.8).drifted(0.05)
    assert "trust in question 'urgent' withdrawn" in caplog.text
    assert "drift test" in caplog.text
    audit.close()


def test_audit_teacher_alone_labels_the_fallback_band():
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    audit = ab.Audit(model=Oracle(), rate=1.0)
    r = Resolver(
        engine(),
        {"urgent": URGENT},
        Policy(take_at=earned, fallbacks=[GotoNode("human")], audit=audit),
    )
    for s in stream(20):
        assert r.resolve(s)["urgent"]["goto"] == "human"
        audit.flush()
    assert r.resolve(stream(1)[0])["urgent"]["decided_by"] == "engine"
    audit.close()


# -- LangGraph ----------------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
def test_decide_node_and_router_fall_back_then_take(use_async):
    from langgraph.graph import START, StateGraph

    from agentbranch.langgraph import DecisionRouter

    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    policy = Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    app = urgent_graph(policy)

    def invoke(text):
        return asyncio.run(app.ainvoke({"text": text})) if use_async else app.invoke({"text": text})

    for s in stream(20):
        out = invoke(s)
        assert out["decisions"]["urgent"]["decided_by"] == "fallback"
    out = invoke(stream(1, start=50)[0])
    assert out["out"] == "page" and out["decisions"]["urgent"]["trust"] == "earned"

    router = DecisionRouter(
        engine(),
        "urgent",
        URGENT,
        path_map={"yes": "page", "no": "queue"},
        policy=policy,
        state_key="text",
    )
    g2 = StateGraph(UrgentState)
    g2.add_node("page", lambda s: {"out": "page"})
    g2.add_node("queue", lambda s: {"out": "queue"})
    g2.add_conditional_edges(START, router, router.path_map)
    app2 = g2.compile()
    out = (
        asyncio.run(app2.ainvoke({"text": stream(1)[0]}))
        if use_async
        else app2.invoke({"text": stream(1)[0]})
    )
    assert out["out"] == "page"


# -- replay -------------------------------------------------------------------------------


def test_replay_bands_with_the_recorded_threshold_whatever_the_store_holds(tmp_path):
    from _earned_fixtures import scripted

    from agentbranch.replay import Cassette

    path = tmp_path / "run.jsonl"
    states = stream(25)

    def resolve_all(mode, earned):
        with Cassette(path, mode=mode) as cassette:
            eng = ab.DecisionEngine(cassette.reader(ab.ScriptedReader({"urgent": scripted})))
            r = Resolver(
                eng, {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())])
            )
            return [r.resolve(s)["urgent"] for s in states]

    recorded = resolve_all("all", Earned(precision=0.8, min_evidence=20, refresh_s=0))
    assert [r["trust"] for r in recorded] == ["learning"] * 20 + ["earned"] * 5
    fresh = Earned(precision=0.8, min_evidence=20, refresh_s=0)  # knows nothing
    replayed = resolve_all("none", fresh)
    keep = ("label", "decided_by", "take_at", "trust", "band")
    assert [{k: r[k] for k in keep} for r in replayed] == [
        {k: r[k] for k in keep} for r in recorded
    ]
    assert fresh.states() == {} or all(s.records == 0 for s in fresh.states().values())
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert sum(x.get("kind") == "threshold" for x in lines) == 25


def test_a_replay_without_a_recorded_threshold_is_a_miss(tmp_path):
    from _earned_fixtures import scripted

    from agentbranch.replay import Cassette, ReplayMissError

    path = tmp_path / "run.jsonl"
    with Cassette(path, mode="all") as cassette:
        eng = ab.DecisionEngine(cassette.reader(ab.ScriptedReader({"urgent": scripted})))
        Resolver(eng, {"urgent": URGENT}, Policy(take_at=0.5, fallbacks=[GotoNode("x")])).resolve(
            stream(1)[0]
        )
    with Cassette(path, mode="none") as cassette:
        eng = ab.DecisionEngine(cassette.reader())
        policy = Policy(take_at=Earned(), fallbacks=[Generate(Oracle())])
        with pytest.raises(ReplayMissError, match="no threshold"):
            Resolver(eng, {"urgent": URGENT}, policy).resolve(stream(1)[0])


# -- properties of the state machine --------------------------------------------------------


def _records(draws, *, right=None):
    out = []
    for i, (conf, ok, taken, rate) in enumerate(draws):
        ok = ok if right is None else right
        out.append(
            evidence(
                key="k",
                question_id="q",
                source="audit" if taken else "fallback",
                band="take" if taken else "fallback",
                confidence=conf,
                teacher_label="yes" if ok else "no",
                rate=rate if taken else 1.0,
                take_at=None,
                trust="learning",
                time=(_T0 + timedelta(milliseconds=i)).isoformat(timespec="milliseconds"),
            )
        )
    return out


_draw = st.tuples(
    st.floats(0.0, 1.0),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0.05, 0.2, 1.0]),
)


@given(st.lists(_draw, max_size=300), st.sampled_from([0.6, 0.8, 0.9]))
@settings(max_examples=60, deadline=None)
def test_evidence_that_always_disagrees_never_opens(draws, precision):
    earned = Earned(precision=precision, min_evidence=5)
    state_ = replay(_records(draws, right=False), earned)
    assert state_.take_at is None and state_.trust == "learning"


@given(st.lists(_draw, max_size=300))
@settings(max_examples=60, deadline=None)
def test_any_evidence_gives_a_candidate_threshold_and_a_known_trust(draws):
    earned = Earned(precision=0.8, min_evidence=5)
    state_ = replay(_records(draws), earned)
    assert state_.trust in ("learning", "earned", "withdrawn")
    assert state_.take_at is None or state_.take_at in earned.candidates
    assert (state_.take_at is None) == (state_.trust != "earned")
    assert state_.records == len(draws)


@given(st.integers(0, 60))
@settings(max_examples=20, deadline=None)
def test_an_open_band_whose_audits_all_disagree_closes_in_bounded_takes(right_before):
    earned = Earned(precision=0.8, min_evidence=20)
    opening = _records([(0.95, True, False, 1.0)] * 20)
    assert replay(opening, earned).trust == "earned"
    audits = _records([(0.95, True, True, 0.1)] * right_before + [(0.95, False, True, 0.1)] * 60)
    for r, rec in enumerate(audits):
        later = _T0 + timedelta(hours=1, milliseconds=r)
        object.__setattr__(rec, "time", later.isoformat(timespec="milliseconds"))
    state_ = replay(opening + audits, earned)
    (withdrawn,) = [e for e in state_.events if e.kind == "withdrawn"]
    wrong_needed = next(w for w in range(1, 61) if _drift_after(right_before, w, 0.8).drifted(0.05))
    assert withdrawn.index == 20 + right_before + wrong_needed - 1
    assert wrong_needed <= takes_to_withdraw(0.8, 0.0, 0.95) + right_before


def test_the_documented_drift_figures_hold():
    import _reference_statistics as th

    assert [takes_to_withdraw(0.9, p, 0.95) for p in (0.8, 0.7, 0.5)] == [93, 25, 7]
    doc = " ".join(th.__doc__.split())
    assert "93 audited takes" in doc and "25 to 0.7, 7 to 0.5" in doc
    after = [takes_to_withdraw(0.9, 0.6, 0.95, history=h, before=0.95) for h in (1000, 10_000)]
    assert after == [42, 57]
    assert "42 after 1,000 good audits and 57 after 10,000" in doc


def test_review_band_with_earned_goes_to_a_human_and_is_evidence():
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    policy = Policy(take_at=earned, review_below=0.5, fallbacks=[Generate(Oracle())])
    answers = []

    def review(payload):
        answers.append(payload["question_id"])
        return "no"

    r = Resolver(engine(), {"urgent": URGENT}, policy, review=review)
    rec = r.resolve(state(1, "yes", 0.6, "no"))["urgent"]  # confidence ~0.03: review band
    assert (rec["band"], rec["decided_by"], rec["label"]) == ("review", "human", "no")
    st_ = earned.state(URGENT_KEY)
    assert st_.records == 1 and answers == ["urgent"]


def test_each_replica_announces_a_withdrawal_once(caplog):
    from langgraph.store.memory import InMemoryStore

    caplog.set_level(logging.WARNING, logger="agentbranch")
    store = InMemoryStore()
    a = Earned(precision=0.8, min_evidence=20, store=store, refresh_s=0)
    b = Earned(precision=0.8, min_evidence=20, store=store, refresh_s=3600)
    policy = Policy(take_at=a, fallbacks=[Generate(Oracle())])
    run(Resolver(engine(), {"urgent": URGENT}, policy), stream(20))
    assert b.threshold(URGENT_KEY).trust == "earned"
    for _ in range(10):
        a.observe(
            URGENT_KEY,
            "no",
            source="audit",
            band="take",
            confidence=0.95,
            options=["yes", "no"],
            engine_label="yes",
            rate=0.1,
            take_at=0.9,
            trust="earned",
        )
    assert caplog.text.count("withdrawn:") == 1  # replica a, as it happened
    b.refresh()
    b.refresh()
    assert b.threshold(URGENT_KEY).trust == "withdrawn"
    assert caplog.text.count("withdrawn:") == 2  # replica b, once


def test_copies_of_a_policy_share_one_earned():
    import copy

    earned = Earned()
    policy = Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    assert copy.deepcopy(policy).take_at is earned and copy.copy(earned) is earned


def test_records_made_in_the_same_millisecond_replay_in_the_order_they_were_made():
    # A replica replays the store sorted by (time, id); with random ids, records made in
    # the same millisecond came back in a random order (and a withdrawal was announced
    # twice by the process that made them).
    made = [
        evidence(
            key="k",
            reader="scripted",
            model="m",
            source="audit",
            band="take",
            teacher_label="no",
            rate=0.5,
            time="2026-12-01T00:00:00.000+00:00",
        )
        for _ in range(50)
    ]
    assert sorted(made, key=lambda r: r.order) == made
