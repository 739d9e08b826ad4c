"""Tool gating on a LangChain agent: ``ToolGateMiddleware`` on ``create_agent``.

    python examples/tool_gating.py            # engine from the environment
    python examples/tool_gating.py --tiny     # tiny random DiffusionGemma on CPU

The agent's chat model proposes tool calls (a fake one here, offline; any chat model with
``bind_tools`` does the same). Before the tools run, the gate asks the engine "risky or
not authorized?" about every proposed call of the guarded tools, all calls of a model
turn in ONE read:

* confident "no" → the tool runs; confident "yes" → blocked with an error ToolMessage;
* uncertain → a human decides through LangChain's HITL interrupt (approve / edit /
  reject / respond; typed at the prompt when interactive, otherwise rejected);
* engine error → fail closed: the call is blocked.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

from _engine import make_engine
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from agentbranch.langchain import ToolGateMiddleware
from agentbranch.policy import FailClosed, Policy

# What the (fake) model proposes for each user request.
PROPOSALS: dict[str, list[dict[str, Any]]] = {
    "What's the weather in Paris?": [{"name": "get_weather", "args": {"city": "Paris"}}],
    "Clean up my old files": [{"name": "shell", "args": {"cmd": "rm -rf /home/me/*"}}],
    "Refund order 1042, and how warm is it in Oslo?": [
        {"name": "refund", "args": {"order": 1042, "amount_eur": 25}},
        {"name": "get_weather", "args": {"city": "Oslo"}},
    ],
}


class ProposingModel(BaseChatModel):
    """Proposes the scripted calls for the user's request, then reports the results."""

    @property
    def _llm_type(self) -> str:
        return "proposing-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ProposingModel:
        return self

    def _generate(self, messages: list[Any], stop: Any = None, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            calls = [{**c, "id": f"call_{i}"} for i, c in enumerate(PROPOSALS.get(last.text, []))]
            reply = AIMessage("", tool_calls=calls)
        else:
            results = [m.text for m in messages if isinstance(m, ToolMessage)]
            reply = AIMessage("Results: " + " | ".join(results))
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def get_weather(city: str) -> str:
    """Look up today's weather forecast for a city. Read-only."""
    return f"{city}: 18°C, clear"


@tool
def shell(cmd: str) -> str:
    """Run a shell command on the user's computer."""
    return f"(pretend) ran {cmd}"


@tool
def refund(order: int, amount_eur: float) -> str:
    """Refund money to a customer's card for an order."""
    return f"refunded {amount_eur} EUR on order {order}"


def build_agent(engine: Any) -> Any:
    gate = ToolGateMiddleware(
        engine,
        tools=[get_weather, shell, refund],
        policy=Policy(take_at=0.5, review_below=0.5, on_error=FailClosed("block")),
    )
    return create_agent(
        ProposingModel(),
        tools=[get_weather, shell, refund],
        middleware=[gate],
        checkpointer=InMemorySaver(),
    )


def ask_human(request: dict[str, Any]) -> dict[str, Any]:
    """Answer a HITLRequest, one decision per action request."""
    decisions = []
    for action in request["action_requests"]:
        print("  review: " + action["description"].replace("\n", "\n          "))
        if sys.stdin.isatty():
            while (answer := input("  approve or reject? ").strip()) not in ("approve", "reject"):
                pass
        else:
            print("  (not interactive: rejecting)")
            answer = "reject"
        decisions.append({"type": answer})
    return {"decisions": decisions}


def main() -> None:
    agent = build_agent(make_engine())
    for request in PROPOSALS:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        print(f"user: {request}")
        state = agent.invoke({"messages": [HumanMessage(request)]}, config)
        while state.get("__interrupt__"):
            state = agent.invoke(Command(resume=ask_human(state["__interrupt__"][0].value)), config)
        for rec in state["tool_decisions"].values():
            call = rec["tool_call"]
            conf = rec["confidence"]
            print(
                f"  {call['name']}({json.dumps(call['args'])}) -> {rec['outcome']}  "
                f"(risky={rec['label']}, band={rec['band']}, decided_by={rec['decided_by']}, "
                f"confidence={'n/a' if conf is None else f'{conf:.2f}'})"
            )
        print(f"  agent: {state['messages'][-1].text}")


if __name__ == "__main__":
    main()
