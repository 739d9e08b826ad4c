"""Earned trust at scale (issue 42): the compact state gives exactly the thresholds a full
replay gives, late labels cost a window not the history, each label counts once."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
from _earned_fixtures import observe_fallback
from _evidence_records import evidence
from _reference_statistics import Drift, learn_then_test, takes_to_withdraw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentbranch.policy import Earned, QuestionKey
from agentbranch.policy.earned import _state as state_mod
from agentbranch.policy.earned._state import DigestSet, digest, replay
from agentbranch.policy.earned._statistics import Cells, DriftState, learn_then_test_cells


def _records(seed: int, n: int, grid: list[float]) -> list:
    """A question's evidence: labels in the fallback band, audited takes at the
    thresholds in force, review labels; right more often when sure."""
    rng = random.Random(seed)
    out = []
    take_at = None
    drift_at = rng.randrange(n // 2, n) if rng.random() < 0.5 else n
    for i in range(n):
        conf = rng.random()
        p_right = conf if i < drift_at else 0.3
        right = rng.random() < min(0.99, 0.3 + p_right)
        if rng.random() < 0.05:
            take_at = rng.choice([None, *grid[:40]])
        band = "take" if take_at is not None and conf >= take_at else "fallback"
        if rng.random() < 0.03:
            band = "review"
        rate = rng.choice([0.2, 0.1, 0.5]) if band == "take" else 1.0
        out.append(
            evidence(
                key="k",
                question_id="q",
                reader="r",
                model="m",
                source="audit" if band == "take" else band,
                band=band,
                confidence=conf,
                teacher_label="yes" if right else "no",
                rate=rate,
                take_at=take_at,
                trust="earned" if take_at is not None else "learning",
                time=f"2026-01-01T00:{i // 60000:02d}:{(i // 1000) % 60:02d}.{i % 1000:03d}+00:00",
            )
        )
    return out


def _summary(s) -> tuple:
    return (
        s.take_at,
        s.trust,
        s.labels,
        s.looks,
        s.audit_right,
        s.audit_wrong,
        s.records,
        s.last,
        s.events,
        s.drift_evalue,
    )


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(50, 500),
    late_share=st.floats(0.0, 0.4),
    max_late=st.integers(1, 80),
    dup_share=st.floats(0.0, 0.2),
)
def test_incremental_state_is_a_full_replay_in_sorted_order(
    seed, n, late_share, max_late, dup_share, monkeypatch_window
):
    """Labels fed in arrival order (some late by up to ``max_late`` places, some twice)
    leave the state a full replay of the same records sorted by (time, id) gives;
    labels later than the window replay the question from the store."""
    earned = Earned(precision=0.8, level=0.9, min_evidence=10, step=0.02)
    records = _records(seed, n, earned.candidates)
    rng = random.Random(seed + 1)
    arrival = list(records)
    for i in range(len(arrival)):  # move a share of labels later in arrival order
        if rng.random() < late_share:
            j = min(len(arrival) - 1, i + rng.randint(1, max_late))
            arrival.insert(j, arrival.pop(i))
    arrival += [r for r in records if rng.random() < dup_share]  # each counts once
    for rec in arrival:
        earned.evidence.append([rec])
        earned._ledger.feed([rec])
    live = earned._ledger.windows["k"].live
    assert _summary(live) == _summary(replay(records, earned))


@pytest.fixture
def monkeypatch_window(monkeypatch):
    """A small window, so that some labels arrive older than it (a replay from the store)."""
    monkeypatch.setattr(state_mod, "CHUNK", 8)
    monkeypatch.setattr(state_mod, "CHUNKS", 8)


def test_a_label_later_than_its_window_replays_the_question_from_the_store(monkeypatch):
    monkeypatch.setattr(state_mod, "CHUNK", 4)
    monkeypatch.setattr(state_mod, "CHUNKS", 3)
    earned = Earned(precision=0.8, level=0.9, min_evidence=10, step=0.02)
    records = _records(5, 200, earned.candidates)
    late, rest = records[3], records[:3] + records[4:]
    for rec in [*rest, late]:
        earned.evidence.append([rec])
        earned._ledger.feed([rec])
    assert _summary(earned._ledger.windows["k"].live) == _summary(replay(records, earned))


def _counting(monkeypatch) -> list[int]:
    """Count state-machine steps wherever they are called from."""
    import agentbranch.policy.earned as earned_mod

    calls = [0]
    original = state_mod.step

    def counted(*a, **k):
        calls[0] += 1
        return original(*a, **k)

    for mod in (earned_mod, state_mod):
        if hasattr(mod, "step"):
            monkeypatch.setattr(mod, "step", counted)
    return calls


def _observe(earned: Earned, conf: float, right: bool):
    return observe_fallback(earned, "yes" if right else "no", conf)


def test_a_future_dated_record_does_not_make_each_label_replay_the_store(tmp_path, monkeypatch):
    """Issue 37.9: after one record dated a year ahead, every later label sorts before it;
    each must cost a bounded re-run, not a replay of the question's history."""
    earned = Earned(precision=0.9, min_evidence=50, store=tmp_path / "e.jsonl", refresh_s=0)
    for i in range(400):
        _observe(earned, (i % 97) / 97, i % 3 > 0)
    future = _observe(earned, 0.5, True).model_copy(
        update={"id": "future", "time": "2027-12-03T00:00:00.000+00:00"}
    )
    earned.evidence.append([future])
    earned.refresh()
    calls = _counting(monkeypatch)
    for i in range(50):
        _observe(earned, (i % 89) / 89, i % 4 > 0)
    # the old core replayed ~400 records per label (20,000 steps)
    assert calls[0] <= 50 * 2 * state_mod.CHUNK


def test_an_out_of_order_label_costs_its_window_not_the_history(monkeypatch):
    """Issue 42: a label that sorts before the last one re-runs at most its chunk and
    the ones after it."""
    earned = Earned(precision=0.9, min_evidence=50)
    records = _records(11, 3000, earned.candidates)
    for rec in records[:-2]:
        earned.evidence.append([rec])
        earned._ledger.feed([rec])
    calls = _counting(monkeypatch)
    for rec in (records[-1], records[-2]):  # the second arrives late
        earned.evidence.append([rec])
        earned._ledger.feed([rec])
    assert calls[0] <= 2 * state_mod.CHUNK + 1
    assert _summary(earned._ledger.windows["k"].live) == _summary(replay(records, earned))


def test_state_memory_does_not_grow_with_the_labels():
    """Issue 42: the state of a question is the same size after 500 and 20,000 labels
    (the old one kept five lists of every label: ~4 KB per label in a service)."""
    earned = Earned(precision=0.8, min_evidence=50)
    records = _records(3, 20_000, earned.candidates)
    small = replay(records[:500], earned)
    big = replay(records, earned)
    extra_events = 250 * max(0, len(big.events) - len(small.events))
    assert big.nbytes <= small.nbytes + extra_events + 256
    assert big.nbytes < 12_000  # bytes, for the whole question


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 400),
    shown_i=st.one_of(st.none(), st.integers(0, 20)),
)
def test_cell_test_equals_the_per_label_test(seed, n, shown_i):
    """``learn_then_test_cells`` shows the threshold ``thresholds.learn_then_test`` shows
    on the same labels (weights of whole numbers, so sums are exact either way)."""
    rng = np.random.default_rng(seed)
    cand = [round(1 - 0.02 * k, 10) for k in range(51)]
    conf = rng.random(n)
    ok = rng.random(n) < 0.4 + 0.6 * conf
    w = rng.choice([1.0, 5.0, 10.0], n)
    tau = [None if u < 0.3 else float(rng.choice(cand[:30])) for u in rng.random(n)]
    rev = rng.random(n) < 0.05
    cells = Cells(sorted(set(cand)))
    for c, o, ww, t, r in zip(conf, ok, w, tau, rev):
        cells.add(float(c), bool(o), float(ww), t, bool(r))
    shown = None if shown_i is None else cand[shown_i]
    for alpha in (0.05, 0.2):
        per_label = learn_then_test(
            conf,
            ok,
            precision=0.7,
            alpha=alpha,
            candidates=cand,
            weights=w,
            in_force=tau,
            review=rev,
            shown=shown,
        )
        assert (
            learn_then_test_cells(
                cells.view(), precision=0.7, alpha=alpha, candidates=cand, shown=shown
            )
            == per_label
        )


@given(seed=st.integers(0, 10_000), p=st.sampled_from([0.8, 0.9, 0.95]))
@settings(max_examples=15, deadline=None)
def test_running_drift_equals_the_restarting_drift_test(seed, p):
    rng = random.Random(seed)
    a, b = Drift(p), DriftState(p)
    for _ in range(rng.randint(1, 1000)):
        ok = rng.random() < rng.choice([p, p - 0.1, p + 0.05])
        assert b.add(ok) == pytest.approx(a.add(ok), rel=1e-9, abs=1e-300)


def test_running_drift_withdraws_after_the_documented_takes():
    for drop, takes in ((0.8, 93), (0.7, 25), (0.5, 7)):
        assert takes_to_withdraw(0.9, drop, 0.95) == takes
        drift, n = DriftState(0.9), 0
        while not drift.drifted(0.05):
            n += 1
            drift.add(round(n * (1 - drop)) == drift.wrong)
        assert n == takes


def test_duplicated_store_lines_count_once(tmp_path):
    """Issue 37.2: a JSON Lines store whose lines appear twice (a backup appended, two
    files joined with cat) gives the thresholds of its records counted once."""
    path = tmp_path / "e.jsonl"
    earned = Earned(precision=0.8, min_evidence=40, store=path)
    for _ in range(25):
        _observe(earned, 0.99, True)
    once = earned.state(QuestionKey("q", {"q": 1}, "r", "m"))
    assert (once.trust, once.labels) == ("learning", 25)
    path.write_bytes(path.read_bytes() * 2)
    again = Earned(precision=0.8, min_evidence=40, store=path).state(
        QuestionKey("q", {"q": 1}, "r", "m")
    )
    assert (again.trust, again.labels, again.take_at) == ("learning", 25, None)
    assert (
        replay(
            earned.evidence.load(earned.key(QuestionKey("q", {"q": 1}, "r", "m"))) * 2, earned
        ).labels
        == 25
    )


def test_one_label_per_decision_identity():
    """Issue 37.3: records carrying the same ``decision`` identity (a node retried, a
    queue redelivering) count once: the first in replay order."""
    earned = Earned(precision=0.8, min_evidence=20)
    recs = []
    for i in range(40):
        rec = SimpleNamespace(
            id=f"id{i}",
            time=f"t{i:04d}",
            order=(f"t{i:04d}", f"id{i}"),
            key="k",
            question_id="q",
            band="fallback",
            confidence=0.99,
            correct=True,
            rate=1.0,
            take_at=None,
            floor=None,
            bet_alpha=None,
            decision=f"d{i % 20}",
        )
        recs.append(rec)
    assert replay(recs, earned).labels == 20
    for rec in reversed(recs):  # every one late but the first fed
        earned._ledger.feed([rec])
    assert earned._ledger.windows["k"].live.labels == 20


def test_digest_set_is_compact_and_exact():
    seen = DigestSet()
    ids = [digest(f"id:{i}") for i in range(50_000)]
    for d in ids:
        seen.add(d)
    assert len(seen) == 50_000
    assert all(d in seen for d in ids[::97])
    assert digest("id:absent") not in seen
    assert seen.nbytes <= 8 * 50_000 + 72 * 4096


def test_a_sqlite_store_is_read_incrementally(tmp_path):
    """A replica sharing a LangGraph store reads only what is new (issue 42)."""
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path / "e.db")) as store:
        store.setup()
        a = Earned(precision=0.8, min_evidence=40, store=store)
        b = Earned(precision=0.8, min_evidence=40, store=store, refresh_s=0)
        for _ in range(30):
            _observe(a, 0.99, True)
        assert b.state(QuestionKey("q", {"q": 1}, "r", "m")).labels == 30
        last = _observe(a, 0.99, True)
        new = b.evidence.read_new()
        assert [r.id for r in new] == [last.id]
        assert b.evidence.read_new() == []
        b._ledger.feed(new)
        assert b.state(QuestionKey("q", {"q": 1}, "r", "m")).labels == 31
