"""What a coalesced pattern pays before the engine does anything: N callers in at once.

    OMP_NUM_THREADS=1 python benchmarks/bench_blocking_bound.py [--reps 9]

``bench_patterns.py`` bounds a calling pattern by one pre-planned ``decide_many`` plus
the same pattern with a function that needs no engine (an empty thread, a constant node,
a constant tool). That function returns at once, so its pool reuses threads that are
already up and never has N runs in flight. A decision through the coalescer blocks its
caller until its batch is read, so all N callers (N threads, N LangGraph runs, N tool
calls on N more threads) are alive at once: Python starts every one of them, one
after the other under the GIL, before the last request can be queued.

This script times, on the embedded CPU reader, for 32 threads, ``graph.batch`` with
``max_concurrency=32`` and ``decision_tool`` from 32 agent steps, alternated in one
process: the bound's ``decide_many``, the no-engine pattern as ``bench_patterns.py``
times it, the same no-engine pattern with every caller blocking until all N are in
(a ``threading.Barrier``: what any shared batch asks of its callers), and the pattern
on the engine (its labels checked against ``decide_many``'s). It prints the pattern's
fraction of both bounds (medians of ``--reps`` repetitions); nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parents[1]
try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))

import agentbranch as ab  # noqa: E402
from agentbranch_bench.workload import TICKETS  # noqa: E402

#: The questions of ``bench_patterns.py``.
QUESTIONS = {
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
        ["calm and polite message", "annoyed but patient message", "angry, threatening to leave"],
    ),
}


class S(TypedDict, total=False):
    ticket: str
    decisions: dict


def node_graph(node: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(S)
    g.add_node("triage", node)
    g.add_edge(START, "triage")
    g.add_edge("triage", END)
    return g.compile()


def tool_graph(tool: Any) -> Any:
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    g = StateGraph(MessagesState)
    g.add_node("tools", ToolNode([tool]))
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile()


def tool_calls(batch: list[str]) -> list[dict[str, Any]]:
    from langchain_core.messages import AIMessage

    call = {"name": "decide", "type": "tool_call"}
    return [
        {"messages": [AIMessage("", tool_calls=[{**call, "args": {"text": s}, "id": f"c{i}"}])]}
        for i, s in enumerate(batch)
    ]


def function_tool(fn: Callable[[str], Any]) -> Any:
    """A tool of ``decision_tool``'s shape running ``fn`` (no engine)."""
    from langchain_core.tools import StructuredTool

    from agentbranch.integrations.langchain import _DecisionInput

    def run(text: str) -> tuple[str, dict[str, Any]]:
        fn(text)
        return "team=billing (confidence 1.00)", {}

    return StructuredTool.from_function(
        func=run,
        name="decide",
        description="decide",
        args_schema=_DecisionInput,
        response_format="content_and_artifact",
    )


def patterns(engine: Any, batch: list[str]) -> dict[str, dict[str, Callable[[], Any]]]:
    """pattern -> {"no engine", "all in", "engine"} runs; each returns labels or None."""
    from agentbranch.langchain import decision_tool
    from agentbranch.langgraph import decide_node

    n = len(batch)
    box: dict[str, threading.Barrier] = {}

    def all_in(_: Any = None) -> None:  # every caller waits for all n, as a batch does
        box["barrier"].wait(timeout=30)

    def fresh(run: Callable[[], Any]) -> Callable[[], Any]:
        def go() -> Any:
            box["barrier"] = threading.Barrier(n)
            return run()

        return go

    def pool(fn: Callable[[str], Any]) -> Callable[[], list[Any]]:
        def run() -> list[Any]:
            with ThreadPoolExecutor(n) as executor:
                return list(executor.map(fn, batch))

        return run

    inputs = [{"ticket": s} for s in batch]
    full = {"max_concurrency": n}
    decided = node_graph(decide_node(engine, QUESTIONS, state_key="ticket"))
    empty = node_graph(lambda state: {"decisions": {}})
    waiting = node_graph(lambda state: (all_in(), {"decisions": {}})[1])
    tools = tool_graph(decision_tool(engine, QUESTIONS))
    constant = tool_graph(function_tool(lambda text: None))
    blocking = tool_graph(function_tool(all_in))

    def node_labels(out: list[Any]) -> list[dict[str, str]]:
        return [{q: r["label"] for q, r in o["decisions"].items()} for o in out]

    def tool_labels(out: list[Any]) -> list[dict[str, str]]:
        return [{q: r["label"] for q, r in o["messages"][-1].artifact.items()} for o in out]

    return {
        f"threads ({n})": {
            "no engine": pool(lambda s: None),
            "all in": fresh(pool(all_in)),
            "engine": lambda: [
                {q: d.label for q, d in r.items()}
                for r in pool(lambda s: engine.decide(s, QUESTIONS))()
            ],
        },
        f"graph.batch ({n})": {
            "no engine": lambda: empty.batch(inputs, config=full),
            "all in": fresh(lambda: waiting.batch(inputs, config=full)),
            "engine": lambda: node_labels(decided.batch(inputs, config=full)),
        },
        f"tool ({n} agent steps)": {
            "no engine": lambda: constant.batch(tool_calls(batch), config=full),
            "all in": fresh(lambda: blocking.batch(tool_calls(batch), config=full)),
            "engine": lambda: tool_labels(tools.batch(tool_calls(batch), config=full)),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--callers", type=int, default=32)
    args = ap.parse_args()
    if args.reps < 1 or args.callers < 2:
        ap.error("--reps must be at least 1 and --callers at least 2")
    from agentbranch.engine.readers.embedded import EmbeddedReader

    reader = EmbeddedReader()
    plain = ab.DecisionEngine(reader, batching=False)
    engine = ab.DecisionEngine(reader)
    batch = [f"{TICKETS[i % len(TICKETS)]} (ticket b{i})" for i in range(args.callers)]
    want = [{q: d.label for q, d in r.items()} for r in plain.decide_many(batch, QUESTIONS)]
    table = patterns(engine, batch)
    differ = [name for name, runs in table.items() if runs["engine"]() != want]  # + warm-up
    for runs in table.values():
        runs["no engine"]()
        runs["all in"]()
    parts = ("decide_many", "no engine", "all in", "engine")
    times: dict[str, dict[str, list[float]]] = {n: {p: [] for p in parts} for n in table}
    for rep in range(args.reps):
        for name, runs in table.items():
            jobs = [("decide_many", lambda: plain.decide_many(batch, QUESTIONS)), *runs.items()]
            shift = rep % len(jobs)
            for part, fn in jobs[shift:] + jobs[:shift]:
                start = time.perf_counter()
                fn()
                times[name][part].append(time.perf_counter() - start)
        print(f"  repetition {rep + 1}/{args.reps} done", file=sys.stderr, flush=True)
    print(f"\nembedded (MiniLM, CPU), {args.callers} callers, medians of {args.reps} (ms)")
    print(
        f"{'pattern':<24}{'decide_many':>12}{'no engine':>10}{'all in':>8}{'engine':>8}"
        f"{'fraction':>10}{'all-in fraction':>17}"
    )
    for name, t in times.items():
        m = {p: statistics.median(v) for p, v in t.items()}
        frac = statistics.median(
            (d + e) / p for d, e, p in zip(t["decide_many"], t["no engine"], t["engine"])
        )
        frac_in = statistics.median(
            (d + e) / p for d, e, p in zip(t["decide_many"], t["all in"], t["engine"])
        )
        print(
            f"{name:<24}{m['decide_many'] * 1e3:12.0f}{m['no engine'] * 1e3:10.0f}"
            f"{m['all in'] * 1e3:8.0f}{m['engine'] * 1e3:8.0f}{frac:10.3f}{frac_in:17.3f}"
        )
    if differ:
        print(f"LABELS DIFFER from decide_many: {differ}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    engine.close()
    reader.close()


if __name__ == "__main__":
    main()
