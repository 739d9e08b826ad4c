"""The LangGraph integration on the real transformers reader (tiny random DiffusionGemma).

The tiny model's answers are random but deterministic, so each test first measures the
confidence the model gives and then sets thresholds around it: every band is reached on
real reads, and a repeated read (replay, resume) must give the same record.
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from _lg_fixtures import StrictFakeChat, fan_out
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command  # noqa: E402

import agentbranch as ab  # noqa: E402
from agentbranch.core.errors import ReaderError  # noqa: E402
from agentbranch.core.reads import LabelRead, ReadRequest  # noqa: E402
from agentbranch.engine.batching import BatchingReader  # noqa: E402
from agentbranch.engine.readers.base import Reader  # noqa: E402
from agentbranch.langgraph import DecisionRecords, command_node, decide_node  # noqa: E402
from agentbranch.policy import FailClosed, FailOpen, Generate, Policy  # noqa: E402

TEAM = ab.choice(
    "Which team should handle this ticket?",
    {"billing": "Invoices and payments", "outage": "Service down", "bug": "Something broken"},
)
URGENT = ab.yes_no("Does this need a response within the hour?")
MOOD = ab.score("How frustrated is the customer?", ["calm", "annoyed", "angry", "furious"])
TICKET = "I was charged twice this month and nobody answers my emails."


class Spy(Reader):
    """Delegates to the real reader; records batch sizes; can be told to fail."""

    def __init__(self, inner: Reader) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.max_options = inner.max_options
        self.batches: list[int] = []
        self.fail = False
        self._lock = threading.Lock()

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        with self._lock:
            self.batches.append(len(requests))
        if self.fail:
            raise RuntimeError("model server gone")
        return self.inner.read(requests)


@pytest.fixture(scope="module")
def real(tiny_model_dir: Path) -> Reader:  # noqa: F811
    return ab.TransformersReader.from_pretrained(tiny_model_dir)


@pytest.fixture
def spy(real: Reader) -> Spy:
    return Spy(real)


class S(TypedDict, total=False):
    text: str
    decisions: DecisionRecords
    out: str


def mark(name: str):
    return lambda state: {"out": name}


def team_graph(node, **compile_kw):
    g = StateGraph(S)
    g.add_node("decide", node)
    for n in ("billing", "outage", "bug", "human"):
        g.add_node(n, mark(n))
    g.add_edge(START, "decide")
    edge = node.router("team")
    g.add_conditional_edges("decide", edge, edge.path_map)
    return g.compile(**compile_kw)


def measured(spy: Spy) -> Any:
    d = ab.DecisionEngine(spy).decide(TICKET, {"team": TEAM})["team"]
    assert 0.0 < d.confidence < 1.0
    assert abs(sum(d.probabilities.values()) - 1.0) < 1e-6
    return d


def test_reads_are_deterministic(spy):
    a, b = measured(spy), measured(spy)
    assert a.probabilities == b.probabilities and a.label == b.label


def test_take_band_on_real_reads(spy):
    d = measured(spy)
    model = StrictFakeChat(replies=[])
    node = decide_node(
        ab.DecisionEngine(spy),
        {"team": TEAM},
        state_key="text",
        policy=Policy(take_at=d.confidence * 0.5, fallbacks=[Generate(model)]),
    )
    state = team_graph(node).invoke({"text": TICKET})
    rec = state["decisions"]["team"]
    assert (rec["band"], rec["decided_by"], rec["label"]) == ("take", "engine", d.label)
    assert state["out"] == d.label
    assert rec["reader"] == spy.name and rec["model"] == spy.model
    assert model.calls == 0


@pytest.mark.parametrize("use_async", [False, True])
def test_fallback_band_calls_the_model_once(spy, use_async):
    d = measured(spy)
    other = next(o for o in ("billing", "outage", "bug") if o != d.label)
    model = StrictFakeChat(replies=[f'{{"label": "{other}"}}'])
    policy = Policy(take_at=min(1.0, d.confidence + 1e-3), fallbacks=[Generate(model)])
    app = team_graph(
        decide_node(ab.DecisionEngine(spy), {"team": TEAM}, state_key="text", policy=policy)
    )
    inp = {"text": TICKET}
    state = asyncio.run(app.ainvoke(inp)) if use_async else app.invoke(inp)
    rec = state["decisions"]["team"]
    assert (rec["band"], rec["decided_by"], rec["label"]) == ("fallback", "fallback", other)
    assert rec["engine_label"] == d.label and state["out"] == other
    assert model.calls == 1


def test_invalid_fallback_rejected_on_real_reads(spy):
    d = measured(spy)
    model = StrictFakeChat(replies=["marketing"])
    policy = Policy(take_at=min(1.0, d.confidence + 1e-3), fallbacks=[Generate(model)])
    app = team_graph(
        decide_node(ab.DecisionEngine(spy), {"team": TEAM}, state_key="text", policy=policy)
    )
    with pytest.raises(ab.AgentBranchError, match="marketing"):
        app.invoke({"text": TICKET})


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
def test_review_interrupt_resume_and_record_survives(spy, tmp_path, saver):
    d = measured(spy)
    policy = Policy(
        take_at=min(1.0, d.confidence + 1e-3), review_below=min(1.0, d.confidence + 1e-3)
    )
    conn = sqlite3.connect(tmp_path / "cp.sqlite", check_same_thread=False)
    checkpointer = InMemorySaver() if saver == "memory" else SqliteSaver(conn)
    app = team_graph(
        decide_node(ab.DecisionEngine(spy), {"team": TEAM}, state_key="text", policy=policy),
        checkpointer=checkpointer,
    )
    cfg = {"configurable": {"thread_id": "r"}}
    out = app.invoke({"text": TICKET}, cfg)
    (intr,) = out["__interrupt__"]
    assert intr.value["suggested"] == d.label
    assert intr.value["probabilities"] == d.probabilities
    state = app.invoke(Command(resume="outage"), cfg)
    rec = state["decisions"]["team"]
    assert (rec["label"], rec["band"], rec["decided_by"]) == ("outage", "review", "human")
    assert rec["probabilities"] == d.probabilities  # the resumed read is the same read
    assert state["out"] == "outage"
    assert app.get_state(cfg).values["decisions"]["team"] == rec
    conn.close()


def test_one_read_for_three_questions_and_command_node(spy):
    node = decide_node(
        ab.DecisionEngine(spy), {"team": TEAM, "urgent": URGENT, "mood": MOOD}, state_key="text"
    )
    state = team_graph(node).invoke({"text": TICKET})
    assert spy.batches == [1]
    recs = state["decisions"]
    assert set(recs) == {"team", "urgent", "mood"}
    assert recs["mood"]["label"] in ["calm", "annoyed", "angry", "furious"]
    assert recs["urgent"]["label"] in ["yes", "no"]

    gate = command_node(
        ab.DecisionEngine(spy),
        "urgent",
        URGENT,
        path_map={"yes": "page", "no": END},
        state_key="text",
    )
    g = StateGraph(S)
    g.add_node("gate", gate, destinations=gate.destinations)
    g.add_node("page", mark("page"))
    g.add_edge(START, "gate")
    state = asyncio.run(g.compile().ainvoke({"text": TICKET}))
    assert state["decisions"]["urgent"]["label"] == recs["urgent"]["label"]
    assert (state.get("out") == "page") == (recs["urgent"]["label"] == "yes")


def test_fail_open_and_closed_on_reader_failure(spy):
    spy.fail = True

    def graph_on_spy(**policy):
        return team_graph(
            decide_node(ab.DecisionEngine(spy), {"team": TEAM}, state_key="text", **policy)
        )

    raising = graph_on_spy()
    with pytest.raises(ReaderError, match="model server gone"):
        raising.invoke({"text": TICKET})
    opened = graph_on_spy(policy=Policy(on_error=FailOpen("bug")))
    state = opened.invoke({"text": TICKET})
    assert state["out"] == "bug" and state["decisions"]["team"]["decided_by"] == "fail_open"
    closed = graph_on_spy(policy=Policy(on_error=FailClosed("human")))
    state = closed.invoke({"text": TICKET})
    assert state["out"] == "human" and state["decisions"]["team"]["decided_by"] == "fail_closed"


class Fan(TypedDict, total=False):
    tickets: list[str]
    results: Annotated[list[dict[str, Any]], operator.add]


@pytest.mark.parametrize("use_async", [False, True])
def test_send_fan_out_is_one_batch_on_the_real_reader(spy, use_async):
    tickets = [TICKET, "The site is down!", "Export is broken.", "Refund please."]
    engine = ab.DecisionEngine(BatchingReader(spy, max_wait_s=10, max_batch=len(tickets)))
    node = decide_node(
        engine,
        {"team": TEAM, "urgent": URGENT},
        state_key="ticket",
        output=lambda s, recs: {"results": [{"ticket": s["ticket"], **recs}]},
    )
    app = fan_out(Fan, node)
    inp = {"tickets": tickets}
    state = asyncio.run(app.ainvoke(inp)) if use_async else app.invoke(inp)
    assert spy.batches == [len(tickets)]
    # each branch got its own ticket's read: same as reading it alone
    alone = ab.DecisionEngine(spy).decide(TICKET, {"team": TEAM})["team"]
    mine = next(r for r in state["results"] if r["ticket"] == TICKET)
    assert mine["team"]["label"] == alone.label
    for k, p in alone.probabilities.items():
        assert mine["team"]["probabilities"][k] == pytest.approx(p, abs=1e-4)
