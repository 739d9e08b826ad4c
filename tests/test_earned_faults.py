"""Earned trust does not open on evidence that is not there (issue 37, points 1, 3, 4, 6,
10, 11): each test here failed (or hung) on the code before the fix."""

from __future__ import annotations

import json
import math
import operator
import time
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypedDict

import numpy as np
import pytest
from _earned_fixtures import URGENT, URGENT_KEY, Oracle, engine, state
from _reference_statistics import (
    grid,
    learn_then_test,
    pvalue_below,
    stratified,
)
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy
from pydantic import ValidationError

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.integrations.langgraph import DecisionRecords, decide_node
from agentbranch.policy import Earned, Generate, Policy, Resolver, replay
from agentbranch.policy.earned import takes_to_withdraw
from agentbranch.policy.earned._evidence import Evidence, evidence_key, new_evidence

_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _when(i: int) -> str:
    return (_T0 + timedelta(milliseconds=i)).isoformat(timespec="milliseconds")


def _raw(i: int = 0, **over: object) -> dict:
    """A stored evidence record as a release of today writes it."""
    rec = {
        "schema": "agentbranch.earned/1",
        "id": f"{i:012d}-abc",
        "time": _when(i),
        "key": "k",
        "question_id": "q",
        "reader": "r",
        "model": "m",
        "source": "fallback",
        "band": "fallback",
        "confidence": 0.7,
        "options": ["yes", "no"],
        "engine_label": "yes",
        "teacher_label": "yes",
        "correct": True,
        "rate": 1.0,
        "take_at": None,
        "trust": "learning",
    }
    rec.update(over)
    return rec


# -- 37.1: non-finite statistics fail closed ------------------------------------------------


def _half_right_with_one_huge_weight():
    """The issue's case: a question right half the time, labelled while learning, plus one
    audited take whose rate is 1e-310 (weight 1e310: the strata shares are inf/inf)."""
    rng = np.random.default_rng(3)
    conf = list(rng.uniform(0.6, 1.0, 200))
    ok = [bool(x) for x in rng.random(200) < 0.5]
    weights = [1.0] * 200
    in_force: list[float | None] = [None] * 200
    conf.append(1.0)
    ok.append(True)
    weights.append(1.0 / 1e-310)
    in_force.append(1.0)
    return conf, ok, weights, in_force


def test_an_infinite_weight_never_opens_a_half_right_question():
    conf, ok, weights, in_force = _half_right_with_one_huge_weight()
    assert math.isinf(weights[-1])
    found = learn_then_test(
        conf,
        ok,
        precision=0.9,
        alpha=0.05,
        candidates=grid(1.0, 0.0, 0.01),
        weights=weights,
        in_force=in_force,
    )
    assert found is None


def test_a_record_with_a_rate_of_1e_310_is_refused_in_a_store(tmp_path):
    path = tmp_path / "evidence.jsonl"
    lines = [_raw(i, confidence=0.6 + 0.002 * i, teacher_label="yes" if i % 2 else "no",
                  correct=bool(i % 2)) for i in range(100)]  # fmt: skip
    lines.append(_raw(100, source="audit", band="take", confidence=1.0, rate=1e-310,
                      take_at=1.0, trust="fixed"))  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    earned = Earned(precision=0.9, min_evidence=50, store=path, refresh_s=0)
    with pytest.raises(InvalidFileError, match=r"line 101 .*rate"):
        earned.evidence.load("k")


@pytest.mark.parametrize(
    ("right", "n"), [(math.nan, 10.0), (5.0, math.nan), (math.inf, math.inf), (5.0, math.inf)]
)
def test_a_p_value_of_numbers_that_are_not_finite_is_one(right, n):
    assert pvalue_below(right, n, 0.9) == 1.0


def test_stratified_weights_that_are_not_finite_give_nothing_to_test():
    conf = np.array([0.9, 0.95, 0.97, 0.99])
    ok = np.array([1.0, 1.0, 1.0, 1.0])
    tau = np.array([np.nan, 0.96, np.nan, 0.96])
    for bad in (np.inf, np.nan, 0.0, -1.0):
        w = np.array([1.0, bad, 1.0, 1.0])
        assert stratified(conf, ok, w, tau, np.zeros(4, dtype=int), 0.9) == (0.0, 0.0)


@pytest.mark.parametrize("rate", [1e-310, 5e-5, -0.1, math.nan, True])
def test_an_audit_rate_below_the_floor_is_a_configuration_error(rate):
    from agentbranch.policy.auditing.config import Audit

    with pytest.raises(ConfigurationError, match=r"Audit\(rate=\.\.\.\)"):
        Audit(rate=rate)


def test_the_audit_rate_floor_and_zero_are_accepted():
    from agentbranch.policy.auditing.config import Audit

    for rate in (0, 0.0, 1e-4, 0.05, 1):
        Audit(rate=rate).close()


# -- 37.3: each decision has an identity ----------------------------------------------------


def _resolve_all(resolver, states):
    return [resolver.resolve(s)["urgent"] for s in states]


def test_a_decision_resolved_twice_keeps_its_identity_in_the_evidence():
    earned = Earned(precision=0.8, min_evidence=200, refresh_s=0)
    r = Resolver(engine(), {"urgent": URGENT},
                 Policy(take_at=earned, fallbacks=[Generate(Oracle())]))  # fmt: skip
    states = [state(i, "yes", 0.9, "yes") for i in range(25)]
    first = _resolve_all(r, states)
    again = _resolve_all(r, states)
    assert all(rec["decision_id"] for rec in first)
    assert [rec["decision_id"] for rec in first] == [rec["decision_id"] for rec in again]
    assert len({rec["decision_id"] for rec in first}) == 25
    key = earned.key(URGENT_KEY)
    records = earned.evidence.load(key)
    assert len(records) == 50
    assert len({rec.decision for rec in records}) == 25  # one decision, two labels


class _S(TypedDict, total=False):
    text: str
    decisions: DecisionRecords
    done: Annotated[list, operator.add]


def _graph(earned, checkpointer=None, fail_after=None):
    policy = Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    node = decide_node(engine(), {"urgent": URGENT}, policy=policy, state_key="text")
    calls = {"n": 0}

    def after(s: _S) -> dict:
        calls["n"] += 1
        if fail_after is not None and calls["n"] <= fail_after:
            raise RuntimeError("a later step failed")
        return {"done": [1]}

    g = StateGraph(_S)
    g.add_node("decide", node, retry_policy=RetryPolicy(max_attempts=1))
    g.add_node("after", after)
    g.add_edge(START, "decide")
    g.add_edge("decide", "after")
    g.add_edge("after", END)
    return g.compile(checkpointer=checkpointer)


def test_in_langgraph_one_thread_is_one_decision_and_threads_differ():
    from langgraph.checkpoint.memory import InMemorySaver

    earned = Earned(precision=0.8, min_evidence=200, refresh_s=0)
    graph = _graph(earned, checkpointer=InMemorySaver())
    text = state(1, "yes", 0.9, "yes")
    ids = []
    for thread in ("a", "a", "b"):
        out = graph.invoke({"text": text}, {"configurable": {"thread_id": thread}})
        ids.append(out["decisions"]["urgent"]["decision_id"])
    assert ids[0] == ids[1] != ids[2]
    key = earned.key(URGENT_KEY)
    assert [r.decision for r in earned.evidence.load(key)] == ids


def test_a_node_rerun_after_a_later_failure_keeps_its_identity():
    from langgraph.checkpoint.memory import InMemorySaver

    earned = Earned(precision=0.8, min_evidence=200, refresh_s=0)
    graph = _graph(earned, checkpointer=InMemorySaver(), fail_after=1)
    config = {"configurable": {"thread_id": "t"}}
    text = state(2, "yes", 0.9, "yes")
    with pytest.raises(RuntimeError, match="later step failed"):
        graph.invoke({"text": text}, config)
    graph.invoke({"text": text}, config)  # run again on the same thread
    key = earned.key(URGENT_KEY)
    records = earned.evidence.load(key)
    assert len(records) == 2 and records[0].decision == records[1].decision is not None


def test_outside_langgraph_the_identity_is_the_question_and_the_rendered_state():
    from agentbranch.policy.records import decision_identity, langgraph_thread

    assert langgraph_thread() is None
    a = decision_identity("urgent", "site down")
    assert a == decision_identity("urgent", "site down")
    assert a != decision_identity("other", "site down")
    assert a != decision_identity("urgent", "site up")
    assert a != decision_identity("urgent", "site down", "thread-1")


# -- 37.4: the confidence scale is part of the evidence key ---------------------------------


def _earn(resolver, n=40):
    for i in range(n):
        resolver.resolve(state(i, "yes", 0.99, "yes"))


def _unsure(n=100):
    """Decisions the engine is unsure of (p=0.6), right half the time."""
    return [state(1000 + i, "yes", 0.6, "yes" if i % 2 else "no") for i in range(n)]


def _sharp_engine(**kw):
    from _earned_fixtures import scripted

    reader = ab.ScriptedReader({"urgent": scripted})
    reader.model = "scripted-model"
    return ab.DecisionEngine(reader, **kw)


def test_a_sharpening_calibration_deployed_after_earning_starts_learning_again():
    from agentbranch.engine.calibration import Calibration

    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0)
    policy = Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    _earn(Resolver(engine(), {"urgent": URGENT}, policy))
    before = Resolver(engine(), {"urgent": URGENT}, policy).resolve(_unsure(1)[0])["urgent"]
    assert before["trust"] == "earned" and before["band"] == "fallback"
    sharp = _sharp_engine(calibration=Calibration(temperatures={"urgent": 0.05}))
    after = Resolver(sharp, {"urgent": URGENT}, policy)
    recs = [after.resolve(s)["urgent"] for s in _unsure()[:30]]
    assert all(rec["confidence"] > 0.95 for rec in recs)  # the new scale calls them sure
    assert all(rec["trust"] == "learning" and rec["band"] != "take" for rec in recs)


@pytest.mark.parametrize(
    "kw",
    [
        {"draws": 2},
        {"permutations": 2},
        {"joint": True},
        {"instructions": "Answer for the on-call team."},
    ],
)
def test_every_setting_that_reshapes_confidence_is_in_the_key(kw):
    d0 = _sharp_engine().decide(state(5, "yes", 0.8, "yes"), {"urgent": URGENT})["urgent"]
    d1 = _sharp_engine(**kw).decide(state(5, "yes", 0.8, "yes"), {"urgent": URGENT})["urgent"]
    assert d0.reading is None and d1.reading is not None
    k0 = evidence_key("urgent", URGENT, d0.reader, d0.model, d0.reading)
    k1 = evidence_key("urgent", URGENT, d1.reader, d1.model, d1.reading)
    assert k0 != k1
    # The defaults keep the keys of earlier releases.
    assert k0 == evidence_key("urgent", URGENT, d0.reader, d0.model)


def test_a_reader_scoring_setting_is_in_the_reading():
    from agentbranch.engine.engine import reader_settings

    class Tuned(ab.ScriptedReader):
        def __init__(self, script=None, *, temperature: float | None = None, **kw):
            super().__init__(script, **kw)
            self.temperature = temperature

    assert reader_settings(Tuned()) == {}
    assert reader_settings(Tuned(temperature=0.5)) == {"temperature": 0.5}


# -- 37.6: no "earned" on labels that never touched the taken band --------------------------


def test_start_at_without_audits_is_not_earned_on_labels_below_it():
    earned = Earned(precision=0.9, level=0.95, min_evidence=50, start_at=0.5)
    rng = np.random.default_rng(0)
    records = [
        new_evidence(key="k", question_id="q", source="fallback", band="fallback",
                     confidence=float(c), options=["yes", "no"], engine_label="yes",
                     teacher_label="yes", rate=1.0, take_at=0.5, trust="fixed",
                     time=_when(i))
        for i, c in enumerate(rng.uniform(0.3, 0.5, 50))
    ]  # fmt: skip
    st_ = replay(records, earned)
    assert (st_.take_at, st_.trust) == (0.5, "fixed")
    assert all(e.kind == "look" for e in st_.events)


def test_a_band_with_an_unlabelled_stratum_is_not_shown():
    conf = np.array([0.31, 0.35, 0.4, 0.45] * 20)
    ok = np.ones_like(conf)
    tau = np.full(len(conf), 0.5)  # all made while 0.5 was in force: [0.5, 1] unlabelled
    w = np.ones_like(conf)
    assert stratified(conf, ok, w, tau, np.zeros(len(conf), dtype=int), 0.3) == (0.0, 0.0)
    # With one audited take above 0.5 the band has both strata and can be tested.
    conf2, ok2 = np.append(conf, 0.9), np.append(ok, 1.0)
    n, _ = stratified(conf2, ok2, np.append(w, 20.0), np.append(tau, 0.5),
                      np.zeros(len(conf2), dtype=int), 0.3)  # fmt: skip
    assert n > 0


# -- 37.10: parameters that would hang ------------------------------------------------------


def test_a_step_too_fine_is_a_configuration_error_at_once():
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match=r"step=1e-09\) makes more than"):
        Earned(step=1e-9)
    assert time.monotonic() - started < 5  # it used to build a billion candidates
    assert len(Earned(step=0.001).candidates) == 1001


def test_takes_to_withdraw_a_drop_too_small_to_see_is_a_clear_error_at_once():
    started = time.monotonic()
    with pytest.raises(ValueError, match="cannot withdraw"):
        takes_to_withdraw(0.9, 0.89, 0.95)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "args", [(0.9, math.nan, 0.95), (math.nan, 0.5, 0.95), (0.9, 0.5, 1.0), (0.9, 0.5, -1)]
)
def test_takes_to_withdraw_refuses_arguments_out_of_range(args):
    with pytest.raises(ValueError, match="takes_to_withdraw needs"):
        takes_to_withdraw(*args)


# -- 37.11: strict evidence -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"confidence": "0.97"}, "confidence"),
        ({"confidence": True}, "confidence"),
        ({"correct": "true"}, "correct"),
        ({"correct": 1}, "correct"),
        ({"rate": "1"}, "rate"),
        ({"time": "banana"}, "time"),
        ({"time": "2026-01-01T00:00:00"}, "time"),  # no UTC offset
        ({"time": "2026-01-01T02:00:00+02:00"}, "time"),  # not UTC: would sort wrongly
        ({"options": ["yes", "yes"], "teacher_label": "yes"}, "options"),
        ({"rate": 1e-310}, "rate"),
        ({"decision": ""}, "decision"),
    ],
)
def test_lax_evidence_is_refused(over, field):
    with pytest.raises(ValidationError, match=field):
        Evidence.model_validate(_raw(**over))


def test_a_time_in_the_future_beyond_the_skew_is_refused():
    soon = (datetime.now(UTC) + timedelta(minutes=1)).isoformat(timespec="milliseconds")
    Evidence.model_validate(_raw(time=soon))
    later = (datetime.now(UTC) + timedelta(hours=2)).isoformat(timespec="milliseconds")
    with pytest.raises(ValidationError, match="in the future"):
        Evidence.model_validate(_raw(time=later))


def test_records_of_the_current_schema_stay_readable(tmp_path):
    """A record as the previous release wrote it (no ``decision``) still reads."""
    old = _raw(time="2026-11-30T09:15:02.123+00:00")
    assert Evidence.model_validate(old).decision is None
    path = tmp_path / "evidence.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (got,) = Earned(store=path).evidence.load("k")
    assert got.id == old["id"]


def test_a_store_written_by_a_newer_schema_says_upgrade(tmp_path):
    path = tmp_path / "evidence.jsonl"
    path.write_text(json.dumps(_raw(schema="agentbranch.earned/2", extra="x")) + "\n")
    with pytest.raises(InvalidFileError, match=r"newer release of agentbranch .*upgrade") as info:
        Earned(store=path).evidence.load("k")
    assert "edited" not in str(info.value)
    with pytest.raises(ValidationError, match="newer release"):
        Evidence.model_validate(_raw(schema="agentbranch.earned/3"))


def test_start_at_above_max_take_at_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match=r"start_at=0.95\) is above max_take_at=0.9"):
        Earned(start_at=0.95, max_take_at=0.9)


def test_a_canvas_reader_keeps_no_fingerprint_by_default_and_a_changed_prompt_has_one(
    tiny_model_dir,
):
    from agentbranch.engine.engine import reader_settings

    plain = ab.TransformersReader.from_pretrained(tiny_model_dir)
    assert reader_settings(plain) == {}
    as_text = ab.TransformersReader.from_pretrained(tiny_model_dir, special_tokens="text")
    assert reader_settings(as_text) == {"planner.special_tokens": "text"}


def test_takes_to_withdraw_a_drop_that_needs_too_many_takes_says_so_at_once():
    started = time.monotonic()
    with pytest.raises(ValueError, match="more than 10000 audited takes"):
        takes_to_withdraw(0.9, 0.876, 0.95)
    assert time.monotonic() - started < 5
