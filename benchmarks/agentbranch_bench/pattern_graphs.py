"""What the calling patterns run: distinct ticket states, a one-node ``decide_node``
graph, a ``ToolNode`` graph over ``decision_tool``, the tool calls of 32 agent steps,
and the no-engine stand-ins (an empty node, a constant tool) that time LangGraph's and
LangChain's own work."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from agentbranch_bench.workload import TICKETS

__all__ = [
    "LENGTHS",
    "TicketState",
    "constant_tool",
    "decide_graph",
    "pattern_questions",
    "pattern_states",
    "tool_graph",
    "tool_inputs",
]


def pattern_questions(n: int = 3) -> dict[str, Any]:
    """The first ``n`` of the three questions the patterns ask (described answers: the
    embedded reader reads descriptions)."""
    import agentbranch as ab

    every = {
        "team": ab.choice(
            "Which team should handle this ticket?",
            {
                "billing": "invoices, payments and refunds",
                "outage": "the service is down",
                "bug": "something is broken or wrong",
            },
        ),
        "urgent": ab.yes_no(
            "Does this need a reply within the hour?",
            yes="customers are blocked or losing money",
            no="it can wait for a normal reply",
        ),
        "mood": ab.score(
            "How upset is the customer?",
            [
                "calm and polite message",
                "annoyed but patient message",
                "angry, threatening to leave",
            ],
        ),
    }
    return dict(list(every.items())[:n])


#: The state lengths the patterns can run on: ``short`` one-line tickets (uniform),
#: ``mixed`` the ragged lengths of real traffic (``mixed_texts``: median about 36
#: tokens, a few past 256), drawn afresh for each tag.
LENGTHS = ("short", "mixed")


def pattern_states(n: int, tag: str, lengths: str = "short") -> list[str]:
    """``n`` distinct ticket states, one-line (``lengths="short"``) or of mixed length."""
    if lengths == "mixed":
        from agentbranch_bench.mixed_texts import mixed_texts

        seed = sum(map(ord, tag))  # each tag its own draw, the same in every run
        return [f"{t} (ticket {tag}{i})" for i, t in enumerate(mixed_texts(n, seed=seed))]
    if lengths != "short":
        raise ValueError(f"lengths must be one of {LENGTHS}, not {lengths!r}")
    return [f"{TICKETS[i % len(TICKETS)]} (ticket {tag}{i})" for i in range(n)]


class TicketState(TypedDict, total=False):
    ticket: str
    decisions: dict


def decide_graph(node: Any) -> Any:
    """START -> ``node`` -> END over ``TicketState``."""
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(TicketState)
    g.add_node("triage", node)
    g.add_edge(START, "triage")
    g.add_edge("triage", END)
    return g.compile()


def tool_graph(tool: Any) -> Any:
    """A ``ToolNode`` over ``tool``: one agent step running the model's tool call."""
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    g = StateGraph(MessagesState)
    g.add_node("tools", ToolNode([tool]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile()


def tool_inputs(batch: list[str]) -> list[dict[str, Any]]:
    """One agent step per state: a model message calling the ``decide`` tool on it."""
    from langchain_core.messages import AIMessage

    return [
        {
            "messages": [
                AIMessage(
                    "",
                    tool_calls=[
                        {
                            "name": "decide",
                            "args": {"text": s},
                            "id": f"call-{i}",
                            "type": "tool_call",
                        }
                    ],
                )
            ]
        }
        for i, s in enumerate(batch)
    ]


def constant_tool(wait: Callable[[], Any] | None = None) -> Any:
    """A tool of ``decision_tool``'s shape that needs no engine (calling ``wait`` first,
    when given: the all-in bound's gate)."""
    from langchain_core.tools import StructuredTool

    from agentbranch.integrations.langchain import _DecisionInput

    def run(text: str) -> tuple[str, dict[str, Any]]:
        if wait is not None:
            wait()
        return "team=billing (confidence 1.00)", {}

    return StructuredTool.from_function(
        func=run,
        name="decide",
        description="decide",
        args_schema=_DecisionInput,
        response_format="content_and_artifact",
    )
