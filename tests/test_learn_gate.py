"""ToolGateMiddleware with Earned(learn=True): the gate's teacher answers teach its
question like a decide node's (each call read by the version in force, its label kept
with the call's state), on the embedded reader."""

from __future__ import annotations

import asyncio
import json

import pytest
from _learn_fixtures import QUESTION, Teacher, stream
from langchain_core.messages import AIMessage, HumanMessage

import agentbranch as ab
from agentbranch.langchain import ToolGateMiddleware
from agentbranch.policy import Earned, Generate, Policy
from agentbranch.policy.earned.learn import ladder as ld


@pytest.fixture(scope="module")
def engine() -> ab.DecisionEngine:
    from agentbranch.engine.readers.embedded import EmbeddedReader

    return ab.DecisionEngine(EmbeddedReader())


def _gate(engine, path, truth) -> tuple[ToolGateMiddleware, Earned]:
    earned = Earned(precision=0.8, min_evidence=10, refresh_s=0, store=path, learn=True)
    earned.learner.background = False  # fit at once: deterministic for the test
    earned.learner.settle_s = 0  # one writer
    policy = Policy(take_at=earned, fallbacks=[Generate(Teacher(truth=truth))])
    return _gate_of(engine, policy), earned


def _gate_of(engine, policy: Policy) -> ToolGateMiddleware:
    """A gate on ``post`` calls (posts about sport only) whose state is the post's text."""
    return ToolGateMiddleware(
        engine,
        tools=["post"],
        question=QUESTION,
        question_id="sport",
        block_on="no",
        policy=policy,
        renderer=lambda call, description, context: call["args"]["text"],
    )


def _turn(i: int, text: str) -> dict:
    call = {"name": "post", "args": {"text": text}, "id": f"c{i}", "type": "tool_call"}
    return {"messages": [HumanMessage("post it"), AIMessage("", tool_calls=[call])]}


def test_the_gate_learns_from_its_teacher(engine, tmp_path):
    path = tmp_path / "evidence.jsonl"
    items = stream(140, seed=3)
    gate, earned = _gate(engine, path, dict(items))
    records = []
    for i, (text, _) in enumerate(items):
        update = gate.after_model(_turn(i, text), None)
        records.append(update["tool_decisions"][f"c{i}"])
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    # every teacher label is kept with the call's state and the version that read it
    labelled = [x for x in lines if "state" in x]
    assert labelled and {x["state"] for x in labelled} <= set(dict(items))
    ladder = next(iter(earned.learner._questions.values())).ladder
    assert len(ladder.rungs) >= 2 and ladder.rungs[1].fitted_on == ld.refit_at(1)
    # each record says which version read it, the probability it reports, its identity
    versions = [rec["reader_version"] for rec in records]
    assert versions[0] == 0 and max(versions) >= 1
    assert all(rec["probability"] is not None and rec["decision_id"] for rec in records)
    # a learned version took decisions of its own, at a threshold earned on its own key
    learned = [r for r in records if r["reader_version"] >= 1 and r["band"] == "take"]
    assert learned and all(r["take_at"] is not None for r in learned)


def test_the_async_gate_learns_too(engine, tmp_path):
    path = tmp_path / "evidence.jsonl"
    items = stream(12, seed=4)
    gate, earned = _gate(engine, path, dict(items))

    async def run() -> list[dict]:
        out = []
        for i, (text, _) in enumerate(items):
            update = await gate.aafter_model(_turn(i, text), None)
            out.append(update["tool_decisions"][f"c{i}"])
        return out

    records = asyncio.run(run())
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len([x for x in lines if "state" in x]) == len(items)  # all fell back: learning
    assert all(r["reader_version"] == 0 and r["decided_by"] == "fallback" for r in records)


def test_the_gate_audits_and_its_audits_teach(engine, tmp_path):
    """A gate whose only teacher is an ``Audit`` (uncertain calls blocked): the audits
    label its calls in the background, and the labels are kept with the calls' states."""
    from agentbranch.policy import Audit, GotoNode

    path = tmp_path / "evidence.jsonl"
    items = stream(12, seed=5)
    teacher = Teacher(truth=dict(items))
    audit = Audit(model=teacher, rate=1.0)
    earned = Earned(precision=0.8, min_evidence=10, refresh_s=0, store=path, learn=True)
    earned.learner.background = False
    gate = _gate_of(engine, Policy(take_at=earned, fallbacks=[GotoNode("block")], audit=audit))
    records = [
        gate.after_model(_turn(i, text), None)["tool_decisions"][f"c{i}"]
        for i, (text, _) in enumerate(items)
    ]
    assert audit.flush(timeout=60)
    audit.close()
    assert all(r["decided_by"] == "fallback_node" and r["outcome"] == "blocked" for r in records)
    assert teacher.calls == len(items)  # each blocked call was audited once
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert sorted(x["state"] for x in lines) == sorted(text for text, _ in items)
    assert {x["teacher_label"] for x in lines} <= {"yes", "no"}


@pytest.mark.parametrize("run_async", [False, True])
def test_a_learning_gate_reads_a_turns_calls_in_one_batch(engine, tmp_path, run_async):
    """Two calls of one turn: one batched engine read, each call asked its own
    questions, each record its own version and identity."""
    items = stream(2, seed=6)
    gate, earned = _gate(engine, tmp_path / "evidence.jsonl", dict(items))
    batches: list[list] = []
    real, areal = engine.decide_many, engine.adecide_many

    def spy(states, questions, **kw):
        batches.append(list(questions))
        return real(states, questions, **kw)

    async def aspy(states, questions, **kw):
        batches.append(list(questions))
        return await areal(states, questions, **kw)

    calls = [
        {"name": "post", "args": {"text": t}, "id": f"c{i}", "type": "tool_call"}
        for i, (t, _) in enumerate(items)
    ]
    state = {"messages": [HumanMessage("post both"), AIMessage("", tool_calls=calls)]}
    engine.decide_many, engine.adecide_many = spy, aspy
    try:
        if run_async:
            update = asyncio.run(gate.aafter_model(state, None))
        else:
            update = gate.after_model(state, None)
    finally:
        del engine.decide_many, engine.adecide_many
    assert len(batches) == 1 and len(batches[0]) == 2  # per state its questions, one read
    records = update["tool_decisions"]
    assert [records[f"c{i}"]["reader_version"] for i in range(2)] == [0, 0]
    assert records["c0"]["decision_id"] != records["c1"]["decision_id"]
    stored = [json.loads(x) for x in (tmp_path / "evidence.jsonl").read_text().splitlines()]
    assert sorted(x["state"] for x in stored) == sorted(t for t, _ in items)
