"""Replays are offline by construction: every teacher call a policy makes goes through the
cassette its engine reads through, with no wrapping by the user.

A user's test suite (pytester, in a subprocess: numpy cannot be imported twice in one
process, and the plugin as installed) records a learning graph once —
``Earned(learn=True)``, a decide node, an ``Audit`` whose teacher is a chat model, a
``Generate`` fallback whose teacher is a ``RunnableLambda`` — and replays it under
``CI=true`` with teachers that raise if they are ever called: the same decisions and
audit records, no stale entry, no miss. A changed teacher prompt is a ``ReplayMissError``
naming the call. Sync and async."""

from __future__ import annotations

import json
from typing import Any

import pytest

PLUGIN = ("-p", "agentbranch.replay.pytest_plugin")

LEARNING_GRAPH = """
import asyncio
import json
import random
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import agentbranch as ab
from agentbranch.langgraph import DecisionRecords, decide_node
from agentbranch.policy import Audit, Earned, Generate, Policy

GENERATE_PROMPT = None
AUDIT_PROMPT = None
SPORT = ["The striker scored twice as the home side won", "She won the tennis final",
         "The marathon runner broke the course record", "Their goalkeeper saved a penalty"]
COOKING = ["Simmer the onions in butter until soft", "Knead the dough for ten minutes",
           "Roast the chicken with lemon and garlic", "Whisk the eggs with sugar until pale"]
QUESTION = ab.yes_no("Is this about sport?",
                     examples={"yes": ["A football match report"], "no": ["A bread recipe"]})
TEXTS = [f"{random.Random(i).choice(SPORT + COOKING)} (note {i})" for i in range(90)]
CALLS = {"generate": 0, "audit": 0}
REPLAY = [False]


def truth(text):
    return "yes" if any(s in text for s in SPORT) else "no"


def read(state, q):  # unsure on the question as written, sure once it shows learned lines
    if sum(len(e) for e in q.examples) <= 2:
        return {"yes": 0.5, "no": 0.5}
    return {o: 0.97 if o == truth(state) else 0.03 for o in q.options}


def encode(texts):  # a bag of hashed words (the learner's few-shot picker)
    out = np.full((len(texts), 64), 1e-3)
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z]+", t.lower()):
            out[i, zlib.crc32(w.encode()) % 64] += 1.0
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def generate_teacher(messages):
    if REPLAY[0]:
        raise AssertionError("the Generate teacher was called during a replay")
    CALLS["generate"] += 1
    return AIMessage(json.dumps({"label": truth(messages[-1].content)}))


class AuditTeacher(BaseChatModel):
    @property
    def _llm_type(self):
        return "audit-teacher"

    def _generate(self, messages, stop=None, **kw):
        if REPLAY[0]:
            raise AssertionError("the audit teacher was called during a replay")
        CALLS["audit"] += 1
        reply = AIMessage(json.dumps({"label": truth(str(messages[-1].content))}))
        return ChatResult(generations=[ChatGeneration(message=reply)])


class S(TypedDict, total=False):
    text: str
    decisions: DecisionRecords
    out: str


def build(decision_cassette, store, sink):
    earned = Earned(precision=0.8, min_evidence=10, refresh_s=0, store=store, learn=True)
    earned.learner.background = False
    earned.learner.settle_s = 0
    earned.learner.encoder = encode
    audit = Audit(model=AuditTeacher(), rate=0.5, sink=sink, instructions=AUDIT_PROMPT)
    generate = Generate(RunnableLambda(generate_teacher), instructions=GENERATE_PROMPT)
    policy = Policy(take_at=earned, fallbacks=[generate], audit=audit)
    reader = decision_cassette.reader(lambda: ab.ScriptedReader({"sport": read}, model="canvas"))
    node = decide_node(ab.DecisionEngine(reader), {"sport": QUESTION}, policy=policy,
                       state_key="text")
    g = StateGraph(S)
    g.add_node("read", node)
    g.add_node("sports", lambda s: {"out": "sports"})
    g.add_node("kitchen", lambda s: {"out": "kitchen"})
    g.add_edge(START, "read")
    g.add_conditional_edges("read", node.router("sport", {"yes": "sports", "no": "kitchen"}))
    g.add_edge("sports", END)
    g.add_edge("kitchen", END)
    return g.compile(), audit


KEEP = ("label", "decided_by", "band", "take_at", "trust", "reader_version", "probability")


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_learning_graph(decision_cassette, tmp_path, use_async):
    REPLAY[0] = decision_cassette.mode == "none"
    sink = []
    app, audit = build(decision_cassette, tmp_path / "evidence.jsonl", sink.append)
    outs = []
    for text in TEXTS:
        out = asyncio.run(app.ainvoke({"text": text})) if use_async else app.invoke({"text": text})
        outs.append([out["out"], {k: out["decisions"]["sport"].get(k) for k in KEEP}])
    assert audit.flush(timeout=60)
    audits = [{k: v for k, v in r.items() if k not in ("id", "time", "reader")} for r in sink]
    run = json.loads(json.dumps({"decisions": outs, "audits": audits}))
    kept = Path(__file__).parent / f"recorded-{use_async}.json"
    if REPLAY[0]:
        assert run == json.loads(kept.read_text())
    else:
        assert CALLS["generate"] > 0 and CALLS["audit"] > 0
        assert max(rec["reader_version"] for _, rec in outs) >= 1  # it learned
        kept.write_text(json.dumps(run))
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_graph=LEARNING_GRAPH)
    return pytester


def kinds(path) -> dict[str, int]:
    lines = [json.loads(x) for x in path.read_text().splitlines()[1:]]
    got: dict[str, int] = {}
    for line in lines:
        got[line["kind"]] = got.get(line["kind"], 0) + 1
    return got


def test_a_recorded_learning_graph_replays_in_ci_without_calling_a_teacher(suite, monkeypatch):
    suite.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=2)
    for case in ("sync", "async"):
        got = kinds(suite.path / "cassettes" / f"test_learning_graph_{case}_.jsonl")
        # the RunnableLambda's answers, the audit teacher's exchanges, each audit's draw
        assert got["teacher"] > 0 and got["chat"] > 0 and got["sample"] > 0, got
        assert got["read"] == 90, got  # the decisions' reads only: no trial read is kept

    monkeypatch.setenv("CI", "true")
    replay = suite.runpytest_subprocess(*PLUGIN)
    replay.assert_outcomes(passed=2)  # the teachers raise if called: none was
    assert "agentbranch decision cassettes" not in replay.stdout.str()  # no stale, no miss

    # Re-recording brings nothing stale back.
    monkeypatch.delenv("CI")
    suite.runpytest_subprocess(*PLUGIN, "--agentbranch-record=all").assert_outcomes(passed=2)
    monkeypatch.setenv("CI", "true")
    again = suite.runpytest_subprocess(*PLUGIN)
    again.assert_outcomes(passed=2)
    assert "agentbranch decision cassettes" not in again.stdout.str()


def test_a_changed_teacher_prompt_is_a_miss_naming_the_call(suite, monkeypatch):
    suite.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=2)
    source = (suite.path / "test_graph.py").read_text()
    monkeypatch.setenv("CI", "true")

    # The Generate fallback's prompt: the decide node raises the miss.
    suite.makepyfile(
        test_graph=source.replace(
            "GENERATE_PROMPT = None", 'GENERATE_PROMPT = "Answer as a sports editor."'
        )
    )
    result = suite.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(failed=2)
    assert "the Generate teacher was called" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*ReplayMissError: cassette cassettes/test_learning_graph_*_.jsonl (mode 'none') "
            "has no answer of the Generate fallback RunnableLambda generate_teacher of "
            "question 'sport' to this input ('Input:*'). Replay calls no teacher.",
            "*Nearest recorded call (line *) differs in: message 1 (system)",
            "*Record it: pytest --agentbranch-record=new*",
        ]
    )

    # The audit teacher's prompt, in a test that does not look at its audit records: the
    # audit runs on the audit's worker thread, where a miss cannot fail the run, so the
    # plugin fails the test, naming the audit calls it missed.
    audited = source.replace("AUDIT_PROMPT = None", 'AUDIT_PROMPT = "You audit a sports desk."')
    suite.makepyfile(
        test_graph=audited.replace(
            "assert run == json.loads(kept.read_text())",
            'assert run["decisions"] == json.loads(kept.read_text())["decisions"]',
        )
    )
    result = suite.runpytest_subprocess(*PLUGIN)
    out = result.stdout.str()
    assert "the audit teacher was called" not in out
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*the cassette cassettes/test_learning_graph_*_.jsonl has no answer for * audit "
            "teacher call(s) of this test (made on the audit's worker thread*",
            "*misses (*",
            "*chat audit-teacher*",
        ]
    )


def test_a_reviewer_function_is_recorded_and_replayed(tmp_path):
    """A ``Resolver(review=fn)`` reviewer is a teacher call too: its answers replay, and
    a reviewer shown something else (other probabilities: a new calibration) misses."""
    import agentbranch as ab
    from agentbranch.policy import Policy, Resolver
    from agentbranch.replay import Cassette, ReplayMissError

    questions = {"team": ab.choice("Which team?", ["billing", "outage"])}
    policy = Policy(take_at=0.9, review_below=0.9)
    asked: list[dict] = []
    replaying = [False]

    def human(payload: dict) -> str:
        if replaying[0]:
            raise AssertionError("the reviewer was asked during a replay")
        asked.append(payload)
        return "outage"

    def resolver(cassette: Cassette, calibration: ab.Calibration | None = None) -> Resolver:
        script = {"team": {"billing": 0.6, "outage": 0.4}}
        reader = cassette.reader(lambda: ab.ScriptedReader(script), id="desk")
        engine = ab.DecisionEngine(reader, calibration=calibration)
        return Resolver(engine, questions, policy, review=human)

    path = tmp_path / "reviewed.jsonl"
    with Cassette(path, "all") as cassette:
        live = resolver(cassette).resolve("The site is down")
    assert live["team"]["decided_by"] == "human" and live["team"]["label"] == "outage"
    assert len(asked) == 1
    assert kinds(path)["teacher"] == 1

    replaying[0] = True
    with Cassette(path, "none") as cassette:
        assert resolver(cassette).resolve("The site is down")["team"]["label"] == "outage"
        assert cassette.stale() == []
        recalibrated = resolver(cassette, ab.Calibration(default=2.0))
        with pytest.raises(ReplayMissError, match="the reviewer .*human of question 'team'"):
            recalibrated.resolve("The site is down")


def _resolve_tickets(cassette, model, tickets, *, audit=None):
    import agentbranch as ab
    from agentbranch.policy import Generate, Policy, Resolver

    questions = {"team": ab.choice("Which team?", ["billing", "outage"])}
    reader = cassette.reader(
        lambda: ab.ScriptedReader({"team": {"billing": 0.5, "outage": 0.5}}), id="desk"
    )
    policy = Policy(take_at=0.9, fallbacks=[Generate(model)], audit=audit)
    resolver = Resolver(ab.DecisionEngine(reader), questions, policy)
    return [resolver.resolve(t)["team"]["label"] for t in tickets]


def test_a_chat_model_with_its_own_cache_is_a_teacher_call(tmp_path):
    """A chat model that has a cache of its own (or ``cache=False``) is not put on the
    cassette's chat cache: its calls are teacher lines, replayed all the same."""
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from agentbranch.replay import Cassette

    path = tmp_path / "own-cache.jsonl"
    tickets = ["The site is down", "I was charged twice"]
    answers = [AIMessage('{"label": "outage"}'), AIMessage('{"label": "billing"}')]
    live = GenericFakeChatModel(messages=iter(answers), cache=False)
    with Cassette(path, "all") as cassette:
        assert _resolve_tickets(cassette, live, tickets) == ["outage", "billing"]
    assert kinds(path).get("chat", 0) == 0 and kinds(path)["teacher"] == 2
    teacher = [json.loads(x) for x in path.read_text().splitlines() if '"teacher"' in x][0]
    assert teacher["role"] == "generate" and teacher["question"] == "team"
    assert teacher["teacher"].startswith("generic-fake-chat-model chat-")  # its llm_string
    assert teacher["reply"]["message"]["data"]["content"] == '{"label": "outage"}'

    empty = GenericFakeChatModel(messages=iter([]), cache=False)  # raises if called
    with Cassette(path, "none") as cassette:
        assert _resolve_tickets(cassette, empty, tickets) == ["outage", "billing"]
        assert cassette.stale() == []


def test_new_mode_records_only_the_teacher_calls_it_lacks(tmp_path):
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    from agentbranch.replay import Cassette

    calls: list[str] = []

    def teacher(messages):
        calls.append(messages[-1].content)
        return AIMessage('{"label": "billing"}')

    path = tmp_path / "new.jsonl"
    with Cassette(path, "new") as cassette:
        _resolve_tickets(cassette, RunnableLambda(teacher), ["a refund", "a refund"])
    assert len(calls) == 2  # a repeat is asked live, as the live run asks it (issue 64)
    with Cassette(path, "new") as cassette:
        _resolve_tickets(cassette, RunnableLambda(teacher), ["a refund", "an invoice"])
    assert len(calls) == 3 and kinds(path)["teacher"] == 3


def test_teacher_and_sample_lines_load_and_survive_a_rewrite(tmp_path):
    """The new kinds load, are checked like every line, and are kept when a cassette is
    rewritten (``clear_chats``; an upgrade of an older format)."""
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    from agentbranch.policy import Audit
    from agentbranch.replay import Cassette, CassetteFormatError
    from agentbranch.replay.format import load

    path = tmp_path / "run.jsonl"
    teacher = RunnableLambda(lambda messages: AIMessage('{"label": "billing"}'))
    with Cassette(path, "all") as cassette:
        _resolve_tickets(cassette, teacher, ["a refund"], audit=Audit(rate=1.0))
    data = load(path)
    assert [t.role for t in data.teachers.values()] == ["generate"]
    assert not data.decided["sample"]  # no take
    lines = path.read_text().splitlines()
    sample = {"kind": "sample", "key": "audit:0123456789abcdef01234567#0", "audited": True}
    path.write_text("\n".join([*lines, json.dumps(sample)]) + "\n")
    Cassette(path, "new").clear_chats()
    kept = load(path)
    assert list(kept.teachers) == list(data.teachers)
    assert kept.decided["sample"] == {sample["key"]: {"audited": True}}

    bad = [json.loads(x) for x in path.read_text().splitlines()]
    for line in bad:
        if line.get("kind") == "teacher":
            line["role"] = "oracle"
    path.write_text("".join(json.dumps(x) + "\n" for x in bad))
    with pytest.raises(CassetteFormatError, match="field 'role'"):
        load(path)


def test_replay_diff_reports_a_changed_teacher_reply(tmp_path):
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    from agentbranch.replay import Cassette
    from agentbranch.replay.diff import diff_cassettes

    def recorded(label: str, path):
        reply = AIMessage(json.dumps({"label": label}))
        with Cassette(path, "all") as cassette:
            _resolve_tickets(cassette, RunnableLambda(lambda m: reply), ["a refund"])

    recorded("billing", tmp_path / "old.jsonl")
    recorded("outage", tmp_path / "new.jsonl")
    report = diff_cassettes(tmp_path / "old.jsonl", tmp_path / "new.jsonl")
    assert [(c.old_reply, c.new_reply) for c in report.chats] == [
        ('{"label": "billing"}', '{"label": "outage"}')
    ]
    assert report.changed


def test_an_unplayed_teacher_call_is_listed_as_stale(tmp_path):
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    from agentbranch.replay import Cassette

    def labeller(messages):
        return AIMessage('{"label": "billing"}')

    path = tmp_path / "stale.jsonl"
    with Cassette(path, "all") as cassette:
        _resolve_tickets(cassette, RunnableLambda(labeller), ["a refund", "an invoice"])
    with Cassette(path, "none") as cassette:
        _resolve_tickets(cassette, RunnableLambda(labeller), ["a refund"])
        (stale_read, stale_call) = cassette.stale()
    assert stale_read["kind"] == "read"
    assert stale_call["kind"] == "teacher" and stale_call["model"] == "RunnableLambda labeller"
    assert stale_call["summary"].startswith("generate of 'team' 'Input:\\nan invoice")


@pytest.mark.parametrize("teacher_kind", ["runnable", "chat model"])
def test_audits_replay_the_recorded_draws_and_without_them_the_recorded_calls(
    tmp_path, teacher_kind
):
    """A replay audits the decisions the recording drew (whatever its own seed); a
    cassette recorded before draws were kept audits those whose teacher calls it holds."""
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    import agentbranch as ab
    from agentbranch.policy import Audit, GotoNode, Policy, Resolver
    from agentbranch.replay import Cassette

    questions = {"team": ab.choice("Which team?", ["billing", "outage"])}
    tickets = [f"I was charged twice, case {i}" for i in range(12)]

    def teacher(live: bool):
        if teacher_kind == "runnable":

            def label(messages):
                assert live, "the audit teacher was called during a replay"
                return AIMessage('{"label": "billing"}')

            return RunnableLambda(label)
        answers = iter([AIMessage('{"label": "billing"}')] * (len(tickets) if live else 0))
        return GenericFakeChatModel(messages=answers)  # raises once it runs out

    def audited(cassette: Cassette, live: bool, seed: int) -> list[str]:
        reader = cassette.reader(lambda: ab.ScriptedReader({"team": {"billing": 0.99}}))
        records: list[dict] = []
        audit = Audit(
            model=teacher(live), rate=0.5, seed=seed, sink=records.append, include_state=True
        )
        policy = Policy(take_at=0.5, fallbacks=[GotoNode("human")], audit=audit)
        resolver = Resolver(ab.DecisionEngine(reader), questions, policy)
        for t in tickets:
            resolver.resolve(t)
        assert audit.flush(timeout=30)
        assert audit.stats.failed == 0
        return sorted(r["state"] for r in records)  # which decisions were audited

    path = tmp_path / "audited.jsonl"
    with Cassette(path, "all") as cassette:
        recorded = audited(cassette, live=True, seed=1)
    assert 0 < len(recorded) < len(tickets)
    with Cassette(path, "none") as cassette:
        assert audited(cassette, live=False, seed=2) == recorded  # another seed: same audits
        assert cassette.stale() == []

    lines = [x for x in path.read_text().splitlines() if '"kind": "sample"' not in x]
    path.write_text("\n".join(lines) + "\n")
    with Cassette(path, "none") as cassette:
        assert audited(cassette, live=False, seed=2) == recorded


def test_a_fallback_that_runs_out_of_time_is_not_recorded(tmp_path):
    """``Generate(timeout_s=...)`` gives up on a slow teacher: no answer, so nothing is
    recorded for it (a replay asks it again, and misses, rather than replaying a
    non-answer)."""
    import threading

    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    import agentbranch as ab
    from agentbranch.policy import Generate, GotoNode, Policy, Resolver
    from agentbranch.replay import Cassette

    release = threading.Event()

    def slow(messages):
        release.wait(10)
        return AIMessage('{"label": "billing"}')

    questions = {"team": ab.choice("Which team?", ["billing", "outage"])}
    path = tmp_path / "slow.jsonl"
    with Cassette(path, "all") as cassette:
        reader = cassette.reader(
            lambda: ab.ScriptedReader({"team": {"billing": 0.5, "outage": 0.5}})
        )
        fallbacks = [Generate(RunnableLambda(slow), timeout_s=0.2), GotoNode("human")]
        policy = Policy(take_at=0.9, fallbacks=fallbacks)
        record = Resolver(ab.DecisionEngine(reader), questions, policy).resolve("a refund")
    release.set()
    assert record["team"]["decided_by"] == "fallback_node"
    assert "teacher" not in kinds(path)


class _Changing:
    """A teacher whose answer changes from call to call (outage, billing, outage), as
    a model sampling at a temperature does; raises once ``replaying``."""

    def __init__(self) -> None:
        self.calls = 0
        self.replaying = False

    def reply(self) -> Any:
        from langchain_core.messages import AIMessage

        if self.replaying:
            raise AssertionError("the teacher was called during a replay")
        self.calls += 1
        label = ["outage", "billing"][(self.calls - 1) % 2]
        return AIMessage(json.dumps({"label": label}))


def _changing_model(kind: str, teacher: _Changing) -> Any:
    """The teacher as a Runnable (teacher lines) or as a chat model (chat lines)."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.runnables import RunnableLambda

    if kind == "runnable":
        return RunnableLambda(lambda messages: teacher.reply())

    class Changing(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "changing"

        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=teacher.reply())])

    return Changing()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", ["runnable", "chat model"])
def test_recording_calls_the_teacher_as_often_as_the_live_run(tmp_path, kind, use_async):
    """Issue 64: in mode ``all`` the same input asked three times reached the teacher
    once (``outage`` x3 where the live run gave outage, billing, outage). A recording
    behaves as the live run it records, and a replay gives the same sequence in order;
    mode ``new`` records the repeats it lacks."""
    import asyncio

    import agentbranch as ab
    from agentbranch.policy import Generate, Policy, Resolver
    from agentbranch.replay import Cassette

    questions = {"team": ab.choice("Which team?", ["billing", "outage"])}
    tickets = ["The site is down"] * 3

    def labels(cassette: Cassette, model: Any, n: int = 3) -> list[str]:
        reader = cassette.reader(
            lambda: ab.ScriptedReader({"team": {"billing": 0.5, "outage": 0.5}}), id="desk"
        )
        policy = Policy(take_at=0.9, fallbacks=[Generate(model)])
        resolver = Resolver(ab.DecisionEngine(reader), questions, policy)
        if use_async:
            return [asyncio.run(resolver.aresolve(t))["team"]["label"] for t in tickets[:n]]
        return [resolver.resolve(t)["team"]["label"] for t in tickets[:n]]

    live = _Changing()
    assert labels(
        Cassette(tmp_path / "live.jsonl", "passthrough"), _changing_model(kind, live)
    ) == [
        "outage",
        "billing",
        "outage",
    ]
    path = tmp_path / "recorded.jsonl"
    teacher = _Changing()
    with Cassette(path, "all") as cassette:
        recorded = labels(cassette, _changing_model(kind, teacher))
    assert recorded == ["outage", "billing", "outage"] and teacher.calls == 3
    assert kinds(path)["chat" if kind == "chat model" else "teacher"] == 3
    teacher.replaying = True
    with Cassette(path, "none") as cassette:
        assert labels(cassette, _changing_model(kind, teacher)) == recorded
        assert cassette.stale() == []
    with Cassette(path, "none") as cassette:  # asked more often than recorded: the last
        assert labels(cassette, _changing_model(kind, teacher)) == recorded
        assert labels(cassette, _changing_model(kind, teacher), n=1) == ["outage"]

    partial = tmp_path / "partial.jsonl"
    teacher = _Changing()
    with Cassette(partial, "new") as cassette:
        assert labels(cassette, _changing_model(kind, teacher), n=2) == ["outage", "billing"]
    with Cassette(partial, "new") as cassette:  # the first two replayed, the third live
        assert labels(cassette, _changing_model(kind, teacher)) == ["outage", "billing", "outage"]
    assert teacher.calls == 3
