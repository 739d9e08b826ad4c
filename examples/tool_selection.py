"""Tool selection on a LangChain agent: ``ToolSelectorMiddleware`` on ``create_agent``.

    python examples/tool_selection.py            # engine from the environment
    python examples/tool_selection.py --tiny     # tiny random DiffusionGemma on CPU

An agent has six tools. Before each model call, ONE engine read picks the tools to bind:

* ``choice`` mode: one choice over the tool names (described by the tool descriptions);
  the two most probable tools are bound;
* ``yes_no`` mode: one yes/no question per tool ("does the request need it?"), all in
  one read; the tools answered "yes" are bound.

Below the confidence floor (``min_confidence``) nothing is dropped: a choice read that
unsure keeps every tool, and a yes/no answer that unsure keeps its tool. The chat model
here is a fake one that reports what it was given; any chat model binds the same way.
"""

from __future__ import annotations

from typing import Any

from _engine import make_engine
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from agentbranch.langchain import ToolSelectorMiddleware

REQUESTS = [
    "Will it rain in Oslo tomorrow?",
    "Find me a flight from Paris to Rome on Friday.",
    "How much is 250 US dollars in euros?",
]


class ReportingModel(BaseChatModel):
    """Answers with the names of the tools it was bound to."""

    bound: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "reporting-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ReportingModel:
        return self.model_copy(update={"bound": [t.name for t in tools]})

    def _generate(self, messages: list[Any], stop: Any = None, **kwargs: Any) -> ChatResult:
        reply = AIMessage("I can use: " + (", ".join(self.bound) or "no tools"))
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def get_weather(city: str, day: str) -> str:
    """Weather forecast for a city: rain, temperature, wind."""
    return "rain"


@tool
def search_flights(origin: str, destination: str, date: str) -> str:
    """Search airline flights between two cities on a date."""
    return "AF1234"


@tool
def book_hotel(city: str, nights: int) -> str:
    """Book a hotel room in a city."""
    return "booked"


@tool
def convert_currency(amount: float, source: str, target: str) -> str:
    """Convert money from one currency to another at today's exchange rate."""
    return "230 EUR"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email message to someone."""
    return "sent"


@tool
def run_shell(cmd: str) -> str:
    """Run a shell command on the server."""
    return "ok"


TOOLS = [get_weather, search_flights, book_hotel, convert_currency, send_email, run_shell]


def main() -> None:
    engine = make_engine()
    selectors = {
        "choice": ToolSelectorMiddleware(engine, max_tools=2, min_confidence=0.2),
        "yes_no": ToolSelectorMiddleware(engine, mode="yes_no", min_confidence=0.2),
    }
    for mode, selector in selectors.items():
        agent = create_agent(ReportingModel(), tools=TOOLS, middleware=[selector])
        print(f"mode={mode}")
        for request in REQUESTS:
            state = agent.invoke({"messages": [HumanMessage(request)]})
            selection = state["tool_selection"]
            records = selection["decisions"]
            if mode == "choice":
                rec = records["tool"]
                top = sorted(rec["probabilities"].items(), key=lambda kv: -kv[1])[:3]
                detail = ", ".join(f"{n} {p:.2f}" for n, p in top)
                detail += f"; confidence {rec['confidence']:.2f}"
            else:
                detail = ", ".join(
                    f"{n} {r['probabilities']['yes']:.2f}"
                    for n, r in records.items()
                    if r["label"] == "yes" or r["band"] != "take"
                )
                detail = f"P(yes) of bound: {detail or '-'}"
            kept = " (all kept)" if selection["kept_all"] else ""
            print(f"  {request}")
            print(f"    -> {state['messages'][-1].text}{kept}  [{detail}]")


if __name__ == "__main__":
    main()
