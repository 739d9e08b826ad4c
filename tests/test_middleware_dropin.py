"""The drop-in path: LangChain's own AutoModeMiddleware and ModelRouterMiddleware with
AgentBranchDecisionModel as the classifier, in one real create_agent run; and the gate and
selector on the tiny DiffusionGemma (a real read, random weights)."""

from __future__ import annotations

import json
import math
import uuid

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AutoModeMiddleware, ModelChoice, ModelRouterMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import agentbranch as ab
from agentbranch.core.state import render_state
from agentbranch.langchain import (
    AgentBranchDecisionModel,
    ToolGateMiddleware,
    ToolSelectorMiddleware,
)

RAN: list[str] = []


class Proposer(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self


@tool
def list_files(folder: str) -> str:
    """List the files in a folder (read-only)."""
    RAN.append(f"list_files {folder}")
    return "a.txt b.txt"


@tool
def shell(cmd: str) -> str:
    """Run a shell command on the user's machine."""
    RAN.append(f"shell {cmd}")
    return f"ran {cmd}"


def risky_if_rm(state: str, q) -> dict[str, float]:
    # AutoMode's state is JSON: {"messages": [...], "tool_call": {...}, "tool_description": ...}
    call = json.loads(state)["tool_call"]
    return (
        {"yes": 0.95, "no": 0.05}
        if "rm" in call["args"].get("cmd", "")
        else {"yes": 0.05, "no": 0.95}
    )


def sure(option, p=0.97):
    def dist(state, q):
        rest = (1 - p) / (len(q.options) - 1)
        return {o: (p if o == option else rest) for o in q.options}

    return dist


def dropin_run():
    RAN.clear()
    reader = ab.ScriptedReader({"model_route": sure("careful"), "is_risky": risky_if_rm})
    classifier = AgentBranchDecisionModel(engine=ab.DecisionEngine(reader))
    fast = Proposer(messages=iter([AIMessage("fast model answered")]))
    careful = Proposer(
        messages=iter(
            [
                AIMessage(
                    "", tool_calls=[{"name": "list_files", "args": {"folder": "~"}, "id": "t1"}]
                ),
                AIMessage(
                    "Removing the old ones.",
                    tool_calls=[{"name": "shell", "args": {"cmd": "rm -rf ~/old"}, "id": "t2"}],
                ),
                AIMessage("careful model answered"),
            ]
        )
    )
    router = ModelRouterMiddleware(
        choices={
            "fast": ModelChoice(model=fast, criteria="Small talk and simple questions."),
            "careful": ModelChoice(model=careful, criteria="Tasks that change files."),
        },
        instructions="Which model should handle this request?",
        classifier=classifier,
    )
    auto = AutoModeMiddleware(tools=[shell], classifier=classifier)
    agent = create_agent(fast, tools=[list_files, shell], middleware=[router, auto])
    out = agent.invoke({"messages": [HumanMessage("Tidy my home folder")]})
    return out, reader


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
def test_auto_mode_and_model_router_with_the_decision_model():
    out, reader = dropin_run()
    assert out["model_route"].choice == "careful"  # the router's ChoiceAnswer, in state
    assert out["messages"][-1].content == "careful model answered"
    assert RAN == ["list_files ~"]  # list_files is not guarded; the rm call was blocked
    blocked = next(
        m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "t2"
    )
    assert (
        blocked.status == "error" and "classified as risky (probability: 0.95)" in blocked.content
    )
    # the classifier read the proposed call, the tool's description and the recent messages
    states = [
        json.loads(r.state) for batch in reader.calls for r in batch if r.state.startswith("{")
    ]
    (seen,) = states
    assert seen["tool_call"] == {"id": "t2", "name": "shell", "args": {"cmd": "rm -rf ~/old"}}
    assert seen["tool_description"] == "Run a shell command on the user's machine."
    assert [m["content"] for m in seen["messages"]][:1] == ["Tidy my home folder"]
    assert "a.txt b.txt" in [m["content"] for m in seen["messages"]]  # the earlier tool result


def _renders_tool_calls() -> bool:
    msg = AIMessage("", tool_calls=[{"name": "probe_tool", "args": {}, "id": "p"}])
    return "probe_tool" in render_state({"messages": [msg]})


@pytest.mark.skipif(
    not _renders_tool_calls(), reason="render_state does not render AIMessage tool calls yet"
)
@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
def test_auto_mode_classifier_sees_earlier_tool_calls():
    _, reader = dropin_run()
    (state,) = [r.state for batch in reader.calls for r in batch if r.state.startswith("{")]
    assert "list_files" in json.dumps(json.loads(state)["messages"])


# -- the tiny DiffusionGemma: real reads through TransformersReader -------------------------


@pytest.fixture(scope="module")
def tiny_engine():
    from agentbranch.testing import tiny_diffusiongemma

    return ab.DecisionEngine(ab.TransformersReader.from_pretrained(tiny_diffusiongemma()))


def test_gate_on_the_tiny_model(tiny_engine):
    RAN.clear()
    calls = [
        {"name": "list_files", "args": {"folder": "~"}, "id": "t1"},
        {"name": "shell", "args": {"cmd": "rm -rf ~/old"}, "id": "t2"},
    ]
    model = Proposer(messages=iter([AIMessage("", tool_calls=calls), AIMessage("done")]))
    # review_below=1.0: every answer of the random-weight model goes to the human
    gate = ToolGateMiddleware(
        tiny_engine, tools=[list_files, shell], policy=ab.Policy(take_at=1.0, review_below=1.0)
    )
    agent = create_agent(
        model, tools=[list_files, shell], middleware=[gate], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    out = agent.invoke({"messages": [HumanMessage("Tidy my home folder")]}, config)
    actions = out["__interrupt__"][0].value["action_requests"]
    assert [a["name"] for a in actions] == ["list_files", "shell"]
    out = agent.invoke(
        Command(resume={"decisions": [{"type": "approve"}, {"type": "reject"}]}), config
    )
    assert RAN == ["list_files ~"]
    for rec in out["tool_decisions"].values():
        assert rec["reader"] == "transformers" and rec["band"] == "review"
        assert math.isclose(sum(rec["probabilities"].values()), 1.0, abs_tol=1e-6)
        assert 0.0 <= rec["confidence"] <= 1.0 and rec["label_mass"] > 0.0


def test_selector_on_the_tiny_model(tiny_engine):
    bound: list[list[str]] = []

    class Recorder(GenericFakeChatModel):
        def bind_tools(self, tools, **kwargs):
            bound.append([t.name for t in tools])
            return self

    selector = ToolSelectorMiddleware(tiny_engine, min_confidence=0.0)  # always take the pick
    agent = create_agent(
        Recorder(messages=iter([AIMessage("ok")])),
        tools=[list_files, shell],
        middleware=[selector],
    )
    out = agent.invoke({"messages": [HumanMessage("What is in my home folder?")]})
    rec = out["tool_selection"]["decisions"]["tool"]
    assert bound == [[rec["label"]]]  # the model call bound exactly the engine's pick
    assert rec["reader"] == "transformers"
