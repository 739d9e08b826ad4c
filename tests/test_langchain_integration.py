"""LangChain integration: AgentBranchDecisionModel (BaseDecisionModel contract) and the
content_and_artifact decision tool."""

from __future__ import annotations

import asyncio

import pytest
from _lg_fixtures import StrictFakeChat, sure, unsure
from langchain_core.decisions import BaseDecisionModel, ChoiceAnswer, ClassifierResponse, NoulAnswer
from langchain_core.messages import ToolMessage

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError
from agentbranch.langchain import AgentBranchDecisionModel, decision_tool
from agentbranch.policy import FailOpen, Generate, GotoNode, Policy

URGENT = ab.yes_no("Urgent?")
TEAM = ab.choice("Which team?", {"billing": "money", "outage": "down"})


def make(script=None, **kw):
    reader = ab.ScriptedReader(script or {}, model="dg-tiny", **kw)
    return ab.DecisionEngine(reader), reader


def test_decision_model_contract_sync_async_batch():
    eng, reader = make({"urgent": {"yes": 0.8, "no": 0.2}, "team": sure("outage")})
    model = AgentBranchDecisionModel(engine=eng)
    assert isinstance(model, BaseDecisionModel)
    assert model.model == "dg-tiny"
    request = {"state": "site down", "questions": {"urgent": URGENT, "team": TEAM}}

    out = model.invoke(request)
    assert isinstance(out, ClassifierResponse) and out.model == "dg-tiny"
    assert isinstance(out.answers["urgent"], NoulAnswer)
    assert out.answers["urgent"].noul == pytest.approx(0.8)
    assert isinstance(out.answers["team"], ChoiceAnswer)
    assert out.answers["team"].choice == "outage"
    assert len(reader.calls) == 1  # both questions in one read

    aout = asyncio.run(model.ainvoke(request))
    assert aout == out
    assert model.batch([request, request]) == [out, out]


def test_decision_model_questions_as_wire_dicts_and_explicit_model_name():
    eng, _ = make({"urgent": sure("no")})
    model = AgentBranchDecisionModel(engine=eng, model="my-served-name")
    out = model.invoke(
        {
            "state": {"ticket": "x"},
            "questions": {"urgent": {"type": "noul", "instructions": "Urgent?"}},
        }
    )
    assert out.answers["urgent"].noul < 0.5
    assert model.model == "my-served-name"


def test_decision_model_reports_to_callbacks():
    from langchain_core.callbacks import BaseCallbackHandler

    class H(BaseCallbackHandler):
        def __init__(self):
            self.starts = []

        def on_chain_start(self, serialized, inputs, **kw):
            self.starts.append(kw.get("metadata", {}).get("ls_provider"))

    eng, _ = make()
    h = H()
    AgentBranchDecisionModel(engine=eng).invoke(
        {"state": "x", "questions": {"urgent": URGENT}}, {"callbacks": [h]}
    )
    assert "agentbranch" in h.starts


def test_model_router_middleware_routes_an_agent_with_it():
    from langchain.agents import create_agent
    from langchain.agents import middleware as mw
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage

    fast = GenericFakeChatModel(messages=iter([AIMessage("fast answer")]))
    powerful = GenericFakeChatModel(messages=iter([AIMessage("powerful answer")]))
    eng, reader = make({"model_route": sure("powerful")})
    router = mw.ModelRouterMiddleware(
        choices={
            "fast": mw.ModelChoice(model=fast, criteria="Simple, well-scoped tasks."),
            "powerful": mw.ModelChoice(model=powerful, criteria="Deep reasoning."),
        },
        instructions="Choose the least costly model suited to the task.",
        classifier=AgentBranchDecisionModel(engine=eng),
    )
    agent = create_agent(fast, middleware=[router])
    out = agent.invoke({"messages": [HumanMessage("Prove the lemma in the attached paper.")]})
    assert out["messages"][-1].content == "powerful answer"
    assert out["model_route"].choice == "powerful"
    assert reader.calls[0][0].state == "human: Prove the lemma in the attached paper."


def test_decision_tool_content_and_artifact():
    eng, _ = make({"urgent": sure("yes"), "team": sure("billing")})
    tool = decision_tool(eng, {"urgent": URGENT, "team": TEAM}, name="triage")
    assert tool.name == "triage" and tool.response_format == "content_and_artifact"
    assert "Urgent?" in tool.description
    msg = tool.invoke(
        {"type": "tool_call", "id": "call-1", "name": "triage", "args": {"text": "charged twice"}}
    )
    assert isinstance(msg, ToolMessage)
    assert msg.content.startswith("urgent=yes (confidence ")
    assert "team=billing" in msg.content
    assert set(msg.artifact) == {"urgent", "team"}
    assert msg.artifact["team"]["band"] == "take"
    assert msg.artifact["team"]["probabilities"]["billing"] == pytest.approx(0.97)

    amsg = asyncio.run(
        tool.ainvoke({"type": "tool_call", "id": "c2", "name": "triage", "args": {"text": "x"}})
    )
    assert amsg.artifact["urgent"]["label"] == "yes"


def test_decision_tool_with_generation_fallback_and_fail_open():
    eng, _ = make({"team": unsure("outage")})
    model = StrictFakeChat(replies=["billing"])
    tool = decision_tool(
        eng, {"team": TEAM}, policy=Policy(take_at=0.6, fallbacks=[Generate(model)])
    )
    content, artifact = tool.func("my invoice is wrong", config={})  # type: ignore[misc]
    assert artifact["team"]["decided_by"] == "fallback" and "fallback" in content
    assert model.calls == 1

    broken, _ = make(error=RuntimeError("down"))
    tool = decision_tool(broken, {"urgent": URGENT}, policy=Policy(on_error=FailOpen("yes")))
    msg = tool.invoke({"type": "tool_call", "id": "c", "name": "decide", "args": {"text": "x"}})
    assert msg.artifact["urgent"]["decided_by"] == "fail_open"


def test_decision_tool_cannot_goto_nodes():
    eng, _ = make()
    with pytest.raises(ConfigurationError, match="GotoNode"):
        decision_tool(
            eng, {"team": TEAM}, policy=Policy(take_at=0.6, fallbacks=[GotoNode("human")])
        )
