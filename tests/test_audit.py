"""Shadow audits under a policy: sampling, the bounded background queue, sinks, teachers
that block or fail, fallback generations as labelled examples, replay from a cache."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest
from _audit_fixtures import Teacher, blocking_teacher
from _lg_fixtures import StrictFakeChat, sure, unsure

import agentbranch as ab
from agentbranch.audit import Audit, audit_report, load_records
from agentbranch.core.errors import ConfigurationError
from agentbranch.policy import Generate, GotoNode, Policy, Resolver

TEAM = ab.choice("Which team?", {"billing": "Invoices, refunds", "outage": "Service down"})
QUESTIONS = {"team": TEAM}


def engine(script: Any = None) -> ab.DecisionEngine:
    """Sure of 'billing' unless the state says 'down' (sure of 'outage') or 'hmm' (unsure)."""

    def team(state: str, q: Any) -> dict[str, float]:
        if "hmm" in state:
            return unsure("outage")(state, q)
        return sure("outage" if "down" in state else "billing")(state, q)

    return ab.DecisionEngine(ab.ScriptedReader(script or {"team": team}))


def tickets(n: int) -> list[str]:
    kinds = ["refund please", "site is down", "hmm not sure"]
    return [f"ticket {i}: {kinds[i % 3]}" for i in range(n)]


def _resolve_all(resolver: Resolver, states: list[str]) -> list[dict[str, Any]]:
    return [resolver.resolve(s)["team"] for s in states]


# -- configuration ----------------------------------------------------------------------


def test_audit_options_are_checked():
    with pytest.raises(ConfigurationError, match="rate"):
        Audit(model=Teacher(), rate=1.5)
    with pytest.raises(ConfigurationError, match="queue_size"):
        Audit(model=Teacher(), queue_size=0)
    with pytest.raises(ConfigurationError, match="chat model"):
        Audit(model="gpt")
    with pytest.raises(ConfigurationError, match="sink"):
        Audit(model=Teacher(), sink=42)
    with pytest.raises(ConfigurationError, match="Generate"):
        Policy(audit=Audit(rate=0.1))
    with pytest.raises(ConfigurationError, match="Audit"):
        Policy(audit={"rate": 0.1})


def test_a_copied_policy_shares_its_audit():
    import copy

    policy = Policy(audit=Audit(model=Teacher(), rate=0.5))
    assert copy.deepcopy(policy).audit is policy.audit
    assert copy.copy(policy.audit) is policy.audit


# -- sampling -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_1000_decisions_at_rate_0_1_give_about_100_audits(seed, tmp_path):
    audit = Audit(model=Teacher(), rate=0.1, seed=seed, sink=tmp_path / "a.jsonl", queue_size=2000)
    resolver = Resolver(engine({"team": sure("billing")}), QUESTIONS, Policy(audit=audit))
    _resolve_all(resolver, tickets(1000))
    assert audit.flush(timeout=60)
    n = len(load_records(tmp_path / "a.jsonl"))
    # Binomial(1000, 0.1): mean 100, sd 9.5; 4 sd either side.
    sd = math.sqrt(1000 * 0.1 * 0.9)
    assert 100 - 4 * sd <= n <= 100 + 4 * sd
    stats = audit.stats
    assert stats.sampled == stats.queued == stats.audited == n
    assert stats.dropped == stats.failed == 0
    audit.close()


def test_sampling_is_reproducible_with_a_seed_or_an_injected_rng():
    import random

    def audited_states(audit: Audit) -> list[str]:
        resolver = Resolver(engine(), QUESTIONS, Policy(audit=audit))
        _resolve_all(resolver, [s for s in tickets(300) if "hmm" not in s])
        audit.flush(timeout=30)
        return sorted(r["state"] for r in audit.sink.records)

    class Collect:
        def __init__(self) -> None:
            self.records: list[dict] = []

        def write(self, record: dict) -> None:
            self.records.append(record)

    a = audited_states(Audit(model=Teacher(), rate=0.2, seed=7, sink=Collect(), include_state=True))
    b = audited_states(Audit(model=Teacher(), rate=0.2, seed=7, sink=Collect(), include_state=True))
    c = audited_states(
        Audit(model=Teacher(), rate=0.2, rng=random.Random(7), sink=Collect(), include_state=True)
    )
    d = audited_states(Audit(model=Teacher(), rate=0.2, seed=8, sink=Collect(), include_state=True))
    assert a == b == c and len(a) > 20
    assert a != d


def test_only_taken_decisions_are_audited():
    records: list[dict] = []
    teacher = Teacher(rule=lambda prompt: "outage" if "site is down" in prompt else "billing")
    audit = Audit(model=teacher, rate=1.0, sink=records.append, fallback_examples=False)
    policy = Policy(take_at=0.8, fallbacks=[GotoNode("human")], audit=audit)
    resolver = Resolver(engine(), QUESTIONS, policy)
    out = _resolve_all(resolver, tickets(30))
    assert audit.flush(timeout=30)
    taken = [r for r in out if r["decided_by"] == "engine"]
    assert len(taken) == 20 and len(records) == 20 == teacher.calls
    rec = records[0]
    assert rec["kind"] == "audit" and rec["band"] == "take" and rec["rate"] == 1.0
    assert rec["engine_label"] == rec["teacher_label"] and rec["agree"] is True
    assert rec["probabilities"] == taken[0]["probabilities"]
    assert rec["spec"]["type"] == "choice" and rec["take_at"] == 0.8
    assert "state" not in rec  # no user text unless include_state=True
    assert rec["teacher"] == "Teacher"


# -- the teacher never touches the run ------------------------------------------------


class S(TypedDict, total=False):
    ticket: str
    decisions: Annotated[dict, operator.or_]
    path: Annotated[list, operator.add]


def _graph(policy: Policy):
    from langgraph.graph import END, START, StateGraph

    from agentbranch.langgraph import decide_node

    node = decide_node(engine(), QUESTIONS, state_key="ticket", policy=policy)
    g = StateGraph(S)
    g.add_node("triage", node)
    for name in ("billing", "outage", "human"):
        g.add_node(name, lambda s, name=name: {"path": [name]})
        g.add_edge(name, END)
    g.add_edge(START, "triage")
    router = node.router("team")
    g.add_conditional_edges("triage", router, router.path_map)
    return g.compile()


def _strip_latency(state: dict) -> dict:
    out = dict(state)
    out["decisions"] = {k: {**v, "latency_s": None} for k, v in state["decisions"].items()}
    return out


def test_a_blocked_teacher_never_delays_or_changes_a_run():
    base = Policy(take_at=0.8, fallbacks=[GotoNode("human")])
    teacher = blocking_teacher()
    audit = Audit(model=teacher, rate=1.0, queue_size=3)
    audited = Policy(take_at=0.8, fallbacks=[GotoNode("human")], audit=audit)
    states = tickets(40)
    plain = [_strip_latency(_graph(base).invoke({"ticket": t})) for t in states]
    shadowed = [_strip_latency(_graph(audited).invoke({"ticket": t})) for t in states]
    # Every run completed while the teacher was still blocked on its first call.
    assert teacher.entered.wait(30) and not teacher.block.is_set()
    assert shadowed == plain
    assert [s["path"] for s in plain].count(["human"]) == 13
    stats = audit.stats
    assert stats.sampled == 27 and stats.queued <= 4 and stats.dropped == 27 - stats.queued
    teacher.block.set()
    assert audit.flush(timeout=30)
    assert audit.stats.audited == stats.queued
    audit.close()


def test_a_blocked_teacher_never_delays_an_async_run():
    teacher = blocking_teacher()
    audit = Audit(model=teacher, rate=1.0, queue_size=1)
    graph = _graph(Policy(take_at=0.8, fallbacks=[GotoNode("human")], audit=audit))
    plain = _graph(Policy(take_at=0.8, fallbacks=[GotoNode("human")]))

    async def run(g):
        return [_strip_latency(await g.ainvoke({"ticket": t})) for t in tickets(12)]

    assert asyncio.run(run(graph)) == asyncio.run(run(plain))
    assert not teacher.block.is_set() and audit.stats.dropped > 0
    teacher.block.set()
    assert audit.flush(timeout=30)


def test_a_failing_teacher_never_fails_a_run(caplog):
    records: list[dict] = []
    audit = Audit(model=Teacher(error="teacher is down"), rate=1.0, sink=records.append)
    policy = Policy(take_at=0.8, fallbacks=[GotoNode("human")], audit=audit)
    plain = _resolve_all(
        Resolver(engine(), QUESTIONS, Policy(take_at=0.8, fallbacks=[GotoNode("human")])),
        tickets(9),
    )
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        out = _resolve_all(Resolver(engine(), QUESTIONS, policy), tickets(9))
        assert audit.flush(timeout=30)
    assert [r["label"] for r in out] == [r["label"] for r in plain]
    assert records == [] and audit.stats.failed == 6 == audit.stats.sampled
    failures = [
        r for r in caplog.records if r.name == "agentbranch" and "teacher is down" in r.message
    ]
    assert len(failures) == 1  # rate-limited: the stats count all six


def test_a_teacher_answering_outside_the_options_is_logged_not_recorded(caplog):
    records: list[dict] = []
    audit = Audit(model=Teacher(rule=lambda p: "sales"), rate=1.0, sink=records.append)
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        Resolver(engine(), QUESTIONS, Policy(audit=audit)).resolve("refund please")
        assert audit.flush(timeout=30)
    assert records == [] and audit.stats.failed == 1
    assert any("names none of the allowed options" in r.message for r in caplog.records)


def test_a_failing_sink_is_logged_and_the_other_sinks_still_write(caplog, tmp_path):
    def broken(record: dict) -> None:
        raise OSError("disk full")

    audit = Audit(model=Teacher(), rate=1.0, sink=[broken, tmp_path / "a.jsonl"])
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        Resolver(engine(), QUESTIONS, Policy(audit=audit)).resolve("refund please")
        assert audit.flush(timeout=30)
    assert len(load_records(tmp_path / "a.jsonl")) == 1
    assert any("disk full" in r.message for r in caplog.records)


def test_queueing_errors_are_logged_not_raised(caplog):
    class BrokenRng:
        def random(self) -> float:
            raise RuntimeError("boom")

    audit = Audit(model=Teacher(), rate=1.0, rng=BrokenRng())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        rec = Resolver(engine(), QUESTIONS, Policy(audit=audit)).resolve("refund please")
    assert rec["team"]["label"] == "billing"
    assert any("boom" in r.message for r in caplog.records)


# -- fallback generations are labelled examples ---------------------------------------


def test_every_fallback_generation_is_kept_as_a_labelled_example():
    records: list[dict] = []
    model = StrictFakeChat(replies=['{"label": "billing"}', "outage"])
    audit = Audit(model=Teacher(), rate=0.0, sink=records.append)
    policy = Policy(take_at=0.8, fallbacks=[Generate(model)], audit=audit)
    resolver = Resolver(engine(), QUESTIONS, policy)
    out = _resolve_all(resolver, ["hmm one", "refund", "hmm two"])
    assert audit.flush(timeout=30)
    assert [r["decided_by"] for r in out] == ["fallback", "engine", "fallback"]
    assert [(r["kind"], r["teacher_label"], r["engine_label"], r["agree"]) for r in records] == [
        ("fallback", "billing", "outage", False),
        ("fallback", "outage", "outage", True),
    ]
    assert records[0]["probabilities"] == out[0]["probabilities"]
    assert records[0]["band"] == "fallback" and records[0]["rate"] == 1.0
    assert records[0]["teacher"] == "StrictFakeChat"
    assert audit.stats.fallback_examples == 2


def test_audit_without_a_model_asks_the_generate_fallback_model():
    records: list[dict] = []
    model = StrictFakeChat(replies=['{"label": "billing"}', '{"label": "outage"}'])
    audit = Audit(rate=1.0, sink=records.append, seed=0)
    policy = Policy(
        take_at=0.8, fallbacks=[Generate(model, instructions="ACME support")], audit=audit
    )
    resolver = Resolver(engine(), QUESTIONS, policy)
    resolver.resolve("refund please")  # taken: audited by the Generate model
    assert audit.flush(timeout=30)
    resolver.resolve("hmm what")  # fallback: answered by it, kept as an example
    assert audit.flush(timeout=30)
    assert [r["kind"] for r in records] == ["audit", "fallback"]
    # The teacher got the same prompt the fallback would have (same instructions).
    assert "ACME support" in model.prompts[0][0].content
    assert model.prompts[0][1].content.startswith("Input:\nrefund please")


# -- sinks and the decision log -------------------------------------------------------


def test_records_go_to_a_langgraph_store_and_to_the_decision_log(caplog):
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    audit = Audit(model=Teacher(agree_p=0.0), rate=1.0, sink=store)
    with caplog.at_level(logging.INFO, logger="agentbranch"):
        Resolver(engine(), QUESTIONS, Policy(audit=audit)).resolve("refund please")
        assert audit.flush(timeout=30)
    items = store.search(("agentbranch", "audits"))
    assert len(items) == 1 and items[0].value["teacher_label"] == "outage"
    assert items[0].key == items[0].value["id"]
    # The audit event is a stdlib record on the "agentbranch" logger, fields as attributes.
    events = [r for r in caplog.records if getattr(r, "event", None) == "agentbranch.audit"]
    assert len(events) == 1
    (rec,) = events
    assert rec.name == "agentbranch" and rec.levelno == logging.INFO
    assert rec.kind == "audit" and rec.engine_label == "billing" and rec.agree is False
    assert rec.teacher_label == "outage" and rec.question_id == items[0].value["question_id"]
    assert rec.getMessage().startswith("agentbranch.audit kind=audit")
    assert "engine_label=billing" in rec.getMessage()


def test_jsonl_sink_appends_valid_json_lines(tmp_path):
    path = tmp_path / "deep" / "audits.jsonl"
    audit = Audit(model=Teacher(), rate=1.0, sink=str(path))
    resolver = Resolver(engine(), QUESTIONS, Policy(audit=audit))
    _resolve_all(resolver, ["refund", "site down"])
    assert audit.flush(timeout=30)
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["kind"] == "audit" for line in lines)


def test_async_resolution_is_audited_too():
    records: list[dict] = []
    audit = Audit(model=Teacher(), rate=1.0, sink=records.append)
    resolver = Resolver(engine(), QUESTIONS, Policy(audit=audit))

    async def run():
        return [await resolver.aresolve(t) for t in ["refund", "site down"]]

    asyncio.run(run())
    assert audit.flush(timeout=30) and len(records) == 2


# -- known agreement → the report recovers it ------------------------------------------


@pytest.mark.parametrize("agree_p", [0.7, 0.85, 0.95])
def test_the_report_recovers_a_known_precision_inside_its_interval(agree_p, tmp_path):
    path = tmp_path / "audits.jsonl"
    audit = Audit(
        model=Teacher(agree_p=agree_p, seed=11), rate=0.5, seed=3, sink=path, queue_size=2000
    )
    resolver = Resolver(engine({"team": sure("billing")}), QUESTIONS, Policy(audit=audit))
    _resolve_all(resolver, tickets(1200))
    assert audit.flush(timeout=60)
    report = audit_report(load_records(path), level=0.95)
    band = report.questions["team"].take_band
    assert band.n == audit.stats.audited > 500
    assert band.low <= agree_p <= band.high
    assert band.high - band.low < 0.1
    assert abs(band.precision - agree_p) < 0.05


# -- replay: teacher calls served from a cache -----------------------------------------


def test_audits_replay_with_teacher_calls_served_from_the_cache():
    """langchain_core's InMemoryCache stands in for a cassette cache: both are a BaseCache
    attached to the model, which the teacher's normal ``invoke`` consults."""
    from langchain_core.caches import InMemoryCache

    cache = InMemoryCache()

    def rule(prompt: str) -> str:
        return '{"label": "outage"}' if "7" in prompt else '{"label": "billing"}'

    def run(teacher: Teacher) -> list[dict]:
        records: list[dict] = []
        audit = Audit(model=teacher, rate=0.5, seed=5, sink=records.append)
        policy = Policy(take_at=0.8, fallbacks=[GotoNode("human")], audit=audit)
        _resolve_all(Resolver(engine(), QUESTIONS, policy), tickets(60))
        assert audit.flush(timeout=30)
        return [{k: v for k, v in r.items() if k not in ("id", "time")} for r in records]

    recorded = Teacher(rule=rule, cache=cache)
    first = run(recorded)
    assert recorded.calls == len(first) > 10
    replayed = Teacher(error="the teacher must not be called under replay", cache=cache)
    second = run(replayed)
    assert replayed.calls == 0
    assert second == first
    assert {r["teacher_label"] for r in first} == {"billing", "outage"}


def test_concurrent_runs_share_one_audit_safely():
    records: list[dict] = []
    lock = threading.Lock()

    def sink(record: dict) -> None:
        with lock:
            records.append(record)

    audit = Audit(model=Teacher(), rate=1.0, sink=sink, queue_size=1000)
    resolver = Resolver(engine({"team": sure("billing")}), QUESTIONS, Policy(audit=audit))
    threads = [
        threading.Thread(target=_resolve_all, args=(resolver, tickets(50))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert audit.flush(timeout=30)
    assert len(records) == 200 == audit.stats.sampled


def test_calibrating_from_audits_of_a_run_moves_ece_on_the_teachers_labels_down(tmp_path):
    """An over-confident engine (0.90-0.99 on 'billing') and a teacher agreeing 70% of
    the time: the audits of a real run calibrate it."""
    from agentbranch.audit import calibrate_from_audit

    def team(state: str, q: Any) -> dict[str, float]:
        i = int(state.split()[1].rstrip(":"))
        return sure("billing", 0.90 + 0.01 * (i % 10))(state, q)

    path = tmp_path / "audits.jsonl"
    audit = Audit(model=Teacher(agree_p=0.7, seed=2), rate=1.0, sink=path, queue_size=1000)
    resolver = Resolver(engine({"team": team}), QUESTIONS, Policy(audit=audit))
    _resolve_all(resolver, tickets(500))
    assert audit.flush(timeout=60)
    report = calibrate_from_audit(path, holdout=0.3)
    assert report.held_out and report.n_eval >= 140
    assert report.before.ece > 0.15
    assert report.after.ece < report.before.ece / 2
    assert report.calibration.temperature("team", "choice") > 1.0


def test_audit_teacher_calls_record_and_replay_from_a_cassette(tmp_path):
    """The cassette's chat cache (agentbranch.replay) attached to the teacher: a recorded
    run's audits replay offline with a teacher that must not be called."""
    from agentbranch.replay import Cassette

    path = tmp_path / "audited.jsonl"

    def rule(prompt: str) -> str:
        return '{"label": "outage"}' if "7" in prompt else '{"label": "billing"}'

    def run(cassette: Cassette, teacher: Teacher) -> list[dict]:
        records: list[dict] = []
        teacher.cache = cassette.chat_cache  # as a user attaches it: cache=cassette.chat_cache
        audit = Audit(model=teacher, rate=0.5, seed=5, sink=records.append)
        policy = Policy(take_at=0.8, fallbacks=[GotoNode("human")], audit=audit)
        _resolve_all(Resolver(engine(), QUESTIONS, policy), tickets(60))
        assert audit.flush(timeout=30)
        cassette.close()
        return [{k: v for k, v in r.items() if k not in ("id", "time")} for r in records]

    recorded = Teacher(rule=rule)
    first = run(Cassette(path, "all"), recorded)
    assert recorded.calls == len(first) > 10
    replayed = Teacher(error="the teacher must not be called under replay")
    second = run(Cassette(path, "none"), replayed)
    assert replayed.calls == 0
    assert second == first
