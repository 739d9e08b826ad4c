"""Earned thresholds: the look schedule, the walk that resumes below the threshold in
force."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from _reference_statistics import (
    grid,
    learn_then_test,
    look_alpha,
    look_at,
    predicted_entry,
)
from hypothesis import given
from hypothesis import strategies as hs

from agentbranch.policy.earned import Earned, replay
from agentbranch.policy.earned._evidence import new_evidence
from agentbranch.policy.earned._state import step
from agentbranch.policy.earned._statistics import Looks

_T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("looks", [Looks(50), Looks(50, (0.625, 0.3125))])
def test_the_looks_of_a_schedule_spend_at_most_alpha(looks):
    assert sum(looks.alpha(0.05, k) for k in range(5000)) <= 0.05
    at = [looks.at(k) for k in range(40)]
    assert at[0] == looks.first and all(b > a for a, b in zip(at, at[1:]))


def test_doubling_is_the_first_releases_schedule():
    looks = Looks(50)
    for k in range(12):
        assert looks.at(k) == look_at(50, k)
        assert looks.alpha(0.05, k) == look_alpha(0.05, k)


def test_a_head_spends_its_fractions_first_then_halves_of_the_rest():
    looks = Looks(50, (0.625,))
    assert looks.alpha(0.04, 0) == pytest.approx(0.025)
    assert [looks.alpha(0.04, k) for k in (1, 2, 3)] == pytest.approx([0.0075, 0.00375, 0.001875])
    assert sum(looks.alpha(0.04, k) for k in range(200)) == pytest.approx(0.04)
    assert [looks.at(k) for k in range(4)] == [50, 100, 200, 400]


@given(hs.lists(hs.floats(0.001, 0.9), min_size=1, max_size=4), hs.floats(1e-4, 0.5))
def test_any_head_spends_at_most_alpha_and_every_look_something(head, alpha):
    if not sum(head) < 1.0:
        with pytest.raises(ValueError):
            Looks(50, tuple(head))
        return
    looks = Looks(50, tuple(head))
    spent = [looks.alpha(alpha, k) for k in range(400)]
    assert all(a > 0 for a in spent[:60]) and sum(spent) <= alpha * (1 + 1e-12)


def test_the_written_question_learning_spends_at_its_first_look_what_it_would_alone():
    from agentbranch.policy.earned.learn import ladder as ld

    alone = Earned(precision=0.9, level=0.95)
    written = ld.version_earned(alone, 0)
    assert 1 - written.level == pytest.approx(0.05 * ld.BASE_SHARE)
    first = written.looks.alpha(1 - written.level, 0)
    assert first == pytest.approx(alone.looks.alpha(0.05, 0))  # the same first look
    assert written.looks.alpha(1 - written.level, 1) < alone.looks.alpha(0.05, 1)
    total = sum(written.looks.alpha(1 - written.level, k) for k in range(200))
    assert total == pytest.approx(0.05 * ld.BASE_SHARE) and total <= 0.05 * ld.BASE_SHARE + 1e-15
    assert ld.version_earned(alone, 1).looks == alone.looks  # (versions: the policy's own)


@pytest.mark.parametrize(
    "bad",
    [
        dict(first=0),
        dict(first=5, head=(0.6, 0.4)),  # nothing left for the later looks
        dict(first=5, head=(0.0,)),
    ],
)
def test_a_bad_schedule_is_refused(bad):
    with pytest.raises(ValueError):
        Looks(**bad)


def _after_an_opening():
    """Opened at 0.95 on 100 complete labels; since then 0.95 was in force: 20 audits of
    the take band (rate 0.05, 17 right: a bad run) and 300 fallback labels at 0.90-0.95,
    290 right (every 30th wrong)."""
    conf = [0.97] * 100 + [0.97] * 20 + list(np.linspace(0.90, 0.9499, 300))
    ok = [True] * 98 + [False] * 2 + [True] * 17 + [False] * 3 + [i % 30 != 7 for i in range(300)]
    w = [1.0] * 100 + [20.0] * 20 + [1.0] * 300
    in_force = [None] * 100 + [0.95] * 320
    return np.array(conf), np.array(ok, dtype=float), np.array(w), in_force


def test_a_look_resumes_below_the_threshold_it_earned():
    conf, ok, w, in_force = _after_an_opening()
    kw = dict(weights=w, in_force=in_force, precision=0.9, alpha=0.01, candidates=grid(1, 0, 0.01))
    # From the top, the walk tests the band at 0.97 first: its labels (115 of 120 right
    # with the audits weighted in) cannot show 0.9 at 0.01, and the walk ends there.
    assert learn_then_test(conf, ok, **kw) is None
    # Resumed below 0.95 (already shown), the bands at 0.90-0.94 are tested and shown.
    assert learn_then_test(conf, ok, shown=0.95, **kw) == 0.9
    # Nothing at or above `shown` is ever returned, and a band adding no label shows nothing.
    assert learn_then_test(conf[:120], ok[:120], shown=0.95, **kw | {"weights": w[:120],
                           "in_force": in_force[:120]}) is None  # fmt: skip


def _record(i, conf, ok, *, take, take_at):
    return new_evidence(
        key="k", question_id="q", reader="r", model="m",
        source="audit" if take else "fallback", band="take" if take else "fallback",
        confidence=conf, options=["yes", "no"], engine_label="yes",
        teacher_label="yes" if ok else "no", rate=0.05 if take else 1.0,
        take_at=take_at, trust="earned" if take_at is not None else "learning",
        time=(_T0 + timedelta(milliseconds=i)).isoformat(timespec="milliseconds"),
    )  # fmt: skip


def test_an_earned_threshold_is_lowered_by_a_later_look():
    """The state machine end to end: 50 sure labels open the band; the labels that come
    after below it, 98 % right, lower it at the next looks."""
    earned = Earned(precision=0.9, level=0.95, min_evidence=50)
    rng = np.random.default_rng(0)
    records = [_record(i, 0.99, True, take=False, take_at=None) for i in range(50)]
    st = replay(records, earned)
    assert st.trust == "earned" and st.take_at == 0.99
    for i in range(50, 400):
        c = float(rng.uniform(0.8, 0.99))
        if c >= st.take_at:
            continue  # taken, and not audited here: no label
        rec = _record(i, c, i % 50 != 7, take=False, take_at=st.take_at)
        records.append(rec)
        step(st, rec, earned)
    assert st.take_at < 0.9
    assert replay(records, earned).take_at == st.take_at
    kinds = [e.kind for e in st.events]
    assert kinds[0] == "earned" and "lowered" in kinds and "withdrawn" not in kinds


# -- the second walk, from the predicted entry ------------------------------------------


def _weak_separation(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` complete labels of a question right ~94 % of the time whatever its
    confidence (0.85-0.95): every band is a little above 0.9, none much more."""
    rng = np.random.default_rng(seed)
    conf = np.round(rng.uniform(0.85, 0.95, n), 4)
    return conf, (rng.random(n) < 0.94).astype(float)


KW = dict(precision=0.9, candidates=grid(1, 0, 0.01))


def test_the_predicted_entry_depends_on_the_confidences_only():
    conf, ok = _weak_separation(2000, 1)
    entry = predicted_entry(conf, alpha=0.005, **KW)
    # A wide band, not the smallest one that could reject (where the walk from the top
    # starts: 0.94 here, its 10 % of the labels).
    assert entry is not None and 0.88 <= entry <= 0.93
    # It never sees a label: it takes none (the signature has no labels at all).
    assert "correct" not in predicted_entry.__code__.co_varnames
    # Too few labels for any band to reject at this error: no entry.
    assert predicted_entry(conf[:40], alpha=0.005, **KW) is None


def test_a_walk_from_the_predicted_entry_shows_what_the_walk_from_the_top_cannot():
    conf, ok = _weak_separation(2000, 1)
    # From the top the walk starts at the smallest band that could reject (0.94: about
    # 200 labels, ~94 % right: not enough at this error) and stops there.
    assert learn_then_test(conf, ok, alpha=0.005, **KW) is None
    entry = predicted_entry(conf, alpha=0.005, **KW)
    shown = learn_then_test(conf, ok, alpha=0.005, entry=entry, **KW)
    assert shown is not None and shown <= entry
    # The entry only decides where the walk starts: what it shows is still tested.
    assert learn_then_test(conf, ok * 0, alpha=0.005, entry=entry, **KW) is None
    assert learn_then_test(conf, ok * (conf < 0.9), alpha=0.005, entry=entry, **KW) is None


def test_the_second_walk_starts_at_the_third_look_with_half_the_error_each():
    """Replayed records: the look events say which walks ran, at what error, and on this
    question only the second walk opens the band."""
    conf, ok = _weak_separation(3200, 2)
    records = [
        _record(i, float(c), bool(o), take=False, take_at=None)
        for i, (c, o) in enumerate(zip(conf, ok))
    ]
    st = replay(records, Earned(precision=0.9, level=0.95, min_evidence=50))
    reasons = [e.reason for e in st.events]
    assert "walks from" not in reasons[0] and "walks from" not in reasons[1]
    assert "walks from the top and from" in reasons[2] and "at 0.00313 each" in reasons[2]
    before = Earned(precision=0.9, level=0.95, min_evidence=50)
    before.second_walk_from = None
    old = replay(records, before)
    assert all("walks from" not in e.reason for e in old.events)
    assert old.trust == "learning" and st.trust == "earned"
