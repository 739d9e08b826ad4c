"""The support-triage demo graph (agentbranch.demo.triage) on a scripted reader."""

from __future__ import annotations

import asyncio

import pytest
from _lg_fixtures import StrictFakeChat, by_keyword, sure, unsure
from langgraph.checkpoint.memory import InMemorySaver

import agentbranch as ab
from agentbranch.demo.triage import (
    SAMPLE_TICKETS,
    TEAMS,
    build_triage_graph,
    triage_row,
)
from agentbranch.policy import Policy


def engine():
    reader = ab.ScriptedReader(
        {
            "team": by_keyword(
                {
                    "charged": sure("billing"),
                    "500 errors": sure("outage"),
                    "log in": sure("account_access"),
                    "invoice": sure("billing"),
                },
                default=unsure("bug"),
            ),
            "urgent": by_keyword({"Production is down": sure("yes")}, sure("no")),
            "frustration": by_keyword({"THIRD": sure("furious")}, sure("calm")),
        }
    )
    return ab.DecisionEngine(reader), reader


def test_confident_ticket_is_assigned_in_one_engine_call():
    eng, reader = engine()
    state = build_triage_graph(eng).invoke({"ticket": SAMPLE_TICKETS[1]})
    assert (state["queue"], state["team"], state["urgent"], state["frustration"]) == (
        "outage",
        "outage",
        True,
        "calm",
    )
    assert len(reader.calls) == 1
    assert [q.id for q in reader.calls[0][0].questions] == ["team", "urgent", "frustration"]
    recs = state["decisions"]
    assert {r["band"] for r in recs.values()} == {"take"}
    assert {r["decided_by"] for r in recs.values()} == {"engine"}


def test_uncertain_team_goes_to_human_triage_without_a_model():
    eng, _ = engine()
    state = build_triage_graph(eng).invoke({"ticket": SAMPLE_TICKETS[3]})
    assert state["queue"] == "human_triage" and state["team"] is None
    rec = state["decisions"]["team"]
    assert (rec["band"], rec["decided_by"], rec["goto"]) == (
        "fallback",
        "fallback_node",
        "human_triage",
    )


@pytest.mark.parametrize("use_async", [False, True])
def test_uncertain_team_falls_back_to_generation(use_async):
    eng, _ = engine()
    # two uncertain tickets among the samples (export bug, feature request): exactly two calls
    model = StrictFakeChat(replies=['{"label": "bug"}', '{"label": "feature_request"}'])
    graph = build_triage_graph(eng, fallback_model=model)
    rows = []
    for ticket in SAMPLE_TICKETS:
        state = (
            asyncio.run(graph.ainvoke({"ticket": ticket}))
            if use_async
            else graph.invoke({"ticket": ticket})
        )
        rows.append(triage_row(state))
    assert model.calls == 2
    by_ticket = {r["ticket"]: r for r in rows}
    assert by_ticket[SAMPLE_TICKETS[0]]["queue"] == "billing"
    assert by_ticket[SAMPLE_TICKETS[3]]["queue"] == "bug"
    assert by_ticket[SAMPLE_TICKETS[3]]["team_decided_by"] == "fallback"
    assert by_ticket[SAMPLE_TICKETS[4]]["queue"] == "feature_request"
    assert by_ticket[SAMPLE_TICKETS[5]]["frustration"] == "furious"
    for r in rows:
        assert r["queue"] in TEAMS
        for key in ("team_band", "team_decided_by", "urgent_confidence", "frustration_label"):
            assert key in r


def test_custom_policy_and_checkpointer():
    eng, _ = engine()
    graph = build_triage_graph(
        eng,
        policy={"team": Policy(take_at=0.6, review_below=0.6), "*": Policy()},
        checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": "t1"}}
    out = graph.invoke({"ticket": SAMPLE_TICKETS[3]}, cfg)
    assert out["__interrupt__"][0].value["options"] == list(TEAMS)
    from langgraph.types import Command

    state = graph.invoke(Command(resume="bug"), cfg)
    assert state["queue"] == "bug"
    assert state["decisions"]["team"]["decided_by"] == "human"
    assert graph.get_state(cfg).values["decisions"]["team"]["label"] == "bug"
