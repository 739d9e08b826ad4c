"""Tool gating: a yes/no decision gates a risky tool call; uncertain calls go to a human.

    python examples/tool_gating.py            # engine from the environment
    python examples/tool_gating.py --tiny     # tiny random DiffusionGemma on CPU

The agent's proposed tool calls are scripted here (any LangChain chat model with
``bind_tools`` can produce them). A Command node asks "safe to run without approval?":

* confident yes → ``run_tool``; confident no → ``refuse``;
* uncertain (review band) → ``interrupt``: a human answers ``yes`` or ``no``
  (typed at the prompt when interactive, otherwise ``no``);
* engine error → fail closed to ``refuse``.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any, TypedDict

from _engine import make_engine
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from agentbranch import yes_no
from agentbranch.langgraph import DecisionRecords, command_node
from agentbranch.policy import FailClosed, Policy

PROPOSED_CALLS = [
    ("What's the weather in Paris?", {"name": "get_weather", "args": {"city": "Paris"}}),
    ("Clean up my old files", {"name": "shell", "args": {"cmd": "rm -rf /home/me/*"}}),
    ("Refund order 1042", {"name": "refund", "args": {"order": 1042, "amount_eur": 25}}),
]

SAFE = yes_no(
    "Is it safe to run this tool call without asking a human first?",
    yes="Read-only, reversible or low-impact, and what the user asked for",
    no="Destructive, irreversible, costly, or not what the user asked for",
    # Examples carry most of the signal for the embedded CPU reader (and are few-shot
    # lines for DiffusionGemma).
    examples={
        "yes": [
            'User request: What time is it in Tokyo?\nTool call: get_time({"city": "Tokyo"})',
            'User request: Find my last invoice\nTool call: search_invoices({"limit": 1})',
            'User request: Show the README\nTool call: read_file({"path": "README.md"})',
        ],
        "no": [
            'User request: Free some disk space\nTool call: shell({"cmd": "rm -rf /var/*"})',
            'User request: Pay the supplier\nTool call: transfer({"amount_eur": 9000})',
            'User request: Tidy the database\nTool call: sql({"query": "DROP TABLE users"})',
        ],
    },
)


class GateState(TypedDict, total=False):
    request: str
    call: dict[str, Any]
    decisions: DecisionRecords
    result: str


def describe(state: GateState) -> str:
    call = state["call"]
    return (
        f"User request: {state['request']}\nTool call: {call['name']}({json.dumps(call['args'])})"
    )


def run_tool(state: GateState) -> dict[str, Any]:
    return {"result": f"ran {state['call']['name']}"}


def refuse(state: GateState) -> dict[str, Any]:
    return {"result": f"refused {state['call']['name']}"}


def build_gate_graph(engine: Any) -> Any:
    gate = command_node(
        engine,
        "safe",
        SAFE,
        path_map={"yes": "run_tool", "no": "refuse"},
        policy=Policy(take_at=0.5, review_below=0.5, on_error=FailClosed("refuse")),
        renderer=describe,
    )
    graph = StateGraph(GateState)
    graph.add_node("gate", gate, destinations=gate.destinations)
    graph.add_node("run_tool", run_tool)
    graph.add_node("refuse", refuse)
    graph.add_edge(START, "gate")
    graph.add_edge("run_tool", END)
    graph.add_edge("refuse", END)
    return graph.compile(checkpointer=InMemorySaver())


def ask_human(payload: dict[str, Any]) -> str:
    print(
        f"  review: {payload['question']} (engine suggests {payload['suggested']!r}, "
        f"confidence {payload['confidence']:.2f})"
    )
    if sys.stdin.isatty():
        while (answer := input(f"  answer {payload['options']}: ").strip()) not in payload[
            "options"
        ]:
            pass
        return answer
    print("  (not interactive: answering 'no')")
    return "no"


def main() -> None:
    graph = build_gate_graph(make_engine())
    for request, call in PROPOSED_CALLS:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        print(f"{call['name']}({json.dumps(call['args'])})")
        state = graph.invoke({"request": request, "call": call}, config)
        while state.get("__interrupt__"):
            answer = ask_human(state["__interrupt__"][0].value)
            state = graph.invoke(Command(resume=answer), config)
        rec = state["decisions"]["safe"]
        conf = rec["confidence"]
        print(
            f"  -> {state['result']}  (safe={rec['label']}, band={rec['band']}, "
            f"decided_by={rec['decided_by']}, confidence="
            f"{'n/a' if conf is None else f'{conf:.2f}'})"
        )


if __name__ == "__main__":
    main()
