"""Test doubles for users: ScriptedReader refuses a script keyed by ids nothing asks, and
FakeToolCallingModel drives create_agent without a subclass."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError
from agentbranch.langchain import ToolGateMiddleware
from agentbranch.testing import FakeToolCallingModel

TEAM = ab.choice("Which team?", ["billing", "outage"])
URGENT = ab.yes_no("Urgent?", yes="blocked now", no="can wait")


@tool
def shell(cmd: str) -> str:
    """Run a shell command."""
    return f"ran {cmd}"


def test_a_script_keyed_by_an_id_the_gate_does_not_ask_is_a_clear_error():
    # The gate asks "risky": a script for "is_risky" used to answer it uniformly, silently.
    engine = ab.DecisionEngine(ab.ScriptedReader({"is_risky": {"yes": 0.99, "no": 0.01}}))
    model = FakeToolCallingModel(
        responses=[AIMessage("", tool_calls=[{"name": "shell", "args": {"cmd": "ls"}, "id": "1"}])]
    )
    agent = create_agent(
        model, tools=[shell], middleware=[ToolGateMiddleware(engine, tools=[shell])]
    )
    with pytest.raises(ConfigurationError, match=r"\['is_risky'\].*\['risky'\]"):
        agent.invoke({"messages": [HumanMessage("list my files")]})


def test_a_typo_in_a_partial_script_is_named():
    engine = ab.DecisionEngine(
        ab.ScriptedReader({"team": {"billing": 1.0}, "urgnet": {"yes": 1.0}})
    )
    with pytest.raises(
        ConfigurationError, match=r"'urgent' \(did you mean to script it as 'urgnet'"
    ):
        engine.decide("x", {"team": TEAM, "urgent": URGENT})


def test_partial_scripts_and_explicit_defaults_stay_uniform():
    partial = ab.DecisionEngine(ab.ScriptedReader({"team": {"billing": 1.0}}))
    d = partial.decide("x", {"team": TEAM, "urgent": URGENT})
    assert d["team"].label == "billing" and d["urgent"].confidence == 0.0
    unscripted = ab.ScriptedReader({"risky": {"yes": 1.0}}, default=ab.ScriptedReader.uniform)
    d = ab.DecisionEngine(unscripted).decide("x", {"team": TEAM})
    assert d["team"].probabilities == {"billing": 0.5, "outage": 0.5}
    assert (
        ab.DecisionEngine(ab.ScriptedReader()).decide("x", {"team": TEAM})["team"].confidence == 0
    )


def test_fake_tool_calling_model_proposes_calls_and_records_bindings():
    model = FakeToolCallingModel(
        responses=[
            AIMessage("", tool_calls=[{"name": "shell", "args": {"cmd": "ls"}, "id": "c1"}]),
            "Done.",
        ]
    )
    out = create_agent(model, tools=[shell]).invoke({"messages": [HumanMessage("ls please")]})
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["ran ls"]
    assert out["messages"][-1].content == "Done."
    assert model.bound_tools == [["shell"], ["shell"]]
    assert [m.content for m in model.received[0]] == ["ls please"]
    with pytest.raises(ConfigurationError, match="called 3 times but has 2 response"):
        model.invoke("again")
    with pytest.raises(TypeError, match="AIMessages or strings"):
        FakeToolCallingModel(responses=[{"role": "ai"}])
