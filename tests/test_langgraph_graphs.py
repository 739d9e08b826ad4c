"""LangGraph integration on scripted readers: routers, decide/Command nodes, bands,
fallbacks, review interrupt/resume, fail-open/closed, checkpoints, streams, fan-out."""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import sys
from typing import Annotated, Any, TypedDict

import pytest
from _lg_fixtures import StrictFakeChat, by_keyword, fan_out, sure, unsure
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from pydantic import ValidationError

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError, FallbackError, ReaderError
from agentbranch.engine.batching import BatchingReader
from agentbranch.langgraph import DecisionRecords, command_node, decide_node, route
from agentbranch.policy import FailClosed, FailOpen, Generate, GotoNode, Policy

URGENT = ab.yes_no("Does this need a response within the hour?")
TEAM = ab.choice("Which team?", {"billing": "money", "outage": "down", "bug": "broken"})
MOOD = ab.score("How frustrated?", ["calm", "annoyed", "angry"])


class S(TypedDict, total=False):
    text: str
    decisions: DecisionRecords
    out: str
    team: str
    urgent: str


def mark(name: str):
    return lambda state: {"out": name}


def engine(script=None, **kw):
    reader = ab.ScriptedReader(script or {}, **kw)
    return ab.DecisionEngine(reader), reader


def thread(i: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": i}}


# -- routers ----------------------------------------------------------------------------


def router_graph(router, nodes=("page", "queue")):
    g = StateGraph(S)
    g.add_node("intake", lambda s: {})
    for n in nodes:
        g.add_node(n, mark(n))
    g.add_edge(START, "intake")
    g.add_conditional_edges("intake", router, router.path_map)
    return g


def test_path_map_must_cover_every_option():
    eng, _ = engine()
    with pytest.raises(ConfigurationError, match=r"Missing options: \['no'\]"):
        route(eng, "urgent", URGENT, path_map={"yes": "page"})
    with pytest.raises(ConfigurationError, match=r"Not options of this question: \['maybe'\]"):
        route(eng, "urgent", URGENT, path_map={"yes": "page", "no": "queue", "maybe": "x"})


def test_unknown_node_fails_at_compile_time():
    eng, _ = engine()
    router = route(eng, "urgent", URGENT, path_map={"yes": "page", "no": "nowhere"})
    with pytest.raises(ValueError, match="nowhere"):
        router_graph(router).compile()


def test_router_branches_sync_and_async_with_end():
    eng, reader = engine({"urgent": by_keyword({"down": sure("yes")}, sure("no"))})
    router = route(eng, "urgent", URGENT, path_map={"yes": "page", "no": END}, state_key="text")
    assert router.path_map == {"page": "page", END: END}
    app = router_graph(router, nodes=("page",)).compile()
    assert app.invoke({"text": "site down"})["out"] == "page"
    assert "out" not in app.invoke({"text": "feature idea"})
    assert asyncio.run(app.ainvoke({"text": "site down"}))["out"] == "page"
    assert [r.state for batch in reader.calls for r in batch] == [
        "site down",
        "feature idea",
        "site down",
    ]


def test_router_identity_path_map():
    eng, _ = engine({"team": sure("outage")})
    router = route(eng, "team", TEAM)
    assert set(router.path_map) == {"billing", "outage", "bug"}
    app = router_graph(router, nodes=("billing", "outage", "bug")).compile()
    assert app.invoke({"text": "x"})["out"] == "outage"


def test_router_rejects_review_policies():
    eng, _ = engine()
    with pytest.raises(ConfigurationError, match="review band"):
        route(eng, "urgent", URGENT, policy=Policy(take_at=0.8, review_below=0.8))


def test_router_fallback_node_and_fail_closed_targets_are_in_path_map():
    eng, _ = engine({"urgent": unsure("yes")})
    policy = Policy(take_at=0.8, fallbacks=[GotoNode("human")], on_error=FailClosed("safe"))
    router = route(eng, "urgent", URGENT, path_map={"yes": "page", "no": "queue"}, policy=policy)
    assert set(router.path_map) == {"page", "queue", "human", "safe"}
    app = router_graph(router, nodes=("page", "queue", "human", "safe")).compile()
    assert app.invoke({"text": "x"})["out"] == "human"


@pytest.mark.parametrize("use_async", [False, True])
def test_router_fail_open_and_closed(use_async):
    eng, _ = engine(error=RuntimeError("reader down"))
    nodes = ("page", "queue", "safe")

    def urgent_route(**policy):
        return route(eng, "urgent", URGENT, path_map={"yes": "page", "no": "queue"}, **policy)

    opened = urgent_route(policy=Policy(on_error=FailOpen("yes")))
    closed = urgent_route(policy=Policy(on_error=FailClosed("safe")))
    raising = urgent_route()

    def run(router):
        app = router_graph(router, nodes=nodes).compile()
        if use_async:
            return asyncio.run(app.ainvoke({"text": "x"}))
        return app.invoke({"text": "x"})

    assert run(opened)["out"] == "page"
    assert run(closed)["out"] == "safe"
    with pytest.raises(ReaderError, match="reader down"):
        run(raising)


# -- decide nodes -----------------------------------------------------------------------


def decide_graph(node, question_id="urgent", path_map=None, nodes=("page", "queue"), **compile_kw):
    g = StateGraph(S)
    g.add_node("decide", node)
    for n in nodes:
        g.add_node(n, mark(n))
    g.add_edge(START, "decide")
    edge = node.router(question_id, path_map)
    g.add_conditional_edges("decide", edge, edge.path_map)
    return g.compile(**compile_kw)


def test_decide_node_asks_all_questions_in_one_engine_call():
    eng, reader = engine({"urgent": sure("yes"), "team": sure("billing"), "mood": sure("angry")})
    node = decide_node(
        eng,
        {"urgent": URGENT, "team": TEAM, "mood": MOOD},
        state_key="text",
        write_labels={"team": "team", "urgent": "urgent"},
    )
    app = decide_graph(node, path_map={"yes": "page", "no": "queue"})
    state = app.invoke({"text": "charged twice, pay me back NOW"})
    assert len(reader.calls) == 1 and len(reader.calls[0]) == 1
    assert [q.id for q in reader.calls[0][0].questions] == ["urgent", "team", "mood"]
    assert state["out"] == "page"
    assert (state["team"], state["urgent"]) == ("billing", "yes")
    recs = state["decisions"]
    assert set(recs) == {"urgent", "team", "mood"}
    for rec in recs.values():
        assert rec["band"] == "take" and rec["decided_by"] == "engine"
        for field in (
            "question",
            "label",
            "probabilities",
            "entropy",
            "confidence",
            "reader",
            "model",
            "latency_s",
            "label_mass",
        ):
            assert field in rec
    assert recs["mood"]["label"] == "angry" and recs["mood"]["question"] == "How frustrated?"


def test_decide_node_record_is_plain_data():
    eng, _ = engine({"urgent": sure("yes")})
    node = decide_node(eng, {"urgent": URGENT})
    app = decide_graph(node, path_map={"yes": "page", "no": "queue"})
    rec = app.invoke({"text": "x"})["decisions"]["urgent"]
    import json

    assert json.loads(json.dumps(rec)) == rec


def test_record_router_requires_the_record():
    eng, _ = engine()
    node = decide_node(eng, {"urgent": URGENT})
    edge = node.router("urgent", {"yes": "page", "no": "queue"})
    with pytest.raises(ab.AgentBranchError, match="no decision record"):
        edge.invoke({"text": "x"})
    with pytest.raises(ConfigurationError, match="does not ask"):
        node.router("team")


def test_default_renderer_excludes_records_and_reads_the_state():
    eng, reader = engine({"urgent": sure("no")})
    node = decide_node(eng, {"urgent": URGENT})
    app = decide_graph(node, path_map={"yes": "page", "no": "queue"})
    app.invoke({"text": "hello", "decisions": {"old": {"label": "x"}}})
    seen = reader.calls[0][0].state
    assert "hello" in seen and "old" not in seen


# -- bands in graphs ---------------------------------------------------------------------


TICKETS = {
    "charged twice": "billing",
    "site down": "outage",
    "export broken": "bug",
}


def triage_engine():
    return engine(
        {
            "team": by_keyword(
                {"charged": sure("billing"), "down": sure("outage")}, default=unsure("bug")
            )
        }
    )


def _triage_graph(model):
    """A graph routing ``team`` on the triage engine, taken at 0.6, else ``model``'s."""
    eng, _ = triage_engine()
    policy = Policy(take_at=0.6, fallbacks=[Generate(model)])
    node = decide_node(eng, {"team": TEAM}, state_key="text", policy=policy)
    return decide_graph(node, "team", nodes=("billing", "outage", "bug"))


@pytest.mark.parametrize("use_async", [False, True])
def test_fallback_model_is_called_only_below_threshold(use_async):
    model = StrictFakeChat(replies=['{"label": "bug"}'])  # exactly one uncertain ticket
    app = _triage_graph(model)
    results = {}
    for text in TICKETS:
        state = (
            asyncio.run(app.ainvoke({"text": text})) if use_async else app.invoke({"text": text})
        )
        results[text] = (
            state["out"],
            state["decisions"]["team"]["decided_by"],
            state["decisions"]["team"]["band"],
        )
    assert results == {
        "charged twice": ("billing", "engine", "take"),
        "site down": ("outage", "engine", "take"),
        "export broken": ("bug", "fallback", "fallback"),
    }
    assert model.calls == 1


def test_invalid_fallback_output_fails_the_run():
    model = StrictFakeChat(replies=['{"label": "sales"}'])
    app = _triage_graph(model)
    with pytest.raises(FallbackError, match="sales"):
        app.invoke({"text": "export broken"})


def test_fallback_node_from_a_decide_node():
    eng, _ = triage_engine()
    node = decide_node(
        eng,
        {"team": TEAM},
        state_key="text",
        policy=Policy(take_at=0.6, fallbacks=[GotoNode("human_triage")]),
    )
    app = decide_graph(node, "team", nodes=("billing", "outage", "bug", "human_triage"))
    state = app.invoke({"text": "export broken"})
    assert state["out"] == "human_triage"
    rec = state["decisions"]["team"]
    assert (rec["band"], rec["decided_by"], rec["goto"]) == (
        "fallback",
        "fallback_node",
        "human_triage",
    )
    assert app.invoke({"text": "site down"})["out"] == "outage"


REVIEW = Policy(take_at=0.6, review_below=0.6)


@pytest.mark.parametrize("use_async", [False, True])
def test_review_interrupt_and_resume(use_async):
    eng, reader = triage_engine()
    node = decide_node(eng, {"team": TEAM}, state_key="text", policy=REVIEW)
    app = decide_graph(
        node, "team", nodes=("billing", "outage", "bug"), checkpointer=InMemorySaver()
    )

    def run(inp, cfg):
        return asyncio.run(app.ainvoke(inp, cfg)) if use_async else app.invoke(inp, cfg)

    # a confident ticket does not stop
    assert run({"text": "site down"}, thread("a"))["out"] == "outage"
    # an uncertain one asks a human with the options as the allowed answers
    out = run({"text": "export broken"}, thread("b"))
    (intr,) = out["__interrupt__"]
    assert intr.value["options"] == ["billing", "outage", "bug"]
    assert intr.value["question_id"] == "team"
    assert "export broken" not in str(intr.value)  # no raw state
    assert intr.response_schema == {"enum": ["billing", "outage", "bug"], "type": "string"}
    state = run(Command(resume="billing"), thread("b"))
    assert state["out"] == "billing"
    rec = state["decisions"]["team"]
    assert (rec["label"], rec["band"], rec["decided_by"]) == ("billing", "review", "human")
    assert rec["engine_label"] == "bug"


def test_invalid_review_answer_is_rejected_and_can_be_answered_again():
    eng, _ = triage_engine()
    node = decide_node(eng, {"team": TEAM}, state_key="text", policy=REVIEW)
    app = decide_graph(
        node, "team", nodes=("billing", "outage", "bug"), checkpointer=InMemorySaver()
    )
    app.invoke({"text": "export broken"}, thread())
    with pytest.raises(ValidationError):
        app.invoke(Command(resume="sales"), thread())
    assert app.invoke(Command(resume="outage"), thread())["out"] == "outage"


def test_review_record_survives_sqlite_checkpoints(tmp_path):
    db = tmp_path / "cp.sqlite"

    def build(conn):
        eng, _ = triage_engine()
        node = decide_node(eng, {"team": TEAM}, state_key="text", policy=REVIEW)
        return decide_graph(
            node, "team", nodes=("billing", "outage", "bug"), checkpointer=SqliteSaver(conn)
        )

    conn = sqlite3.connect(db, check_same_thread=False)
    out = build(conn).invoke({"text": "export broken"}, thread("s"))
    assert "__interrupt__" in out
    conn.close()
    # a new process (new graph, new connection) resumes from the file
    conn = sqlite3.connect(db, check_same_thread=False)
    app = build(conn)
    state = app.invoke(Command(resume="bug"), thread("s"))
    assert state["decisions"]["team"]["decided_by"] == "human"
    snap = app.get_state(thread("s"))
    assert snap.values["decisions"]["team"]["label"] == "bug"
    assert isinstance(snap.values["decisions"]["team"], dict)
    conn.close()


def test_record_survives_inmemory_checkpoint_and_replay_keeps_it():
    eng, reader = triage_engine()
    node = decide_node(eng, {"team": TEAM}, state_key="text")
    saver = InMemorySaver()
    app = decide_graph(node, "team", nodes=("billing", "outage", "bug"), checkpointer=saver)
    app.invoke({"text": "site down"}, thread("m"))
    snap = app.get_state(thread("m"))
    assert snap.values["decisions"]["team"]["label"] == "outage"
    assert snap.values["decisions"]["team"]["band"] == "take"


# -- Command nodes ----------------------------------------------------------------------


def command_graph(node, nodes, **compile_kw):
    g = StateGraph(S)
    g.add_node("gate", node, destinations=node.destinations)
    for n in nodes:
        g.add_node(n, mark(n))
    g.add_edge(START, "gate")
    return g.compile(**compile_kw)


@pytest.mark.parametrize("use_async", [False, True])
def test_command_node_routes_and_records(use_async):
    eng, _ = engine({"urgent": by_keyword({"down": sure("yes")}, sure("no"))})
    node = command_node(
        eng,
        "urgent",
        URGENT,
        path_map={"yes": "page", "no": END},
        state_key="text",
        write_label="urgent",
    )
    assert node.destinations == ("page", END)
    app = command_graph(node, ("page",))
    run = (lambda i: asyncio.run(app.ainvoke(i))) if use_async else app.invoke
    state = run({"text": "site down"})
    assert state["out"] == "page" and state["urgent"] == "yes"
    assert state["decisions"]["urgent"]["decided_by"] == "engine"
    state = run({"text": "an idea"})
    assert "out" not in state and state["decisions"]["urgent"]["label"] == "no"


def test_command_node_review_and_fail_closed():
    eng, _ = engine({"urgent": unsure("yes")})
    node = command_node(
        eng,
        "urgent",
        URGENT,
        path_map={"yes": "page", "no": "queue"},
        policy=Policy(take_at=0.9, review_below=0.9, on_error=FailClosed("safe")),
    )
    assert set(node.destinations) == {"page", "queue", "safe"}
    app = command_graph(node, ("page", "queue", "safe"), checkpointer=InMemorySaver())
    assert "__interrupt__" in app.invoke({"text": "x"}, thread())
    state = app.invoke(Command(resume="no"), thread())
    assert state["out"] == "queue" and state["decisions"]["urgent"]["decided_by"] == "human"

    broken, _ = engine(error=RuntimeError("gone"))
    node = command_node(
        broken,
        "urgent",
        URGENT,
        path_map={"yes": "page", "no": "queue"},
        policy=Policy(on_error=FailClosed("safe")),
    )
    state = command_graph(node, ("page", "queue", "safe")).invoke({"text": "x"})
    assert state["out"] == "safe"
    assert state["decisions"]["urgent"]["decided_by"] == "fail_closed"


# -- observability ----------------------------------------------------------------------


def test_records_reach_the_custom_stream_without_state():
    eng, _ = engine({"urgent": sure("yes")})
    node = decide_node(eng, {"urgent": URGENT}, state_key="text")
    app = decide_graph(node, path_map={"yes": "page", "no": "queue"})
    chunks = list(app.stream({"text": "secret ticket body"}, stream_mode="custom"))
    assert len(chunks) == 1
    payload = chunks[0]["agentbranch.decision"]
    assert payload["question_id"] == "urgent" and payload["band"] == "take"
    assert "secret ticket body" not in str(payload)

    node = decide_node(eng, {"urgent": URGENT}, state_key="text", include_state=True)
    app = decide_graph(node, path_map={"yes": "page", "no": "queue"})
    (chunk,) = app.stream({"text": "secret ticket body"}, stream_mode="custom")
    assert chunk["agentbranch.decision"]["state"] == "secret ticket body"


class Events(BaseCallbackHandler):
    def __init__(self):
        self.events = []

    def on_custom_event(self, name, data, **kw):
        self.events.append((name, data))


@pytest.mark.parametrize("use_async", [False, True])
def test_records_reach_langchain_callbacks(use_async):
    eng, _ = engine({"urgent": sure("no"), "team": sure("bug")})
    node = decide_node(eng, {"urgent": URGENT, "team": TEAM}, state_key="text")
    app = decide_graph(node, path_map={"yes": "page", "no": "queue"})
    handler = Events()
    cfg = {"callbacks": [handler]}
    if use_async:
        asyncio.run(app.ainvoke({"text": "x"}, cfg))
    else:
        app.invoke({"text": "x"}, cfg)
    assert [(n, d["question_id"]) for n, d in handler.events] == [
        ("agentbranch.decision", "urgent"),
        ("agentbranch.decision", "team"),
    ]


class Runs(BaseCallbackHandler):
    def __init__(self):
        self.names = []

    def on_chain_start(self, serialized, inputs, **kw):
        self.names.append(kw.get("name"))


@pytest.mark.parametrize("use_async", [False, True])
def test_node_traces_its_own_run_only_when_a_handler_watches(use_async, monkeypatch):
    # Unwatched, the node skips RunnableLambda's callback run (nobody could see it);
    # watched, the run is there as before, and both give the same records.
    eng, _ = engine({"urgent": sure("no"), "team": sure("bug")})
    node = decide_node(eng, {"urgent": URGENT, "team": TEAM}, state_key="text", name="triage")
    app = decide_graph(node, path_map={"yes": "page", "no": "queue"})
    runs = Runs()

    def run(cfg):
        inp = {"text": "x"}
        return asyncio.run(app.ainvoke(inp, cfg)) if use_async else app.invoke(inp, cfg)

    traced = []
    for method in ("invoke", "ainvoke"):
        original = getattr(RunnableLambda, method)

        def spy(self, *a, _original=original, **k):
            if self is node:
                traced.append(self.name)
            return _original(self, *a, **k)

        monkeypatch.setattr(RunnableLambda, method, spy)
    plain = run({})
    assert traced == []
    watched = run({"callbacks": [runs]})
    assert traced == ["triage"] and "triage" in runs.names
    assert plain["decisions"].keys() == watched["decisions"].keys() == {"urgent", "team"}
    for qid in ("urgent", "team"):
        for field in ("label", "probabilities", "band", "decided_by"):
            assert plain["decisions"][qid][field] == watched["decisions"][qid][field]


# -- fan-out ----------------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
def test_an_unwatched_node_looks_for_callback_handlers_once(use_async, monkeypatch):
    # The node's fast path has just found no handler: emitting its records does not
    # build the callback manager again. Watched, the records still reach the handler,
    # and the caller's config is never changed.
    import langchain_core.runnables.config as lc_config

    looked_from: list[str] = []
    for name in ("get_callback_manager_for_config", "get_async_callback_manager_for_config"):
        original = getattr(lc_config, name)

        def spy(*a, _original=original, **k):
            looked_from.append(sys._getframe(1).f_code.co_filename)
            return _original(*a, **k)

        monkeypatch.setattr(lc_config, name, spy)
    eng, _ = engine({"urgent": sure("no")})
    node = decide_node(eng, {"urgent": URGENT}, state_key="text")
    app = decide_graph(node, path_map={"yes": "page", "no": "queue"})

    def run(cfg):
        inp = {"text": "x"}
        return asyncio.run(app.ainvoke(inp, cfg)) if use_async else app.invoke(inp, cfg)

    plain_cfg: dict[str, Any] = {"configurable": {}}
    plain = run(plain_cfg)
    assert plain_cfg == {"configurable": {}}
    assert not [f for f in looked_from if f.endswith("observability.py")]
    handler = Events()
    watched = run({"callbacks": [handler]})
    assert [f for f in looked_from if f.endswith("observability.py")]
    assert [d["question_id"] for _, d in handler.events] == ["urgent"]
    assert plain["decisions"]["urgent"]["label"] == watched["decisions"]["urgent"]["label"]


class FanState(TypedDict, total=False):
    tickets: list[str]
    results: Annotated[list[dict[str, Any]], operator.add]


class Branch(TypedDict):
    ticket: str


def fan_out_graph(eng, *, use_async: bool):
    node = decide_node(
        eng,
        {"team": TEAM, "urgent": URGENT},
        state_key="ticket",
        output=lambda state, recs: {
            "results": [{"ticket": state["ticket"], **{k: r["label"] for k, r in recs.items()}}]
        },
    )
    return fan_out(FanState, node)


@pytest.mark.parametrize("use_async", [False, True])
def test_send_fan_out_reaches_the_reader_as_one_batch(use_async):
    tickets = ["charged twice", "site down", "export broken", "charged again"]
    inner = ab.ScriptedReader(
        {
            "team": by_keyword({"charged": sure("billing"), "down": sure("outage")}, sure("bug")),
            "urgent": by_keyword({"down": sure("yes")}, sure("no")),
        }
    )
    eng = ab.DecisionEngine(BatchingReader(inner, max_wait_s=10, max_batch=len(tickets)))
    app = fan_out_graph(eng, use_async=use_async)
    inp = {"tickets": tickets}
    state = asyncio.run(app.ainvoke(inp)) if use_async else app.invoke(inp)
    got = {r["ticket"]: (r["team"], r["urgent"]) for r in state["results"]}
    assert got == {
        "charged twice": ("billing", "no"),
        "site down": ("outage", "yes"),
        "export broken": ("bug", "no"),
        "charged again": ("billing", "no"),
    }
    assert len(inner.calls) == 1
    assert sorted(r.state for r in inner.calls[0]) == sorted(tickets)
