"""Every calling pattern answers exactly as one ``decide_many`` of the same states.

The patterns of ``benchmarks/bench_patterns.py``: one caller, 32 threads calling
``decide``, 32 asyncio tasks, ``graph.batch`` at ``max_concurrency=32`` and at
LangGraph's default, ``abatch``, and a LangChain tool called from 32 agent steps
(``ToolNode`` runs). However the coalescer cuts them into reader batches (a lone caller,
a held burst, a pool of threads coming back round after round), each caller gets the
labels and probabilities ``decide_many`` gives its state. With the coalescer's all-in
rule on and off. No timing is asserted.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict

import pytest
from agentbranch_bench.levers import LeverReader
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

import agentbranch as ab
from agentbranch.langchain import decision_tool
from agentbranch.langgraph import decide_node

N = 32
QUESTIONS = {
    "team": ab.choice(
        "Which team?",
        {"billing": "invoices and refunds", "outage": "service down", "bug": "broken"},
    ),
    "urgent": ab.yes_no("Urgent?", yes="customers are blocked", no="it can wait"),
}
TICKETS = ["charged twice", "site down", "button broken", "refund please", "login fails"]
STATES = [f"{TICKETS[i % len(TICKETS)]} (ticket {i})" for i in range(N)]


def hashed(state: str, q: Any) -> dict[str, float]:
    """A distribution that depends on the state and the question (no two alike)."""
    weights = [
        1 + int(hashlib.sha256(f"{state}|{q.id}|{o}".encode()).hexdigest()[:6], 16) % 97
        for o in q.options
    ]
    return {o: w / sum(weights) for o, w in zip(q.options, weights)}


class S(TypedDict, total=False):
    ticket: str
    decisions: dict


def _graph(engine: Any) -> Any:
    g = StateGraph(S)
    g.add_node("triage", decide_node(engine, QUESTIONS, state_key="ticket"))
    g.add_edge(START, "triage")
    g.add_edge("triage", END)
    return g.compile()


def _tool_graph(engine: Any) -> Any:
    g = StateGraph(MessagesState)
    g.add_node("tools", ToolNode([decision_tool(engine, QUESTIONS)]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile()


def _of_decisions(out: list[Any]) -> list[dict[str, tuple[str, dict[str, float]]]]:
    return [{q: (d.label, d.probabilities) for q, d in r.items()} for r in out]


def _of_records(records: list[dict[str, Any]]) -> list[dict[str, tuple[str, dict[str, float]]]]:
    return [{q: (r["label"], r["probabilities"]) for q, r in rec.items()} for rec in records]


def run_pattern(name: str, engine: Any) -> list[dict[str, tuple[str, dict[str, float]]]]:
    """Each state's ``{question: (label, probabilities)}``, through pattern ``name``."""
    inputs = [{"ticket": s} for s in STATES]
    if name == "1 caller":
        return _of_decisions([engine.decide(s, QUESTIONS) for s in STATES[:4]])
    if name == "threads":
        with ThreadPoolExecutor(N) as pool:
            return _of_decisions(list(pool.map(lambda s: engine.decide(s, QUESTIONS), STATES)))
    if name == "asyncio":

        async def main() -> list[Any]:
            return await asyncio.gather(*(engine.adecide(s, QUESTIONS) for s in STATES))

        return _of_decisions(asyncio.run(main()))
    if name == "graph.batch":
        out = _graph(engine).batch(inputs, config={"max_concurrency": N})
        return _of_records([o["decisions"] for o in out])
    if name == "graph.batch default":
        return _of_records([o["decisions"] for o in _graph(engine).batch(inputs)])
    if name == "abatch":
        return _of_records([o["decisions"] for o in asyncio.run(_graph(engine).abatch(inputs))])
    assert name == "tool"
    calls = [
        {
            "messages": [
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "decide", "args": {"text": s}, "id": f"c{i}", "type": "tool_call"}
                    ],
                )
            ]
        }
        for i, s in enumerate(STATES)
    ]
    out = _tool_graph(engine).batch(calls, config={"max_concurrency": N})
    return _of_records([o["messages"][-1].artifact for o in out])


PATTERNS = [
    "1 caller",
    "threads",
    "asyncio",
    "graph.batch",
    "graph.batch default",
    "abatch",
    "tool",
]


@pytest.mark.parametrize("levers", [True, False], ids=["levers on", "levers off"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_pattern_answers_as_decide_many(pattern: str, levers: bool) -> None:
    # a short sleep per read, so concurrent callers really share batches
    reader = ab.ScriptedReader(default=hashed, delay_s=0.002)
    engine = ab.DecisionEngine(LeverReader(reader))
    coalescer = engine.reads_via
    coalescer.close_when_all_in = levers
    coalescer.hold_new_threads = levers  # a fresh pool's first thread is held
    coalescer.close_when_settled = levers  # a burst closes once nobody is left to call
    coalescer.hold_while_busy = levers  # a quiet gap while the process works starts again
    want = _of_decisions(ab.DecisionEngine(reader, batching=False).decide_many(STATES, QUESTIONS))
    got = run_pattern(pattern, engine)
    assert got == want[: len(got)]
    if pattern != "1 caller":
        assert len(got) == N
        # the states were read in fewer reader calls than callers
        assert coalescer.stats["requests"] == N and coalescer.stats["batches"] < N
    engine.close()


def test_every_pattern_answers_as_decide_many_on_the_embedded_reader() -> None:
    """The CPU default: the same labels, and probabilities equal to float rounding (a
    forward of another batch may sum in another order)."""
    reader = ab.EmbeddedReader()
    want = _of_decisions(ab.DecisionEngine(reader, batching=False).decide_many(STATES, QUESTIONS))
    engine = ab.DecisionEngine(reader)
    for pattern in PATTERNS:
        got = run_pattern(pattern, engine)
        assert [{q: label for q, (label, _) in r.items()} for r in got] == [
            {q: label for q, (label, _) in r.items()} for r in want[: len(got)]
        ], pattern
        for g, w in zip(got, want):
            for q in g:
                for option, p in g[q][1].items():
                    assert math.isclose(p, w[q][1][option], abs_tol=1e-5), (pattern, q)
    engine.close()


def test_mixed_length_pattern_states_are_distinct_ragged_and_the_same_each_run() -> None:
    from agentbranch_bench.pattern_graphs import pattern_states

    states = pattern_states(64, "p-", "mixed")
    words = sorted(len(s.split()) for s in states)
    assert len(set(states)) == 64 and states == pattern_states(64, "p-", "mixed")
    assert words[-1] > 4 * words[len(words) // 2]  # a long tail beside short states
    assert pattern_states(64, "one-", "mixed") != states  # each tag its own draw
    with pytest.raises(ValueError, match="lengths must be one of"):
        pattern_states(4, "p-", "long")
