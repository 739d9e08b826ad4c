"""``decide_first``: the engine in front of a router a LangGraph graph already has.

The router is an LLM classifier (a fake chat model from langchain-core whose answer the
router parses). Shadow mode leaves the graph's routes as they were and reports what the
engine would have taken; live mode takes what the engine is sure of and calls the router
for the rest; the router's answers are the teacher labels an ``Earned`` threshold is
earned on (on the embedded CPU reader), so going live needs no relabelling.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypedDict

import pytest
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

import agentbranch as ab
from agentbranch.langgraph import DecideFirst, decide_first
from agentbranch.replay import Cassette, ReplayMissError
from agentbranch.testing import FaultyReader

Team = Literal["billing", "outage", "account_access"]
TEAMS = {
    "billing": "Invoices, charges, refunds, payment methods and plans",
    "outage": "The service or a feature is down or failing for the customer right now",
    "account_access": "Login, password, two-factor, locked or compromised accounts",
}
LABELLED = Path(__file__).resolve().parents[1] / "src/agentbranch/demo/labelled_tickets.jsonl"


class State(TypedDict, total=False):
    ticket: str
    queue: str


def parse_team(reply: BaseMessage) -> str:
    """How an application reads its LLM router's answer."""
    return json.loads(str(reply.content))["team"]


def build_graph(router: Any) -> Any:
    graph = StateGraph(State)
    graph.add_node("intake", lambda state: {})
    for team in TEAMS:
        graph.add_node(team, lambda state, team=team: {"queue": team})
        graph.add_edge(team, END)
    graph.add_edge(START, "intake")
    graph.add_conditional_edges("intake", router)
    return graph.compile()


def scripted_engine(sure: dict[str, str], question_id: str = "route_ticket") -> ab.DecisionEngine:
    """Sure (confidence about 0.95) of the team of tickets holding a word of ``sure``,
    not sure of any other."""

    def read(state: str, question: Any) -> dict[str, float]:
        for word, team in sure.items():
            if word in state:
                return {t: (0.995 if t == team else 0.0025) for t in TEAMS}
        return {t: 1 / 3 for t in TEAMS}

    return ab.DecisionEngine(reader=ab.ScriptedReader({question_id: read}))


TICKETS = [
    "I was charged twice this month",
    "The dashboard is down for everyone",
    "I cannot log in since the password reset",
    "Please refund the duplicate charge",
    "Checkout fails with a 500 error",
    "Where is my invoice?",
]
ANSWERS = ["billing", "outage", "account_access", "billing", "outage", "billing"]


def fake_llm() -> GenericFakeChatModel:
    return GenericFakeChatModel(
        messages=iter([AIMessage(json.dumps({"team": t})) for t in ANSWERS])
    )


# -- shadow mode: the graph's routes do not change ---------------------------------------


def test_shadow_mode_leaves_every_route_as_the_router_chose_and_reports_the_engine():
    def llm_router(llm: Any) -> Any:
        def route_ticket(state: State) -> Team:
            """Which team should handle this support ticket?"""
            return parse_team(llm.invoke([HumanMessage(f"Route: {state['ticket']}")]))

        return route_ticket

    before = build_graph(llm_router(fake_llm()))
    routes_before = [before.invoke({"ticket": t})["queue"] for t in TICKETS]

    # The engine is sure of "charge" tickets (billing) and, wrongly, that "log in" is
    # an outage: shadow mode must keep the router's answer for both.
    engine = scripted_engine({"charge": "billing", "log in": "outage"})
    router = llm_router(fake_llm())
    wrapped = decide_first(router, engine=engine, take_at=0.9, price_per_call=0.002)
    after = build_graph(wrapped)
    routes_after = [after.invoke({"ticket": t})["queue"] for t in TICKETS]

    assert routes_after == routes_before == ANSWERS
    report = wrapped.report()
    assert report.mode == "shadow"
    assert (report.decisions, report.router_calls) == (6, 6)  # the router always decides
    assert report.taken == 3  # two "charge" tickets and the "log in" one
    assert (report.taken_agreed, report.taken_compared) == (2, 3)  # the log-in take is wrong
    # unsure reads pick the first option (billing): the invoice ticket agrees by chance
    assert (report.agreed, report.compared) == (3, 6)
    assert report.calls_saved == pytest.approx(3 * 0.95)  # live would still audit 5 %
    assert report.money_saved == pytest.approx(3 * 0.95 * 0.002)
    text = str(report)
    assert "would have taken without the router: 3/6 (50%)" in text
    assert "right on 2/3 (67%) checked" in text
    assert "engine agreed with the router: 3/6 (50%)" in text
    assert "router calls live mode would save: 2.85" in text
    assert "threshold in force now: take_at 0.90 (fixed)" in text


def test_the_decorator_form_keeps_the_literal_for_langgraph():
    engine = scripted_engine({"charge": "billing"})

    @decide_first(engine=engine, take_at=0.9, mode="live", audit_rate=0.0)
    def route_ticket(state: State) -> Team:
        """Which team should handle this support ticket?"""
        return "outage"

    assert isinstance(route_ticket, DecideFirst)
    assert route_ticket.options == ["billing", "outage", "account_access"]
    graph = build_graph(route_ticket)
    # LangGraph read the branches from the kept Literal: all three are drawn.
    edges = {(e.source, e.target) for e in graph.get_graph().edges}
    assert {("intake", t) for t in TEAMS} <= edges
    assert graph.invoke({"ticket": "I was charged twice"})["queue"] == "billing"  # taken
    assert graph.invoke({"ticket": "Something odd"})["queue"] == "outage"  # the router's


def _router_answering(team: Team) -> tuple[Callable[[State], Team], list[str]]:
    """A router that answers ``team`` to every ticket, and the tickets it was asked."""
    asked: list[str] = []

    def route_ticket(state: State) -> Team:
        asked.append(state["ticket"])
        return team

    return route_ticket, asked


# -- live mode: what the engine is sure of is taken --------------------------------------


def test_live_mode_calls_the_router_only_when_the_engine_is_not_sure():
    engine = scripted_engine({"charge": "billing", "down": "outage"})
    route_ticket, asked = _router_answering("account_access")
    wrapped = decide_first(
        route_ticket,
        engine=engine,
        question="Which team should handle this support ticket?",
        take_at=0.9,
        mode="live",
        audit_rate=0.0,
        price_per_call=0.01,
    )
    graph = build_graph(wrapped)
    routes = [graph.invoke({"ticket": t})["queue"] for t in TICKETS]
    assert routes == [
        "billing",
        "outage",
        "account_access",
        "billing",
        "account_access",
        "account_access",
    ]
    assert asked == [TICKETS[2], TICKETS[4], TICKETS[5]]
    report = wrapped.report()
    assert (report.decisions, report.taken, report.router_calls) == (6, 3, 3)
    assert report.calls_saved == 3 and report.money_saved == pytest.approx(0.03)
    assert "router calls saved: 3, 0.03 at 0.01 a call" in str(report)


def test_live_mode_audits_a_share_of_the_takes_with_the_router():
    engine = scripted_engine({"charge": "billing"})
    route_ticket, asked = _router_answering("billing")
    wrapped = decide_first(
        route_ticket,
        engine=engine,
        question="Which team?",
        take_at=0.9,
        mode="live",
        audit_rate=0.5,
        seed=1,
    )
    for i in range(40):
        assert wrapped.invoke({"ticket": f"charged twice, order {i}"}) == "billing"
    report = wrapped.report()
    assert report.taken == 40
    assert 8 <= report.router_calls == len(asked) == report.taken_compared <= 32
    assert report.taken_agreed == report.taken_compared


def test_an_async_router_on_an_async_graph_with_the_coalescer():
    reader = ab.BatchingReader(scripted_engine({"charge": "billing"}).reader)
    engine = ab.DecisionEngine(reader=reader)
    asked: list[str] = []

    @decide_first(engine=engine, take_at=0.9, mode="live", audit_rate=0.0)
    async def route_ticket(state: State) -> Team:
        """Which team should handle this support ticket?"""
        await asyncio.sleep(0)
        asked.append(state["ticket"])
        return "outage"

    graph = build_graph(route_ticket)

    async def main() -> list[str]:
        states = await asyncio.gather(*(graph.ainvoke({"ticket": t}) for t in TICKETS))
        return [s["queue"] for s in states]

    routes = asyncio.run(main())
    assert routes == ["billing", "outage", "outage", "billing", "outage", "outage"]
    assert sorted(asked) == sorted([TICKETS[1], TICKETS[2], TICKETS[4], TICKETS[5]])
    # a sync run cannot call an async router: said plainly, not hung
    with pytest.raises(ab.ConfigurationError, match="is async"):
        graph.invoke({"ticket": "Something odd"})


def test_a_runnable_router_gives_its_options_by_argument():
    llm = GenericFakeChatModel(messages=iter([AIMessage('{"team": "outage"}')] * 3))
    chain = llm | RunnableLambda(parse_team)
    engine = scripted_engine({"charge": "billing"}, "team")
    wrapped = decide_first(
        chain,
        engine=engine,
        options=TEAMS,
        question="Which team should handle this?",
        take_at=0.9,
        mode="live",
        audit_rate=0.0,
        question_id="team",
    )
    assert wrapped.invoke("I was charged twice") == "billing"
    assert wrapped.invoke("The app is down") == "outage"
    assert wrapped.report().router_calls == 1
    # the described options are what the engine reads
    assert wrapped.question.criteria["billing"] == TEAMS["billing"]


# -- the engine failing never changes a route ---------------------------------------------


@pytest.mark.parametrize("mode", ["shadow", "live"])
def test_when_the_engine_fails_the_router_decides(mode, caplog):
    reader = FaultyReader(scripted_engine({}).reader, fault="raise")
    engine = ab.DecisionEngine(reader=reader)

    def route_ticket(state: State) -> Team:
        return "outage"

    wrapped = decide_first(
        route_ticket, engine=engine, question="Which team?", mode=mode, take_at=0.9
    )
    assert wrapped.invoke({"ticket": "anything"}) == "outage"
    assert wrapped.report().engine_errors == 1
    assert "the engine failed" in caplog.text


def test_the_routers_own_error_is_raised_as_without_the_wrapper():
    def route_ticket(state: State) -> Team:
        raise KeyError("ticket")

    wrapped = decide_first(route_ticket, engine=scripted_engine({}), question="Which team?")
    with pytest.raises(KeyError):
        wrapped.invoke({"ticket": "anything"})


def test_a_router_answer_outside_its_options_is_a_clear_error():
    def route_ticket(state: State) -> Team:
        return "sales"  # type: ignore[return-value]

    wrapped = decide_first(route_ticket, engine=scripted_engine({}), question="Which team?")
    with pytest.raises(ab.AgentBranchError, match="returned 'sales', which is not one of"):
        wrapped.invoke({"ticket": "anything"})


def test_bad_setups_say_how_to_fix_them():
    engine = scripted_engine({})

    def untyped(state):
        return "billing"

    with pytest.raises(ab.ConfigurationError, match="Literal"):
        decide_first(untyped, engine=engine, question="Which team?")
    with pytest.raises(ab.ConfigurationError, match="question="):
        decide_first(untyped, engine=engine, options=["billing", "outage"])
    with pytest.raises(ab.ConfigurationError, match="mode"):
        decide_first(untyped, engine=engine, question="Q?", options=["a", "b"], mode="on")
    with pytest.raises(ab.ConfigurationError, match="audit_rate"):
        decide_first(untyped, engine=engine, question="Q?", options=["a", "b"], audit_rate=2)

    def typed(state) -> Team:
        return "billing"

    with pytest.raises(ab.ConfigurationError, match="must be the same"):
        decide_first(typed, engine=engine, question="Q?", options=["billing", "outage"])
    with pytest.raises(ab.ConfigurationError, match="not both"):
        decide_first(typed, engine=engine, question="Q?", store="x.jsonl", take_at=ab.Earned())


# -- replay: the router is a teacher the cassette answers ---------------------------------


def test_a_replay_answers_the_router_from_the_cassette(tmp_path):
    path = tmp_path / "router.jsonl"
    sure = {"charge": "billing"}

    def run(cassette: Cassette, router: Any) -> tuple[list[str], Any]:
        reader = cassette.reader(lambda: scripted_engine(sure).reader, id="triage")
        wrapped = decide_first(
            router,
            engine=ab.DecisionEngine(reader=reader),
            question="Which team?",
            take_at=0.9,
            mode="live",
            audit_rate=0.5,
            seed=7,
        )
        return [wrapped.invoke({"ticket": t}) for t in TICKETS * 2], wrapped.report()

    def route_ticket(state: State) -> Team:
        return ANSWERS[TICKETS.index(state["ticket"])]  # type: ignore[return-value]

    with Cassette(path, mode="all") as cassette:
        recorded, first = run(cassette, route_ticket)

    def raise_if_called(state: State) -> Team:
        raise AssertionError("a replay called the router")

    raise_if_called.__name__ = "route_ticket"  # the recording's teacher: RouterTeacher route_ticket
    with Cassette(path, mode="none") as cassette:
        replayed, again = run(cassette, raise_if_called)
        assert cassette.stale() == []
    assert replayed == recorded
    assert again.router_calls == first.router_calls > 0  # answered by the cassette

    def renamed(state: State) -> Team:
        raise AssertionError("a replay called the router")

    with Cassette(path, mode="none") as cassette, pytest.raises(ReplayMissError, match="renamed"):
        run(cassette, renamed)


# -- the embedded CPU reader earns trust on the router's answers ---------------------------


class TicketLLM(BaseChatModel):
    """Stands in for the LLM a router asks: knows each labelled ticket's team."""

    teams: dict[str, str]
    calls: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "ticket-llm"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any) -> ChatResult:
        ticket = str(messages[-1].content).removeprefix("Route this ticket: ")
        self.calls.append(ticket)
        reply = AIMessage(json.dumps({"team": self.teams[ticket]}))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_on_the_embedded_reader_shadow_labels_earn_trust_that_live_mode_uses(tmp_path):
    rows = [json.loads(line) for line in LABELLED.read_text().splitlines()[1:]]
    teams = {r["state"]: r["labels"]["team"] for r in rows if r["labels"]["team"] in TEAMS}
    tickets = list(teams)
    llm = TicketLLM(teams=teams)

    def route_ticket(state: State) -> Team:
        reply = llm.invoke([HumanMessage(f"Route this ticket: {state['ticket']}")])
        return parse_team(reply)

    question = ab.choice("Which team should handle this support ticket?", TEAMS)
    store = tmp_path / "evidence.jsonl"
    earned = dict(precision=0.8, min_evidence=20, refresh_s=0)
    engine = ab.DecisionEngine.from_env()
    engine.reader = ab.BatchingReader(engine.reader)  # concurrent runs share a read

    before = build_graph(route_ticket)
    unwrapped = [s["queue"] for s in before.batch([{"ticket": t} for t in tickets])]

    # Day one, shadow: the graph routes exactly as before; every router answer is a label.
    shadow = decide_first(
        route_ticket,
        engine=engine,
        question=question,
        take_at=ab.Earned(store=str(store), **earned),
    )
    graph = build_graph(shadow)
    llm.calls.clear()
    routed = [s["queue"] for s in graph.batch([{"ticket": t} for t in tickets])]
    assert routed == unwrapped == [teams[t] for t in tickets]
    report = shadow.report()
    assert report.decisions == report.router_calls == len(llm.calls) == len(tickets)
    assert report.agreement is not None and report.agreement > 0.7
    assert str(store.read_text()).count("\n") >= len(tickets)  # the labels are stored

    # Going live on the same store (a restart): no relabelling, the router's labels
    # earned the band, and what the engine is sure of is taken without calling it.
    live = decide_first(
        route_ticket,
        engine=engine,
        question=question,
        mode="live",
        audit_rate=0.0,
        take_at=ab.Earned(store=str(store), **earned),
    )
    graph = build_graph(live)
    llm.calls.clear()
    routed = [s["queue"] for s in graph.batch([{"ticket": t} for t in tickets])]
    report = live.report()
    assert report.taken >= len(tickets) // 3, str(report)
    assert len(llm.calls) == report.router_calls == len(tickets) - report.taken
    right = sum(r == teams[t] for r, t in zip(routed, tickets, strict=True))
    assert right >= 0.8 * len(tickets)


def test_the_router_runs_on_the_callers_thread_unless_given_a_timeout():
    import threading
    import time

    threads: list[int] = []

    def route_ticket(state: State) -> Team:
        threads.append(threading.get_ident())
        time.sleep(0.3 if state["ticket"] == "slow" else 0)
        return "outage"

    wrapped = decide_first(route_ticket, engine=scripted_engine({}), question="Which team?")
    assert wrapped.invoke({"ticket": "anything"}) == "outage"
    assert threads == [threading.get_ident()]  # as without the wrapper
    bounded = decide_first(
        route_ticket, engine=scripted_engine({}), question="Which team?", timeout_s=0.05
    )
    with pytest.raises(ab.FallbackError, match="did not answer within 0.05 s"):
        bounded.invoke({"ticket": "slow"})


@pytest.mark.parametrize("mode", ["shadow", "live"])
def test_every_router_answer_is_evidence_a_learning_question_keeps(tmp_path, mode):
    store = tmp_path / "evidence.jsonl"
    engine = scripted_engine({"charge": "billing"})

    def route_ticket(state: State) -> Team:
        return "billing" if "charge" in state["ticket"] else "outage"

    earned = ab.Earned(store=str(store), learn=True, start_at=0.5)  # takes from the start
    wrapped = decide_first(
        route_ticket,
        engine=engine,
        question="Which team?",
        take_at=earned,
        mode=mode,
        audit_rate=0.5,
        seed=3,
    )
    for i in range(10):
        wrapped.invoke({"ticket": f"charged twice, order {i}"})
        wrapped.invoke({"ticket": f"the site is down, ticket {i}"})
    records = [json.loads(line) for line in store.read_text().splitlines()]
    audits = [r for r in records if r["source"] == "audit"]
    fallbacks = [r for r in records if r["source"] == "fallback"]
    assert {(r["band"], r["teacher_label"], r["correct"]) for r in audits} == {
        ("take", "billing", True)
    }
    assert {(r["band"], r["teacher_label"]) for r in fallbacks} == {("fallback", "outage")}
    assert len(fallbacks) == 10
    # shadow mode checks every take (rate 1); live mode the drawn share, weighted by it
    assert {r["rate"] for r in audits} == ({1.0} if mode == "shadow" else {0.5})
    assert (len(audits) == 10) if mode == "shadow" else (0 < len(audits) < 10)
    assert all("charged twice" in r["state"] for r in audits)  # kept for learning
    assert all("site is down" in r["state"] for r in fallbacks)


def test_only_a_policy_whose_takes_nobody_audits_warns(caplog):
    from agentbranch.policy import Generate, Policy

    def route_ticket(state: State) -> Team:
        return "billing"

    with caplog.at_level("WARNING", logger="agentbranch"):
        decide_first(route_ticket, engine=scripted_engine({}), question="Which team?")
    assert "never checked against the teacher" not in caplog.text  # the router audits
    with caplog.at_level("WARNING", logger="agentbranch"):
        Policy(take_at=ab.Earned(), fallbacks=[Generate(RunnableLambda(route_ticket))])
    assert "never checked against the teacher" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="agentbranch"):
        decide_first(route_ticket, engine=scripted_engine({}), question="Q?", audit_rate=0)
    assert "decide_first(audit_rate=0)" in caplog.text


def test_a_sync_router_and_a_runnable_router_on_an_async_run():
    route_ticket, asked = _router_answering("outage")
    llm = GenericFakeChatModel(messages=iter([AIMessage('{"team": "account_access"}')]))
    chain = llm | RunnableLambda(parse_team)
    engine = scripted_engine({"charge": "billing"})
    sync = decide_first(
        route_ticket,
        engine=engine,
        question="Which team?",
        mode="live",
        take_at=0.9,
        audit_rate=0.0,
    )
    runnable = decide_first(
        chain,
        engine=scripted_engine({"charge": "billing"}, "team"),
        options=list(TEAMS),
        question="Which team?",
        mode="live",
        question_id="team",
    )

    async def main() -> list[str]:
        return [
            await sync.ainvoke({"ticket": "The site is down"}),
            await sync.ainvoke({"ticket": "I was charged twice"}),
            await runnable.ainvoke("I cannot log in"),
        ]

    assert asyncio.run(main()) == ["outage", "billing", "account_access"]
    assert asked == ["The site is down"]
