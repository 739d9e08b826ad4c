"""Helpers for the earned-threshold tests: a scripted engine whose confidence and label
come from the state text, a teacher that knows the truth written in the state, a graph
that decides ``urgent`` and routes on it, and a fallback's label observed directly.

A state reads ``"item 7 said=yes p=0.97 truth=no"``: the engine answers ``said`` with
probability ``p`` (so its confidence follows ``p``), the teacher answers ``truth``.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from _lg_fixtures import LabelTeacher

import agentbranch as ab
from agentbranch.policy import Earned, Policy
from agentbranch.policy.earned import QuestionKey

URGENT = ab.yes_no("Is the ticket urgent?")
#: The key of ``urgent`` as ``engine()`` reads it.
URGENT_KEY = QuestionKey("urgent", URGENT, "scripted", "scripted-model")


def state(i: int, said: str, p: float, truth: str) -> str:
    return f"item {i} said={said} p={p:.4f} truth={truth}"


def scripted(state_text: str, q: Any) -> dict[str, float]:
    said = re.search(r"said=(\w+)", state_text).group(1)
    p = float(re.search(r"p=([0-9.]+)", state_text).group(1))
    rest = (1 - p) / (len(q.options) - 1)
    return {o: (p if o == said else rest) for o in q.options}


def engine(qid: str = "urgent", model: str = "scripted-model") -> ab.DecisionEngine:
    reader = ab.ScriptedReader({qid: scripted})
    reader.model = model
    return ab.DecisionEngine(reader)


class Oracle(LabelTeacher):
    """A teacher that answers the ``truth=`` written in the input (or ``answer``)."""

    llm_type = "oracle"
    answer: str | None = None

    def label_of(self, text: str) -> str:
        return self.answer or re.search(r"truth=(\w+)", text).group(1)


class UrgentState(TypedDict, total=False):
    text: str
    decisions: dict
    out: str


def urgent_graph(policy: Policy, *, checkpointer: Any = None) -> Any:
    """A compiled graph that decides ``urgent`` on its ``text`` (a ``DecideNode`` on
    ``engine()`` with ``policy``) and routes to ``page`` (yes) or ``queue`` (no), each
    setting ``out``."""
    from langgraph.graph import START, StateGraph

    from agentbranch.langgraph import DecideNode

    node = DecideNode(engine(), {"urgent": URGENT}, policy=policy, state_key="text")
    g = StateGraph(UrgentState)
    g.add_node("decide", node)
    g.add_node("page", lambda s: {"out": "page"})
    g.add_node("queue", lambda s: {"out": "queue"})
    g.add_edge(START, "decide")
    edge = node.router("urgent", {"yes": "page", "no": "queue"})
    g.add_conditional_edges("decide", edge, edge.path_map)
    return g.compile(checkpointer=checkpointer)


def observe_fallback(
    earned: Earned,
    teacher_label: str,
    confidence: float,
    key: QuestionKey = QuestionKey("q", {"q": 1}, "r", "m"),
) -> Any:
    """What ``earned`` makes of a fallback's label on a yes/no question whose engine said
    "yes" with ``confidence`` (the evidence record, or ``None`` when it keeps none)."""
    return earned.observe(
        key,
        teacher_label,
        source="fallback",
        band="fallback",
        confidence=confidence,
        options=["yes", "no"],
        engine_label="yes",
        rate=1.0,
        take_at=None,
        trust="learning",
    )
