"""Every calling pattern as a fraction of its bound, on one reader, in one run.

The **bound** of a pattern is what nothing in agentbranch could beat: ONE ``decide_many``
of the same states on an engine without the coalescer (``batching=False``: the states
are known beforehand, no caller waits for another), plus what the same pattern costs
with a function that needs no engine (a constant graph node, a constant tool, an empty
thread or task: LangGraph's, LangChain's and Python's own work, not ours to cut). The
**fraction** is bound / pattern time: 1.0 means the coalescer, the engine and the
integration add nothing to the engine's own limit.

Patterns (``n`` distinct states, default 32): ``1 caller`` (``single`` states decided
one after the other, against ``decide_many([state])`` of each), ``threads`` (n threads
calling ``decide``), ``asyncio`` (n tasks awaiting ``adecide``), ``graph.batch`` at
``max_concurrency=n`` and at LangGraph's default (``min(32, CPUs + 4)``; no target: it
runs fewer callers than states), ``graph.abatch`` and ``tool`` (``decision_tool`` from
n agent steps, a ``ToolNode`` graph).

A second bound, **all in**, adds the no-engine pattern with every caller waiting until
all ``n`` are in flight (``Gate``: each thread waits on a future of its own, all of them
answered by the ``n``-th caller, as the coalescer answers a batch's callers; async
callers at an ``asyncio.Barrier``). A shared batch asks exactly that of its callers
(each blocks until its batch is read), while a function that returns at once lets a
pool reuse the threads already up and never has ``n`` runs alive: starting them all
(``n`` threads, ``n`` LangGraph runs, a ``ToolNode`` thread per call) is Python's and
LangGraph's work that the first bound leaves out. Patterns whose callers cannot all be
in flight at once (one caller; ``graph.batch`` at LangGraph's default concurrency) have
no all-in bound.

Each repetition times, for every pattern, the bound's ``decide_many``, the no-engine
pattern (and its all-in form) and the pattern, in a rotating order; a pattern's fraction is the median of the
repetitions' own fractions. Before timing, every pattern's answers are checked against
``decide_many``'s: the same labels, confidences equal to float rounding (another batch
may sum in another order). Used by ``benchmarks/bench.py`` and
``benchmarks/bench_patterns.py``.
"""

from __future__ import annotations

import asyncio
import gc
import math
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from agentbranch_bench.levers import LEVERS, LeverReader
from agentbranch_bench.pattern_graphs import (
    constant_tool,
    decide_graph,
    pattern_questions,
    pattern_states,
    tool_graph,
    tool_inputs,
)

__all__ = [
    "Gate",
    "VARIANTS",
    "answers_of",
    "engine_for",
    "kind_of",
    "measure",
    "pattern_target",
    "patterns",
    "same_answers",
    "timed",
]

#: The coalescer's levers (``LeverReader`` switches, ``agentbranch_bench.levers``) and the variants that compare
#: them in one run: ``now`` is the library as it is, ``before`` has them off (the
#: coalescer as it was before them; the hold's bound grows with the batch held in every
#: variant), ``no_new_hold`` only ``hold_new_threads``, ``no_settled`` only
#: ``close_when_settled``, ``no_busy`` only ``hold_while_busy``, ``no_pipeline`` only
#: ``pipelined`` (one read per burst, however large), ``parts8`` and ``parts24`` read a
#: burst in parts of 8 or 24 instead of the reader's ``pipelined_batch``; ``straight``
#: holds no batch at all (``max_wait_s`` 0: each batch is what is queued when a worker is free,
#: the coalescer in front of ``VLLMReader`` on a GPU and of ``RemoteReader``).
VARIANTS: dict[str, dict[str, bool | float]] = {
    "now": {},
    "before": dict.fromkeys(LEVERS, False),
    "no_new_hold": {"hold_new_threads": False},
    "no_settled": {"close_when_settled": False},
    "no_busy": {"hold_while_busy": False},
    "no_pipeline": {"pipelined": False},
    "parts8": {"pipelined": False, "max_batch": 8},
    "parts24": {"pipelined": False, "max_batch": 24},
    "straight": {"max_wait_s": 0.0},
}

#: How close to its bound each pattern should come (the open issue's targets); LangGraph's
#: default concurrency runs fewer callers than states, so it has none.
TARGETS = {"1 caller": "≥ 0.90", "graph.batch (default)": None}
TARGET_AT_N = "≥ 0.95"

#: Confidences of a pattern and of ``decide_many`` may differ by float rounding.
TOLERANCE = 1e-5


def pattern_target(name: str) -> str | None:
    """The target of pattern ``name`` (``"≥ 0.95"`` at n callers)."""
    return TARGETS.get(name, TARGET_AT_N)


Pattern = tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any] | None, list[str]]

#: How long a caller of the all-in bound waits at its gate before giving up (a
#: pattern that never has all callers in flight fails instead of hanging).
BARRIER_TIMEOUT_S = 60.0


class Gate:
    """Holds ``n`` callers until all are in: each waits on a future of its own, and the
    ``n``-th caller answers them all, as the coalescer's worker answers a batch's
    callers. (A ``threading.Barrier`` wakes its waiters on one shared condition: each
    re-takes the same lock in turn, a cost no coalesced caller pays.)"""

    def __init__(self, n: int) -> None:
        self.n = n
        self._lock = threading.Lock()
        self._waiting: list[Future[None]] = []

    def wait(self, timeout: float | None = None) -> None:
        mine: Future[None] = Future()
        with self._lock:
            self._waiting.append(mine)
            everyone = list(self._waiting) if len(self._waiting) == self.n else []
        for future in everyone:
            future.set_result(None)
        mine.result(timeout=timeout)


def patterns(
    engine: Any, q: dict[str, Any], n: int, single: int, lengths: str = "short"
) -> dict[str, Pattern]:
    """name -> (run the pattern, run it without the engine, run that with all ``n``
    callers in flight at once or ``None``, its states). Each run returns its results.
    ``lengths``: the states' lengths (``pattern_graphs.LENGTHS``)."""
    from agentbranch.integrations.langchain import decision_tool
    from agentbranch.integrations.langgraph import decide_node

    batch = pattern_states(n, "p-", lengths)
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

    box: dict[str, Any] = {}

    def all_in(*_: Any) -> None:  # every caller waits for all n, as a shared batch does
        box["barrier"].wait(timeout=BARRIER_TIMEOUT_S)

    def fresh(run: Callable[[], Any]) -> Callable[[], Any]:
        def go() -> Any:
            box["barrier"] = Gate(n)
            return run()

        return go

    async def all_in_async(state: Any) -> dict[str, Any]:
        await asyncio.wait_for(box["abarrier"].wait(), BARRIER_TIMEOUT_S)
        return {"decisions": {}}

    def fresh_async(run: Callable[[], Any]) -> Callable[[], Any]:
        async def main() -> Any:
            box["abarrier"] = asyncio.Barrier(n)  # bound to this run's loop
            return await run()

        return lambda: asyncio.run(main())

    waiting = decide_graph(lambda state: (all_in(), {"decisions": {}})[1])
    awaiting = decide_graph(all_in_async)
    blocking_tools = tool_graph(constant_tool(all_in))

    async def gathered() -> list[Any]:
        return await asyncio.gather(*(all_in_async(s) for s in batch))

    ones = pattern_states(single, "one-", lengths)
    return {
        "1 caller": (
            lambda: [engine.decide(s, q) for s in ones],
            lambda: [None for _ in ones],
            None,
            ones,
        ),
        f"threads ({n})": (
            threads(lambda s: engine.decide(s, q)),
            threads(lambda s: None),
            fresh(threads(all_in)),
            batch,
        ),
        f"asyncio ({n})": (
            tasks(lambda s: engine.adecide(s, q)),
            tasks(nothing),
            fresh_async(gathered),
            batch,
        ),
        f"graph.batch ({n})": (
            lambda: app.batch(inputs, config=full),
            lambda: empty.batch(inputs, config=full),
            fresh(lambda: waiting.batch(inputs, config=full)),
            batch,
        ),
        "graph.batch (default)": (
            lambda: app.batch(inputs),
            lambda: empty.batch(inputs),
            None,
            batch,
        ),
        "graph.abatch": (
            lambda: asyncio.run(app.abatch(inputs)),
            lambda: asyncio.run(empty.abatch(inputs)),
            fresh_async(lambda: awaiting.abatch(inputs)),
            batch,
        ),
        f"tool ({n} agent steps)": (
            lambda: tools.batch(tool_inputs(batch), config=full),
            lambda: no_tools.batch(tool_inputs(batch), config=full),
            fresh(lambda: blocking_tools.batch(tool_inputs(batch), config=full)),
            batch,
        ),
    }


def kind_of(name: str) -> str:
    """How pattern ``name`` returns its results (see ``answers_of``)."""
    for kind in ("1 caller", "threads", "asyncio", "tool"):
        if name.startswith(kind):
            return kind
    return "graph"


def answers_of(kind: str, out: Any) -> list[dict[str, tuple[str, float]]]:
    """Each result's ``{question: (label, confidence)}``."""
    if kind in ("threads", "asyncio", "1 caller"):
        return [{q: (d.label, d.confidence) for q, d in r.items()} for r in out]
    if kind == "tool":
        records = [o["messages"][-1].artifact for o in out]
    else:
        records = [o["decisions"] for o in out]
    return [{q: (r["label"], r["confidence"]) for q, r in rec.items()} for rec in records]


def same_answers(
    got: list[dict[str, tuple[str, float]]], want: list[dict[str, tuple[str, float]]]
) -> bool:
    """The same labels, and confidences equal to ``TOLERANCE``."""
    return len(got) == len(want) and all(
        g.keys() == w.keys()
        and all(g[q][0] == w[q][0] and math.isclose(g[q][1], w[q][1], abs_tol=TOLERANCE) for q in g)
        for g, w in zip(got, want)
    )


def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds of ``fn()``."""
    cpu, start = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def engine_for(reader: Any, levers: dict[str, bool | float]) -> Any:
    """A default engine on ``reader`` whose coalescer (a ``LeverReader``) has ``levers``
    set."""
    import agentbranch as ab

    engine = ab.DecisionEngine(LeverReader(reader))
    for lever, on in levers.items():
        setattr(engine.reads_via, lever, on)
    return engine


def _reads_per_run(cuts: Counter[str]) -> float | None:
    """The mean number of reader calls per run of a pattern (``cuts``: how each run was
    cut, ``"alone1 + quiet31"``)."""
    runs = sum(cuts.values())
    if not runs:
        return None
    return sum((cut.count(" + ") + 1 if cut else 0) * k for cut, k in cuts.items()) / runs


def _medians(
    t: dict[str, list[float]], cpu: dict[str, list[float]], variants: list[str], calls: Any
) -> dict[str, Any]:
    bound = statistics.median(t["bound"]) + statistics.median(t["empty"])
    all_in = t.get("all_in") or []
    row: dict[str, Any] = {
        "decide_many_s": statistics.median(t["bound"]),
        "no_engine_s": statistics.median(t["empty"]),
        "no_engine_all_in_s": statistics.median(all_in) if all_in else None,
        "bound_s": bound,
        "bound_cpu_s": statistics.median(cpu["bound"]) + statistics.median(cpu["empty"]),
    }
    for v in variants:
        pattern = statistics.median(t[v])
        # each repetition's own fraction (its parts ran back to back), then the median
        paired = [(b + e) / p for b, e, p in zip(t["bound"], t["empty"], t[v])]
        paired_in = [(b + a) / p for b, a, p in zip(t["bound"], all_in, t[v])]
        row[v] = {
            "fraction": statistics.median(paired),
            "fraction_all_in": statistics.median(paired_in) if paired_in else None,
            "fraction_of_medians": bound / pattern,
            "pattern_s": pattern,
            "pattern_cpu_s": statistics.median(cpu[v]),
            "reader_calls": calls[v].most_common(3),
            "reads_per_run": _reads_per_run(calls[v]),
        }
    return row


def measure(
    reader: Any,
    label: str,
    *,
    n: int = 32,
    single: int = 16,
    reps: int = 5,
    questions: int = 3,
    variants: list[str] | None = None,
    only: list[str] | None = None,
    tick: Callable[[str], None] = lambda _: None,
    freeze_gc: bool = False,
    lengths: str = "short",
) -> dict[str, Any]:
    """Every pattern's fraction of its bound on ``reader`` for each variant of the
    coalescer (``VARIANTS``; default ``["now"]``), all alternated in one run; ``only``
    keeps the patterns whose names start so; ``lengths`` picks one-line states
    (``"short"``) or the ragged lengths of real traffic (``"mixed"``).
    ``labels_differ`` names the patterns (and
    variants) whose answers were not ``decide_many``'s.

    ``freeze_gc``: after the warm-up, move every object then alive out of the garbage
    collector's reach (``gc.freeze()``, undone at the end). A full collection otherwise
    scans the million-odd objects of torch, transformers and LangGraph and stops the
    process for 0.2–0.4 s wherever it falls, in a pattern's run or in its bound's: the
    same for every variant, but the largest noise in a single run's fractions."""
    import agentbranch as ab

    if reps < 1:
        raise ValueError("reps must be at least 1")
    variants = variants or ["now"]
    plain = ab.DecisionEngine(reader, batching=False)
    q = pattern_questions(questions)
    engines = {v: engine_for(reader, VARIANTS[v]) for v in variants}
    tables = {v: patterns(engine, q, n, single, lengths) for v, engine in engines.items()}
    names = [k for k in tables[variants[0]] if not only or any(k.startswith(o) for o in only)]

    def bound_for(name: str, batch: list[str]) -> Callable[[], Any]:
        if name == "1 caller":
            return lambda: [plain.decide_many([s], q)[0] for s in batch]
        return lambda: plain.decide_many(batch, q)

    # warm up and check: every pattern answers as decide_many does
    mismatched = []
    for v, table in tables.items():
        for name in names:
            run, empty, all_in, batch = table[name]
            want = answers_of("1 caller", bound_for(name, batch)())
            empty()
            if all_in is not None:
                all_in()
            if not same_answers(answers_of(kind_of(name), run()), want):
                mismatched.append(f"{name} ({v})")
    if freeze_gc:
        gc.collect()
        gc.freeze()
    try:
        timing = _repetitions(tables, engines, names, variants, bound_for, reps, label, tick)
    finally:
        if freeze_gc:
            gc.unfreeze()
    times, cpu, calls = timing
    return {
        "reader": label,
        "questions": list(q),
        "callers": n,
        "lengths": lengths,
        "reps": reps,
        "variants": {v: VARIANTS[v] for v in variants},
        "gc_frozen": freeze_gc,
        "patterns": {
            name: _medians(times[name], cpu[name], variants, calls[name]) for name in names
        },
        "labels_differ": mismatched,
    }


def _repetitions(
    tables: dict[str, dict[str, Pattern]],
    engines: dict[str, Any],
    names: list[str],
    variants: list[str],
    bound_for: Callable[[str, list[str]], Callable[[], Any]],
    reps: int,
    label: str,
    tick: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Time every pattern ``reps`` times, each repetition in a rotating order: wall and
    CPU seconds per pattern and part, and how each variant's runs were cut into reads."""
    parts = ("bound", "empty", "all_in", *variants)
    times = {name: {part: [] for part in parts} for name in names}
    cpu = {name: {part: [] for part in parts} for name in names}
    calls: dict[str, dict[str, Counter[str]]] = {
        name: {v: Counter() for v in variants} for name in names
    }
    for rep in range(reps):
        for name in names:
            _, empty, all_in, batch = tables[variants[0]][name]
            jobs = [("bound", bound_for(name, batch), None), ("empty", empty, None)]
            if all_in is not None:
                jobs.append(("all_in", all_in, None))
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
        tick(f"{label}: calling patterns, repetition {rep + 1}/{reps} done")
    return times, cpu, calls
