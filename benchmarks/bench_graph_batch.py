"""``graph.batch(32)`` vs ``decide_many(32)``: the coalescer's burst hold vs a fixed window.

    python benchmarks/bench_graph_batch.py [--runs 10] [--pairs 9] [--ainvoke] [--sweep 0]

The measurement of ``benchmarks/bench.py`` (``cpu_part``), in the same setting: a tiny
random DiffusionGemma (hidden 128, 2 layers, vocab 2048) read by ``TransformersReader``
through ONE default ``DecisionEngine``, warmed by the same concurrency sweep, then a
one-node ``decide_node`` graph run as ``app.batch(32 inputs, max_concurrency=32)``
against ``engine.decide_many`` of the same 32 states. Two rules for closing a batch are
compared on that one engine's coalescer, alternated call by call (decide_many, then both
rules in turns):

* ``hold``: ``BatchingReader`` as it is (a burst's batch is held until arrivals pause);
* ``window``: the rule before it (``FixedWindow._hold``): once other callers are in
  flight, every batch that is not full waits a fixed ``max_wait_s`` (2 ms), woken by
  every arrival.

Each run prints each rule's ratio of the medians of ``pairs`` timings (as the bench does)
and the median CPU time of the process per call; the summary prints every run's ratios,
how many runs reach 0.85, and how many reader calls each ``graph.batch`` took.
``--ainvoke`` times 32 concurrent ``ainvoke`` instead; ``--sweep N`` also times the
concurrency sweep (threads and asyncio tasks, 4, 16 and 64 callers) N times per rule,
alternated. Nothing is asserted: other jobs on the machine move single runs a lot, so
compare the medians and the spreads.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import types
from collections import Counter
from pathlib import Path

try:
    import agentbranch  # noqa: F401
    import agentbranch_bench  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import agentbranch as ab
from agentbranch.engine.batching import BatchingReader
from agentbranch.testing import build_tiny_diffusiongemma
from agentbranch_bench.cpu import decide_graph, tiny_reader
from agentbranch_bench.timing import sweep_point
from agentbranch_bench.workload import questions, states

RULES = ("hold", "window")


class FixedWindow(BatchingReader):
    """The coalescer's previous rule: once other callers are in flight, every batch that
    is not full waits ``max_wait_s`` from when the worker takes it (woken by every
    arrival, as before), then closes."""

    def _hold(self) -> str:
        if len(self._queue) >= self.max_batch:
            return "full"
        if not self._crowded:
            return "alone"
        deadline = time.monotonic() + self.max_wait_s
        while len(self._queue) < self.max_batch and not self._closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return "window"
            self._cond.wait(left)  # _offer notifies _cond on every arrival
        return "full"


def use(coalescer: BatchingReader, rule: str) -> None:
    """Switch the one coalescer between the two rules (only ``_hold`` differs)."""
    if rule == "window":
        coalescer._hold = types.MethodType(FixedWindow._hold, coalescer)  # type: ignore[method-assign]
    else:
        coalescer.__dict__.pop("_hold", None)


def sweep(engine: ab.DecisionEngine, q: dict, times: int) -> None:
    coalescer = engine.reads_via
    speed: dict[tuple[str, int, str], list[float]] = {}
    for rep in range(times):
        for kind in ("threads", "asyncio"):
            for callers in (4, 16, 64):
                for rule in RULES[rep % 2 :] + RULES[: rep % 2]:
                    use(coalescer, rule)
                    tag = f"sweep-{rep}-{kind}-{callers}-{rule}-"
                    rate = sweep_point(engine, q, kind, callers, 32, tag)
                    speed.setdefault((kind, callers, rule), []).append(rate)
    print(f"concurrency sweep, decisions/s (median of {times}, rules alternated)")
    for kind in ("threads", "asyncio"):
        for callers in (4, 16, 64):
            hold, window = (statistics.median(speed[(kind, callers, r)]) for r in RULES)
            print(
                f"  {kind:>7} {callers:>2} callers: hold {hold:5.1f}, window {window:5.1f} "
                f"({hold / window:.2f}×)"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--ainvoke", action="store_true")
    ap.add_argument("--sweep", type=int, default=0, metavar="N")
    args = ap.parse_args()

    q = questions()
    with tempfile.TemporaryDirectory(prefix="agentbranch-bench-") as tmp:
        folder = build_tiny_diffusiongemma(
            Path(tmp) / "model", hidden_size=128, num_layers=2, vocab_size=2048
        )
        engine = ab.DecisionEngine(tiny_reader(folder))
        coalescer = engine.reads_via
        for kind in ("threads", "asyncio"):  # cpu_part's sweep, which warms the engine
            for callers in (1, 4, 16, 64):
                sweep_point(engine, q, kind, callers, 32, f"warm-{kind}-{callers}-")
        app = decide_graph(engine)
        batch_states = states(32, "graph-")
        inputs = [{"ticket": s} for s in batch_states]
        calls: dict[str, Counter[int]] = {rule: Counter() for rule in RULES}

        def many() -> None:
            engine.decide_many(batch_states, q)

        def graph(rule: str) -> None:
            use(coalescer, rule)
            before = coalescer.stats["batches"]
            if args.ainvoke:

                async def all_runs() -> None:
                    await asyncio.gather(*(app.ainvoke(x) for x in inputs))

                asyncio.run(all_runs())
            else:
                app.batch(inputs, config={"max_concurrency": 32})
            calls[rule][coalescer.stats["batches"] - before] += 1

        def timed(fn: object, *a: str) -> tuple[float, float]:
            cpu, wall = time.process_time(), time.perf_counter()
            fn(*a)  # type: ignore[operator]
            return time.perf_counter() - wall, time.process_time() - cpu

        many(), graph("hold"), graph("window")
        for c in calls.values():
            c.clear()
        what = "32 × ainvoke" if args.ainvoke else "graph.batch(32)"
        print(f"{what} vs decide_many(32), ratio of the medians of {args.pairs} timings per run")
        ratios: dict[str, list[float]] = {rule: [] for rule in RULES}
        for run in range(args.runs):
            t_many: list[tuple[float, float]] = []
            t_graph: dict[str, list[tuple[float, float]]] = {rule: [] for rule in RULES}
            for i in range(args.pairs):
                t_many.append(timed(many))
                for rule in RULES[i % 2 :] + RULES[: i % 2]:
                    t_graph[rule].append(timed(graph, rule))
            wall_many = statistics.median(w for w, _ in t_many)
            line = [f"run {run}: decide_many {wall_many * 1e3:.0f} ms"]
            for rule in RULES:
                ratio = wall_many / statistics.median(w for w, _ in t_graph[rule])
                ratios[rule].append(ratio)
                cpu = statistics.median(c for _, c in t_graph[rule])
                line.append(f"{rule} {ratio:.3f} (CPU {cpu * 1e3:.0f} ms)")
            cpu_many = statistics.median(c for _, c in t_many)
            print(" | ".join(line) + f" | decide_many CPU {cpu_many * 1e3:.0f} ms", flush=True)
        for rule in RULES:
            xs = ratios[rule]
            print(
                f"{rule:>6}: median {statistics.median(xs):.3f} (min {min(xs):.3f}, max "
                f"{max(xs):.3f}), >= 0.85 in {sum(x >= 0.85 for x in xs)}/{len(xs)} runs; "
                f"reader calls per {what}: {dict(sorted(calls[rule].items()))}"
            )
        if args.sweep:
            sweep(engine, q, args.sweep)
        engine.close()


if __name__ == "__main__":
    main()
