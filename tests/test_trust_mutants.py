"""Earned trust: behaviours that hand-made mutants of the trust code broke without a test
noticing (issue 42). Each test states one behaviour through the public API —
``Earned(...)`` with ``observe``/``threshold``/``state``, ``replay``, ``Evidence`` and the
stores' ``append``/``load`` — so it holds whatever the internals look like.

The decisions here are simulated the way ``Policy`` labels them: below the threshold in
force every decision is labelled (a ``Generate`` answer, rate 1), above it only the
audited share (rate ``r``, each label standing for ``1/r`` decisions)."""

from __future__ import annotations

import json
import math

import pytest
from _evidence_records import evidence
from pydantic import ValidationError

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.policy import Earned, JsonlEvidenceStore, Threshold, replay
from agentbranch.policy.earned import LangGraphEvidenceStore, QuestionKey
from agentbranch.policy.earned._evidence import Evidence

URGENT = ab.yes_no("Is the ticket urgent?")
WHO = ("urgent", URGENT, "scripted", "scripted-model")
KEY = QuestionKey(*WHO)


def threshold(earned: Earned) -> Threshold:
    return earned.threshold(KEY)


def label(
    earned: Earned, confidence: float, right: bool, *, rate: float = 1.0, review: bool = False
) -> bool:
    """One decision at ``confidence`` labelled by the teacher (``right``: it agreed):
    taken (an audit at ``rate``) when the threshold in force allows, else the fallback
    band (or the review band). Returns whether it was taken."""
    th = threshold(earned)
    taken = not review and th.take_at is not None and confidence >= th.take_at
    band = "take" if taken else "review" if review else "fallback"
    source = "audit" if taken else "review" if review else "fallback"
    earned.observe(
        QuestionKey("urgent", URGENT, "scripted", "scripted-model"),
        "yes" if right else "no",
        source=source,
        band=band,
        confidence=confidence,
        options=["yes", "no"],
        engine_label="yes",
        rate=rate if taken else 1.0,
        take_at=th.take_at,
        trust=th.trust,
    )
    return taken


def replayed(earned: Earned):
    """The state a fresh process computes from the store's records."""
    key = earned.key(KEY)
    return replay(earned.evidence.load(key), earned)


# -- start_at: a hand-chosen threshold is only a starting point ---------------------------


def _mixed(n: int) -> list[tuple[float, bool]]:
    """Confidences 0.50-0.99 in a fixed shuffle; right at 0.80 and above, half of the
    time below: precision >= 0.8 holds for bands from about 0.76 up, not at 0.6."""
    return [(0.5 + (i * 37 % 50) / 100, 0.5 + (i * 37 % 50) / 100 >= 0.8 or i % 2 == 0)
            for i in range(n)]  # fmt: skip


def test_start_at_is_replaced_by_a_higher_threshold_the_evidence_shows():
    """A hand-chosen 0.6 takes decisions the evidence then shows are below the target:
    the first look that shows a threshold replaces it even though it is higher, and
    from then on nothing between 0.6 and the earned threshold is taken."""
    earned = Earned(precision=0.8, min_evidence=30, start_at=0.6, refresh_s=0)
    seen = []
    for c, right in _mixed(300):
        th = threshold(earned)
        seen.append((c, th))
        label(earned, c, right)  # every take audited (rate 1): the drift test watches too
    st = earned.state(KEY)
    kinds = [(e.kind, e.take_at) for e in st.events]
    # The first look (30 labels) shows nothing yet: the hand-chosen threshold stays.
    assert kinds[0] == ("look", 0.6)
    assert seen[30][1] == Threshold(0.6, "fixed")
    # The next one shows 0.8 only: it replaces 0.6.
    opened = next(e for e in st.events if e.kind == "earned")
    assert opened.take_at == 0.8 and opened.index == 59
    assert st.trust == "earned" and st.take_at >= 0.75
    after = [(c, th) for c, th in seen[opened.index + 1 :]]
    assert all(th.trust == "earned" and th.take_at >= 0.75 for _, th in after)
    assert not [c for c, th in after if 0.6 <= c < 0.75 and c >= th.take_at]
    assert replayed(earned).threshold == st.threshold


def test_start_at_is_lowered_by_a_look_that_shows_a_lower_threshold():
    earned = Earned(precision=0.8, min_evidence=30, start_at=0.95, refresh_s=0)
    for i in range(120):
        label(earned, 0.80 + (i * 7 % 20) / 100, True)  # 0.80-0.99, always right
    st = earned.state(KEY)
    assert st.trust == "earned" and st.take_at < 0.95
    assert [e.kind for e in st.events][0] == "earned"
    assert threshold(earned) == replayed(earned).threshold


def test_start_at_stays_while_no_look_shows_anything():
    earned = Earned(precision=0.9, min_evidence=20, start_at=0.7, refresh_s=0)
    for i in range(80):
        label(earned, 0.5 + (i % 10) / 100, i % 2 == 0)  # below 0.7, half right
    st = earned.state(KEY)
    assert st.threshold == Threshold(0.7, "fixed")
    assert st.looks >= 2 and all(e.kind == "look" for e in st.events)


# -- audits weigh 1/rate inside the state machine ---------------------------------------


def _opened_at_097() -> Earned:
    """Opened at 0.97 by 50 sure labels (precision 0.9, min_evidence 50)."""
    earned = Earned(precision=0.9, min_evidence=50, refresh_s=0)
    for _ in range(50):
        assert not label(earned, 0.97, True)
    assert threshold(earned) == Threshold(0.97, "earned")
    return earned


def _look_lowered_or_not(earned: Earned, lowered: bool) -> None:
    """After 100 labels (20 of them audits, all right), the look at 100 lowered the
    threshold to 0.93 or kept it at 0.97, and a replay of the store agrees."""
    st = earned.state(KEY)
    assert (st.labels, st.audit_right, st.audit_wrong) == (100, 20, 0)
    assert st.take_at == (0.93 if lowered else 0.97)
    assert [e.kind for e in st.events] == ["earned", "lowered" if lowered else "look"]
    assert replayed(earned).threshold == st.threshold


@pytest.mark.parametrize(("rate", "lowered"), [(0.05, True), (1.0, False)])
def test_each_audit_stands_for_one_over_rate_takes_when_a_look_lowers(rate, lowered):
    """The same labels, audited at 5 % or at 100 %: 50 sure labels open the band at
    0.97; then 20 audits of the take band (all right) and 30 fallback labels at 0.93 (8
    wrong). At 5 % the audits stand for 400 takes, so the band down to 0.93 is mostly
    the good top and the look lowers the threshold to 0.93; at 100 % they stand for 20
    and the 8 errors weigh enough that nothing is shown below 0.97."""
    earned = _opened_at_097()
    for i in range(50):
        if i % 5 < 2:
            assert label(earned, 0.98, True, rate=rate)
        else:
            assert not label(earned, 0.93, i % 5 != 2 or i % 3 == 0)
    _look_lowered_or_not(earned, lowered)


# -- the drift test sees audited takes only ---------------------------------------------


def _opened() -> Earned:
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    for _ in range(20):
        label(earned, 0.97, True)
    assert threshold(earned) == Threshold(0.97, "earned")
    return earned


def test_human_review_labels_never_feed_the_drift_test():
    """Review-band decisions are the ones the engine was unsure of: a human disagreeing
    with all of them says nothing about the take band, so it never withdraws it."""
    earned = _opened()
    for _ in range(60):
        label(earned, 0.55, False, review=True)
    st = earned.state(KEY)
    assert st.threshold == Threshold(0.97, "earned")
    assert (st.audit_right, st.audit_wrong, st.drift_evalue) == (0, 0, 1.0)
    assert "withdrawn" not in [e.kind for e in st.events]
    assert st.labels == 80  # still evidence for the looks
    assert replayed(earned).threshold == st.threshold


def test_fallback_labels_never_feed_the_drift_test():
    earned = _opened()
    for _ in range(60):
        assert not label(earned, 0.6, False)
    st = earned.state(KEY)
    assert st.threshold == Threshold(0.97, "earned")
    assert (st.audit_right, st.audit_wrong, st.drift_evalue) == (0, 0, 1.0)


def test_audited_takes_that_disagree_do_withdraw():
    earned = _opened()
    for _ in range(60):
        if threshold(earned).trust != "earned":
            break
        assert label(earned, 0.98, False, rate=0.5)
    st = earned.state(KEY)
    assert st.threshold == Threshold(None, "withdrawn")
    assert [e.kind for e in st.events] == ["earned", "withdrawn"]


# -- precision and level: strictly between 0 and 1 --------------------------------------


@pytest.mark.parametrize("name", ["precision", "level"])
@pytest.mark.parametrize(
    "value", [1.0, 1, 0.0, 0, -0.1, 1.5, math.nan, math.inf, -math.inf, True, False, "0.9", None]
)
def test_precision_and_level_outside_0_1_are_configuration_errors(name, value):
    with pytest.raises(ConfigurationError, match=rf"Earned\({name}=\.\.\.\) must be a number"):
        Earned(**{name: value})


@pytest.mark.parametrize("name", ["precision", "level"])
@pytest.mark.parametrize("value", [1e-9, 0.5, 0.999999])
def test_precision_and_level_just_inside_0_1_work(name, value):
    earned = Earned(**{name: value}, min_evidence=5)
    assert getattr(earned, name) == value
    for _ in range(5):
        label(earned, 0.99, True)
    assert threshold(earned).trust in ("learning", "earned")


@pytest.mark.parametrize("name", ["max_take_at", "min_take_at", "start_at"])
@pytest.mark.parametrize("value", [True, False, -0.01, 1.01, math.nan, "0.5"])
def test_thresholds_outside_0_1_or_booleans_are_configuration_errors(name, value):
    with pytest.raises(ConfigurationError, match=rf"Earned\({name}=\.\.\.\)"):
        Earned(**{name: value})


@pytest.mark.parametrize("name", ["max_take_at", "min_take_at", "start_at"])
@pytest.mark.parametrize("value", [0.0, 1.0])
def test_thresholds_may_be_0_or_1(name, value):
    kw = {name: value}
    if name == "min_take_at":
        kw["max_take_at"] = 1.0
    assert getattr(Earned(**kw), name) == value


# -- a record whose `correct` disagrees with its labels is refused ------------------------


@pytest.mark.parametrize(
    ("teacher", "correct"), [("yes", False), ("no", True)], ids=["agree-false", "disagree-true"]
)
def test_evidence_whose_correct_contradicts_its_labels_does_not_validate(teacher, correct):
    raw = evidence(teacher_label=teacher).to_json()
    raw["correct"] = correct
    with pytest.raises(ValidationError, match="correct must say whether"):
        Evidence.model_validate(raw)
    raw["correct"] = not correct
    assert Evidence.model_validate(raw).correct is (teacher == "yes")


def test_new_evidence_computes_correct_whatever_it_is_given():
    assert evidence(teacher_label="no", correct=True).correct is False
    assert evidence(teacher_label="yes", correct=False).correct is True


@pytest.mark.parametrize("correct", [True, False])
def test_a_jsonl_store_refuses_a_line_whose_correct_contradicts_its_labels(tmp_path, correct):
    path = tmp_path / "evidence.jsonl"
    good = evidence(teacher_label="yes")
    bad = evidence(teacher_label="yes" if not correct else "no").to_json()
    bad["correct"] = correct
    path.write_text(json.dumps(good.to_json()) + "\n" + json.dumps(bad) + "\n")
    store = JsonlEvidenceStore(path)
    with pytest.raises(InvalidFileError, match=r"line 2 is not an agentbranch evidence record"):
        store.load(good.key)


def test_a_langgraph_store_refuses_an_item_whose_correct_contradicts_its_labels():
    from langgraph.store.memory import InMemoryStore

    inner = InMemoryStore()
    store = LangGraphEvidenceStore(inner)
    rec = evidence(teacher_label="no")
    raw = rec.to_json()
    raw["correct"] = True
    inner.put(("agentbranch", "earned", rec.key), rec.id, raw)
    with pytest.raises(InvalidFileError, match="not an agentbranch evidence record"):
        store.load(rec.key)


# -- the LangGraph store holds one question per namespace ---------------------------------


def _langgraph_store():
    from langgraph.store.memory import InMemoryStore

    inner = InMemoryStore()
    return inner, LangGraphEvidenceStore(inner)


def test_a_langgraph_record_of_another_key_under_the_same_id_is_refused():
    inner, store = _langgraph_store()
    mine, theirs = "a" * 32, "b" * 32
    rec = evidence(key=theirs)
    inner.put(("agentbranch", "earned", mine), rec.id, rec.to_json())  # key differs, id same
    with pytest.raises(InvalidFileError, match="written by something else"):
        store.load(mine)


def test_a_langgraph_record_of_the_same_key_under_another_id_is_refused():
    inner, store = _langgraph_store()
    rec = evidence(key="a" * 32)
    inner.put(("agentbranch", "earned", rec.key), "not-" + rec.id, rec.to_json())
    with pytest.raises(InvalidFileError, match="written by something else"):
        store.load(rec.key)


def test_a_langgraph_store_gives_back_exactly_what_was_appended_per_key():
    _, store = _langgraph_store()
    a = [evidence(key="a" * 32, time=f"2026-01-01T00:00:0{i}+00:00") for i in range(3)]
    b = [evidence(key="b" * 32, teacher_label="no")]
    store.append([a[2], b[0], a[0], a[1]])
    assert store.load("a" * 32) == a
    assert store.load("b" * 32) == b
    assert store.keys() == ["a" * 32, "b" * 32]
    assert store.load("c" * 32) == []


def test_earned_on_a_store_holding_a_foreign_record_fails_instead_of_counting_it():
    from langgraph.store.memory import InMemoryStore

    inner = InMemoryStore()
    earned = Earned(precision=0.8, min_evidence=20, store=inner, refresh_s=0)
    other = evidence(key="b" * 32)
    inner.put(("agentbranch", "earned", earned.key(KEY)), other.id, other.to_json())
    with pytest.raises(InvalidFileError, match="written by something else"):
        threshold(earned)


# -- evidence records: the key and the time ----------------------------------------------


def test_the_evidence_key_is_stable_across_releases():
    """A store keeps its evidence under these keys: a release that computed them
    differently would silently start every question learning again."""
    from agentbranch.policy.earned._evidence import evidence_key

    assert evidence_key(*WHO) == "7be6c475e6c26df284798a0d202098cb"
    spec = {"options": ["billing", "outage"], "instructions": "Which team? é"}
    assert evidence_key("route", spec, None, None) == "d05f847257cf7444dbc22797be4ef5b5"
    # the same question written in another order of its fields is the same question
    reordered = {"instructions": "Which team? é", "options": ["billing", "outage"]}
    assert evidence_key("route", reordered, None, None) == evidence_key("route", spec, None, None)


@pytest.mark.parametrize(
    "change",
    [
        ("other", URGENT, "scripted", "scripted-model"),
        ("urgent", ab.yes_no("Is the ticket urgent now?"), "scripted", "scripted-model"),
        ("urgent", URGENT, "embedded", "scripted-model"),
        ("urgent", URGENT, "scripted", "other-model"),
    ],
    ids=["id", "question", "reader", "model"],
)
def test_the_evidence_key_changes_with_id_question_reader_and_model(change):
    from agentbranch.policy.earned._evidence import evidence_key

    assert evidence_key(*change) != evidence_key(*WHO)


def test_new_evidence_is_stamped_in_utc_to_the_millisecond():
    from datetime import datetime, timedelta

    stamp = datetime.fromisoformat(evidence().time)
    assert stamp.utcoffset() == timedelta(0)
    assert evidence().time.endswith("+00:00") and len(evidence().time.split(".")[1]) == 9


# -- looks resume below the threshold in force; withdrawal starts a new epoch -------------


def test_a_look_after_the_opening_resumes_below_the_threshold_in_force():
    """Hierarchical looks: once 0.97 is shown, the next look tests only the bands below
    it (here all worse) and says nothing new was shown there; it never re-tests the
    bands above (which would show 0.97 "only" again)."""
    earned = Earned(precision=0.9, min_evidence=50, refresh_s=0)
    for _ in range(50):
        label(earned, 0.97, True)
    for i in range(50):
        label(earned, 0.90 + (i % 7) / 100, i % 2 == 0)
    st = earned.state(KEY)
    assert [(e.kind, e.take_at) for e in st.events] == [("earned", 0.97), ("look", 0.97)]
    assert st.events[1].reason == "look 2 at 100 labels (alpha 0.0125): nothing shown below 0.97"


def _withdrawn() -> tuple[Earned, int]:
    earned = _opened()  # opened at 0.97 on 20 labels, precision 0.8
    for _ in range(3):
        assert label(earned, 0.98, True, rate=0.5)
    n = 3
    while threshold(earned).trust == "earned":
        assert label(earned, 0.98, False, rate=0.5)
        n += 1
    return earned, n


def test_a_withdrawal_says_why_and_starts_a_new_epoch():
    earned, audited = _withdrawn()
    st = earned.state(KEY)
    records = earned.evidence.load(earned.key(KEY))
    (ev,) = [e for e in st.events if e.kind == "withdrawn"]
    assert (ev.index, ev.time, ev.take_at, ev.labels) == (
        len(records) - 1,
        records[-1].time,
        None,
        0,
    )
    assert ev.reason.startswith(
        f"3 of {audited} audited takes agreed with the teacher since the band opened "
        "(take_at=0.97): the drift test shows precision below 0.8 at level 0.95 (e-value "
    )
    assert ev.reason.endswith(" >= 20); nothing is taken until trust is earned again")
    evalue = float(ev.reason.split("(e-value ")[1].split(" >=")[0])
    assert evalue >= 20
    # a new epoch: nothing carried over from the old one
    assert (st.take_at, st.trust) == (None, "withdrawn")  # the state's own fields too
    assert (st.labels, st.looks, st.audit_right, st.audit_wrong) == (0, 0, 0, 0)
    assert st.drift_evalue == 1.0


def test_after_a_withdrawal_trust_is_earned_again_from_fresh_labels_only():
    earned, _ = _withdrawn()
    for _ in range(19):
        assert not label(earned, 0.97, True)
    assert threshold(earned) == Threshold(None, "withdrawn")  # 19 labels: no look yet
    label(earned, 0.97, True)
    st = earned.state(KEY)
    assert st.threshold == Threshold(0.97, "earned")
    assert (st.events[-1].kind, st.events[-1].labels) == ("earned", 20)
    assert st.drift_evalue == 1.0 and (st.audit_right, st.audit_wrong) == (0, 0)
    assert replayed(earned).threshold == st.threshold


def test_the_second_walk_joins_from_the_third_look_and_says_so():
    """A question right ~94 % of the time whatever its confidence (0.85-0.95): from the
    third look on, a look that has shown nothing walks from the top and from the
    predicted entry at half its error each, and its event says so."""
    earned = Earned(precision=0.9, min_evidence=100, refresh_s=0)
    for i in range(400):
        label(earned, round(0.85 + (i * 37 % 100) / 1000, 4), i % 17 != 5)
    reasons = [e.reason for e in earned.state(KEY).events]
    assert reasons == [
        "look 1 at 100 labels (alpha 0.025): nothing shown",
        "look 2 at 200 labels (alpha 0.0125): nothing shown",
        "look 3 at 400 labels (alpha 0.00625), walks from the top and from 0.91 at 0.00313 "
        "each: nothing shown",
    ]


def test_a_reopened_band_has_a_fresh_drift_test():
    earned, _ = _withdrawn()
    for _ in range(20):
        label(earned, 0.97, True)
    assert threshold(earned) == Threshold(0.97, "earned")
    assert label(earned, 0.98, True, rate=0.5)
    st = earned.state(KEY)
    assert (st.audit_right, st.audit_wrong) == (1, 0) and st.drift_evalue < 1.0


def test_stored_states_name_their_question():
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    label(earned, 0.97, True)
    (st,) = earned.stored().values()
    assert (st.question_id, st.records) == ("urgent", 1)
    assert earned.state(KEY).question_id == "urgent"


# -- human review labels are a stratum of their own, even inside a tested band ------------


def _reviews_among_audits(wrong_reviews: int) -> Earned:
    """Opened at 0.97 on 50 sure labels; then 20 audits of the take band at 5 % (all
    right: they stand for 400 takes), 10 human reviews at 0.98 (the review band can
    lie above an earned threshold: review comes first) of which ``wrong_reviews``
    disagree, and 20 fallback labels at 0.93 (4 wrong). The look at 100 labels tests
    the band down to 0.93, where the reviews sit among the audits."""
    earned = _opened_at_097()
    for i in range(50):
        if i % 5 < 2:
            assert label(earned, 0.98, True, rate=0.05)
        elif i % 5 == 2:
            assert not label(earned, 0.98, i // 5 >= wrong_reviews, review=True)
        else:
            assert not label(earned, 0.93, i % 5 != 3 or i >= 20)
    return earned


@pytest.mark.parametrize(("wrong_reviews", "lowered"), [(0, True), (5, True), (10, False)])
def test_human_review_labels_inside_a_tested_band_stand_for_themselves(wrong_reviews, lowered):
    """Review labels are weighed as a stratum of their own (each stands for one
    decision), not pooled with the audits beside them: 5 wrong reviews of 10 among
    audits that stand for 400 right takes still let the look lower to 0.93 (pooled
    unweighted with the 20 audits, 5 errors in 30 labels would sink the band's
    estimate below 0.9 and show nothing); all 10 wrong is too many either way."""
    earned = _reviews_among_audits(wrong_reviews)
    _look_lowered_or_not(earned, lowered)


# -- the incremental statistics (policy/cells.py) agree with the per-label ones ----------

_GRID = [round(1 - 0.02 * k, 10) for k in range(26)]  # 1.0 down to 0.5


def _cells_of(conf, weights=None, in_force=None, review=None):
    from agentbranch.policy.earned._statistics import Cells

    n = len(conf)
    cells = Cells(sorted(_GRID))
    for i, c in enumerate(conf):
        cells.add(
            float(c),
            True,
            1.0 if weights is None else float(weights[i]),
            None if in_force is None else in_force[i],
            False if review is None else bool(review[i]),
        )
    assert sum(cells.n) == n
    return cells


def test_predicted_entry_is_none_when_the_first_band_that_can_reject_is_the_best():
    """Every label at 0.99: the only band is the top one, where the walk from the top
    starts anyway, so there is no entry to predict (the candidate 1.0 above it holds no
    label and can never reject, so it is not "the first band")."""
    from _reference_statistics import predicted_entry

    from agentbranch.policy.earned._statistics import predicted_entry_cells

    conf = [0.99] * 300
    kw = dict(precision=0.8, alpha=0.05, candidates=_GRID)
    assert predicted_entry(conf, **kw) is None
    assert predicted_entry_cells(_cells_of(conf).view(), **kw) is None


def test_predicted_entry_is_the_band_with_the_smallest_p_value():
    """Confidences spread evenly over 0.5-1.0, standing in for correctness: a band
    ``>= t`` is predicted right (1+t)/2 of the time. The top bands are small, the low
    ones too close to the target: the best evidence lies between, strictly below the
    first band big enough to reject; the cells give the same candidate."""
    import numpy as np
    from _reference_statistics import predicted_entry, pvalue_below, stratified

    from agentbranch.policy.earned._statistics import predicted_entry_cells

    conf = np.linspace(0.5, 0.9999, 1000)
    kw = dict(precision=0.8, alpha=0.05, candidates=_GRID)
    entry = predicted_entry(conf, **kw)
    assert entry is not None and 0.6 < entry < 0.95
    assert predicted_entry_cells(_cells_of(conf).view(), **kw) == entry
    ones, nan, flags = np.ones(len(conf)), np.full(len(conf), np.nan), np.zeros(len(conf), int)
    p = {}
    for t in _GRID:
        n, right = stratified(conf, conf, ones, nan, flags, t)
        p[t] = pvalue_below(right, n, 0.8)
    assert p[entry] == min(p.values()) < p[0.98]


@pytest.mark.parametrize("seed", range(12))
def test_predicted_entry_from_cells_equals_the_per_label_one(seed):
    """Weighted, stratified labels (thresholds in force, review flags): the cells
    predict the entry the per-label function predicts."""
    import numpy as np
    from _reference_statistics import predicted_entry

    from agentbranch.policy.earned._statistics import predicted_entry_cells

    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 600))
    conf = 0.5 + 0.5 * rng.random(n) ** 0.5
    w = rng.choice([1.0, 5.0, 10.0], n)
    tau = [None if u < 0.5 else float(rng.choice(_GRID[:10])) for u in rng.random(n)]
    rev = rng.random(n) < 0.1
    cells = _cells_of(conf, w, tau, rev)
    for precision, alpha in ((0.8, 0.05), (0.7, 0.2), (0.9, 0.01)):
        kw = dict(precision=precision, alpha=alpha, candidates=_GRID)
        expected = predicted_entry(conf, weights=w, in_force=tau, review=rev, **kw)
        assert predicted_entry_cells(cells.view(), **kw) == expected


def test_a_single_wrong_audit_can_withdraw_a_very_precise_band():
    """At precision 0.999 one wrong audited take is already 100 times likelier under a
    drop than under the target: the first one withdraws (no second error needed)."""
    from _reference_statistics import Drift, drifted

    from agentbranch.policy.earned._statistics import DriftState

    running, restarting = DriftState(0.999), Drift(0.999)
    assert running.add(False) == pytest.approx(restarting.add(False))
    assert running.evalue >= 20 and running.drifted(0.05) and restarting.drifted(0.05)
    assert drifted(0, 1, 0.999, 0.05)


@pytest.mark.parametrize("precision", [0.2, 0.1, 0.05])
def test_a_drop_that_reaches_zero_precision_is_no_alternative(precision):
    """A drop as large as the target itself (precision 0.2 and the 0.2 drop) would test
    against precision 0, which no wrong audit can make likelier than right ones: it is
    not an alternative. The running e-value equals the restarting one."""
    from _reference_statistics import Drift

    from agentbranch.policy.earned._statistics import DriftState

    running, restarting = DriftState(precision), Drift(precision)
    for i in range(40):
        ok = i % 3 != 0
        assert running.add(ok) == pytest.approx(restarting.add(ok), rel=1e-9)


def test_below_every_drop_the_drift_test_has_no_alternative_and_never_withdraws():
    """A target of 0.04 is below the smallest drop (0.05): no alternative, the e-value
    stays 1 however many audits disagree."""
    from _reference_statistics import Drift

    from agentbranch.policy.earned._statistics import DriftState

    running, restarting = DriftState(0.04), Drift(0.04)
    for _ in range(30):
        assert running.add(False) == 1.0 == restarting.add(False)
    assert not running.drifted(0.05) and not restarting.drifted(0.05)


def test_the_drift_test_withdraws_at_exactly_one_over_alpha():
    """Withdrawal is at ``e-value >= 1/alpha``: an e-value exactly at the bound
    withdraws."""
    from _reference_statistics import Drift

    from agentbranch.policy.earned._statistics import DriftState

    running, restarting = DriftState(0.999), Drift(0.999)
    e = running.add(False)
    restarting.add(False)
    alpha = 1.0 / e
    while 1.0 / alpha != e:  # the float whose reciprocal is the e-value exactly
        alpha = math.nextafter(alpha, 0.0 if 1.0 / alpha < e else 1.0)
    assert running.drifted(alpha)
    assert not running.drifted(alpha * (1 - 1e-9))  # a bound just above it: not yet


def test_a_band_of_exactly_the_fewest_labels_that_can_reject_is_the_first_band():
    """``min_band(0.8, 0.05)`` is 14: a top band of exactly 14 labels can reject (were
    they all right), so it is where the walk from the top starts, and the better band
    below it (200 labels at 0.95) is a predicted entry of its own."""
    from _reference_statistics import min_band, predicted_entry

    from agentbranch.policy.earned._statistics import predicted_entry_cells

    assert min_band(0.8, 0.05) == 14
    conf = [0.99] * 14 + [0.94] * 200 + [0.6] * 100  # 0.94 on the grid: in its band
    kw = dict(precision=0.8, alpha=0.05, candidates=_GRID)
    assert predicted_entry(conf, **kw) == 0.94
    assert predicted_entry_cells(_cells_of(conf).view(), **kw) == 0.94


def test_no_entry_is_predicted_when_the_top_band_is_the_strongest():
    """300 labels at 0.99 over 100 at 0.6: the top band is both the first that can
    reject and the strongest (the band down to 0.6 is predicted right only 89 % of the
    time), so the walk from the top already starts at the best place: no entry."""
    from _reference_statistics import predicted_entry

    from agentbranch.policy.earned._statistics import predicted_entry_cells

    conf = [0.99] * 300 + [0.6] * 100
    kw = dict(precision=0.8, alpha=0.05, candidates=_GRID)
    assert predicted_entry(conf, **kw) is None
    assert predicted_entry_cells(_cells_of(conf).view(), **kw) is None


def test_of_equally_strong_bands_the_predicted_entry_is_the_higher():
    """5,000 labels at 0.99 and 5,000 at 0.97: both bands' p-values underflow to 0, a
    tie; the higher band (the first, where the walk from the top starts) is kept, so
    no entry is predicted."""
    from _reference_statistics import predicted_entry, pvalue_below

    from agentbranch.policy.earned._statistics import predicted_entry_cells

    assert pvalue_below(0.99 * 5000, 5000, 0.8) == pvalue_below(0.98 * 10000, 10000, 0.8) == 0
    conf = [0.99] * 5000 + [0.97] * 5000
    kw = dict(precision=0.8, alpha=0.05, candidates=_GRID)
    assert predicted_entry(conf, **kw) is None
    assert predicted_entry_cells(_cells_of(conf).view(), **kw) is None


def test_a_band_whose_p_value_is_exactly_alpha_is_shown():
    """The test rejects at ``p <= alpha``: a band of 25 labels at 0.99 with one wrong,
    tested at exactly its own p-value, is shown (per label and from the cells)."""
    from _reference_statistics import learn_then_test, pvalue_below

    from agentbranch.policy.earned._statistics import Cells, learn_then_test_cells

    alpha = pvalue_below(24, 25, 0.8)
    conf, ok = [0.99] * 25, [True] * 24 + [False]
    cells = Cells(sorted(_GRID))
    for c, o in zip(conf, ok):
        cells.add(c, o, 1.0, None, False)
    kw = dict(precision=0.8, alpha=alpha, candidates=_GRID)
    assert learn_then_test(conf, ok, **kw) == 0.98  # the one band (lower ones add nothing)
    assert learn_then_test_cells(cells.view(), **kw) == 0.98
    kw["alpha"] = math.nextafter(alpha, 0.0)
    assert learn_then_test(conf, ok, **kw) is None
    assert learn_then_test_cells(cells.view(), **kw) is None


@pytest.mark.parametrize(("bad", "shown"), [(0.0, 0.98), (-1.0, 0.98), (math.inf, 0.98),
                                            (math.nan, 0.98), (1.0, 0.94)])  # fmt: skip
def test_a_band_holding_one_label_of_a_bad_weight_shows_nothing(bad, shown):
    """A weight that is not finite and positive (a labelling rate that cannot be
    right) fails closed, even for a single label in a band of good ones."""
    from _reference_statistics import learn_then_test

    from agentbranch.policy.earned._statistics import Cells, learn_then_test_cells

    conf, ok = [0.99] * 60 + [0.95], [True] * 61
    w = [1.0] * 60 + [bad]
    cells = Cells(sorted(_GRID))
    for c, o, ww in zip(conf, ok, w):
        cells.add(c, o, ww, None, False)
    kw = dict(precision=0.8, alpha=0.05, candidates=_GRID)
    assert learn_then_test(conf, ok, weights=w, **kw) == shown  # a bad one stops the walk
    assert learn_then_test_cells(cells.view(), **kw) == shown


def _both_walks(conf, ok, **kw):
    """``learn_then_test`` per label and from the cells (all weights 1, nothing in
    force, no review), which must agree."""
    from _reference_statistics import learn_then_test

    from agentbranch.policy.earned._statistics import Cells, learn_then_test_cells

    cells = Cells(sorted(_GRID))
    for c, o in zip(conf, ok):
        cells.add(c, o, 1.0, None, False)
    per_label = learn_then_test(conf, ok, candidates=_GRID, **kw)
    assert learn_then_test_cells(cells.view(), candidates=_GRID, **kw) == per_label
    return per_label


def test_a_resumed_walk_shows_nothing_below_a_band_that_holds_no_new_label():
    """100 right labels exactly at 0.98 show 0.98; resumed from there, the bands below
    hold the same labels: nothing new, so nothing lower is shown."""
    conf, ok = [0.98] * 100, [True] * 100
    assert _both_walks(conf, ok, precision=0.8, alpha=0.05) == 0.98
    assert _both_walks(conf, ok, precision=0.8, alpha=0.05, shown=0.98) is None


def test_a_band_of_exactly_min_band_labels_is_tested():
    """14 right labels (``min_band(0.8, 0.05)``): 0.8**14 = 0.044 <= 0.05, shown."""
    assert _both_walks([0.99] * 14, [True] * 14, precision=0.8, alpha=0.05) == 0.98
    assert _both_walks([0.99] * 13, [True] * 13, precision=0.8, alpha=0.05) is None


def test_a_walk_from_the_predicted_entry_tests_the_entry_itself():
    """Entry 0.94: the band from 0.94 (200 right labels) is shown, the next one with
    new labels (0.90, 250 of 300 right) is not; the walk gives 0.94, not a candidate
    below it holding the same labels."""
    conf = [0.99] * 100 + [0.95] * 100 + [0.90] * 100
    ok = [True] * 200 + [i % 2 == 0 for i in range(100)]
    assert _both_walks(conf, ok, precision=0.8, alpha=0.05, entry=0.94) == 0.94


def test_the_per_label_drift_test_withdraws_on_evidence_only():
    """``thresholds.drifted``: no disagreement never withdraws; one wrong audit in 101
    at a 0.9 target does not; at 0.999 one wrong audit withdraws, at exactly
    ``e-value = 1/alpha``."""
    from _reference_statistics import drift_evalue, drifted

    assert not drifted(100, 0, 0.9, 0.05)
    assert not drifted(100, 1, 0.9, 0.05)
    assert drifted(0, 3, 0.9, 0.05)
    e = drift_evalue(0, 1, 0.999)
    alpha = 1.0 / e
    while 1.0 / alpha != e:
        alpha = math.nextafter(alpha, 0.0 if 1.0 / alpha < e else 1.0)
    assert drifted(0, 1, 0.999, alpha)
    assert not drifted(0, 1, 0.999, alpha * (1 - 1e-9))


def test_review_labels_are_their_own_stratum_per_label_and_in_cells():
    """The labels of ``test_human_review_labels_inside_a_tested_band_stand_for_themselves``
    given to the statistics directly: review flags kept, the look at 100 labels
    (alpha 0.0125) resumed below 0.97 shows 0.93; pooled (no review flags), nothing."""
    from _reference_statistics import learn_then_test

    from agentbranch.policy.earned._statistics import Cells, learn_then_test_cells

    rows = [(0.97, True, 1.0, None, False)] * 50
    for i in range(50):
        if i % 5 < 2:
            rows.append((0.98, True, 20.0, 0.97, False))
        elif i % 5 == 2:
            rows.append((0.98, i // 5 >= 5, 1.0, 0.97, True))
        else:
            rows.append((0.93, i % 5 != 3 or i >= 20, 1.0, 0.97, False))
    conf, ok, w, tau, rev = (list(x) for x in zip(*rows))
    grid = [round(1 - 0.01 * k, 10) for k in range(51)]  # Earned's: 0.97 and 0.93 on it
    kw = dict(precision=0.9, alpha=0.0125, candidates=grid, shown=0.97)
    assert learn_then_test(conf, ok, weights=w, in_force=tau, review=rev, **kw) == 0.93
    assert learn_then_test(conf, ok, weights=w, in_force=tau, **kw) is None
    cells = Cells(sorted(grid))
    for row in rows:
        cells.add(*row)
    assert learn_then_test_cells(cells.view(), **kw) == 0.93


@pytest.mark.parametrize("below", [False, True])
def test_a_label_at_the_threshold_in_force_is_in_the_band_it_opened(below):
    """50 audits (rate 5 %) exactly at 0.97 while 0.97 was in force: they were taken,
    so they belong to the band ``>= 0.97``, which they show; with 30 fallback labels
    at 0.95 under it (27 right) the band down to 0.95 is two strata, both labelled, and
    is shown too. A threshold in force equal to the candidate tested cuts nothing."""
    from _reference_statistics import learn_then_test

    from agentbranch.policy.earned._statistics import Cells, learn_then_test_cells

    rows = [(0.97, True, 20.0, 0.97, False)] * 50
    if below:
        rows += [(0.95, i % 10 != 0, 1.0, 0.97, False) for i in range(30)]
    conf, ok, w, tau, rev = (list(x) for x in zip(*rows))
    grid = [round(1 - 0.01 * k, 10) for k in range(51)]
    kw = dict(precision=0.9, alpha=0.05, candidates=grid)
    expected = 0.95 if below else 0.97
    assert learn_then_test(conf, ok, weights=w, in_force=tau, review=rev, **kw) == expected
    cells = Cells(sorted(grid))
    for row in rows:
        cells.add(*row)
    assert learn_then_test_cells(cells.view(), **kw) == expected


def test_the_predicted_entry_weighs_audits_by_one_over_rate():
    """100 audits at 0.99 (rate 5 %: 2,000 takes) over 100 fallback labels at 0.93 and
    100 review labels at 0.90, all while 0.97 was in force. Weighted, the band down to
    0.93 is mostly the sure top and is the predicted entry at precision 0.9; counted
    one label each it is not (no entry)."""
    from _reference_statistics import predicted_entry

    from agentbranch.policy.earned._statistics import Cells, predicted_entry_cells

    grid = [round(1 - 0.01 * k, 10) for k in range(51)]
    conf = [0.99] * 100 + [0.93] * 100 + [0.90] * 100
    w = [20.0] * 100 + [1.0] * 200
    tau = [0.97] * 300
    rev = [False] * 200 + [True] * 100
    kw = dict(precision=0.9, alpha=0.05, candidates=grid)
    assert predicted_entry(conf, weights=w, in_force=tau, review=rev, **kw) == 0.93
    assert predicted_entry(conf, in_force=tau, review=rev, **kw) is None
    cells = Cells(sorted(grid))
    for row in zip(conf, [True] * 300, w, tau, rev):
        cells.add(*row)
    assert predicted_entry_cells(cells.view(), **kw) == 0.93


def test_a_threshold_in_force_off_this_grid_becomes_a_cell_boundary():
    """A record labelled while another configuration had 0.955 in force (not on this
    Earned's 0.01 grid): the question's cells are rebuilt with 0.955 as a boundary, and
    the state equals a full replay of the records."""
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    for i in range(30):
        earned.observe(QuestionKey("urgent", URGENT, "scripted", "scripted-model"), "yes", source="fallback", band="fallback", confidence=0.96 + (i % 3) / 100, options=["yes", "no"], engine_label="yes", rate=1.0, take_at=0.955 if i >= 25 else None, trust="earned")  # fmt: skip
    st = earned.state(KEY)
    assert 0.955 in st._cells.boundaries and 0.955 not in earned.candidates
    assert replayed(earned).threshold == st.threshold and st.labels == 30


def test_a_stratum_of_a_single_label_counts_in_the_band():
    """60 right labels and one wrong human review at 0.99: the review is a stratum of
    one label, and it counts: 60 of 61 right does not show precision 0.95 at 0.05
    (0.95**60 = 0.046 would, were the review left out)."""
    from _reference_statistics import learn_then_test

    from agentbranch.policy.earned._statistics import Cells, learn_then_test_cells

    conf, ok, rev = [0.99] * 61, [True] * 60 + [False], [False] * 60 + [True]
    kw = dict(precision=0.95, alpha=0.05, candidates=_GRID)
    assert learn_then_test(conf, ok, review=rev, **kw) is None
    assert learn_then_test(conf[:60], ok[:60], **kw) == 0.98  # without it: shown
    cells = Cells(sorted(_GRID))
    for c, o, r in zip(conf, ok, rev):
        cells.add(c, o, 1.0, None, r)
    assert learn_then_test_cells(cells.view(), **kw) is None
