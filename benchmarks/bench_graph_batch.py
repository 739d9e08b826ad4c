"""``graph.batch(32)`` vs ``decide_many(32)``, the coalescer's burst hold vs a fixed window.

    python benchmarks/bench_graph_batch.py [--runs 5] [--pairs 9] [--sweep] [--ainvoke]

The same measurement as ``agentbranch bench`` (``cpu_part``): a tiny random DiffusionGemma
(hidden 128, 2 layers, vocab 2048) read by ``TransformersReader``, a one-node
``decide_node`` graph run as ``app.batch(32 inputs, max_concurrency=32)``, against
``engine.decide_many`` of the same 32 states. Here two coalescers over the ONE reader are
compared in one process, every run alternating decide_many, graph (hold), graph (window)
in rotating order:

* ``hold``: ``BatchingReader`` as it is (a burst's batch is held until arrivals pause);
* ``window``: the rule before it, a fixed ``max_wait_s`` window (2 ms) once others are in
  flight.

Each run prints, per variant, the ratio of the medians of ``pairs`` timings (as the bench
does) and how the batches closed (sizes and reasons, ``BatchingReader.batch_closes``);
the summary prints each variant's ratios over the runs. ``--sweep`` also times the
concurrency sweep (1, 4, 16, 64 threads, 32 decisions), ``--ainvoke`` 32 concurrent
``ainvoke`` instead of ``graph.batch``. Nothing is asserted; the machine's load moves
single runs a lot, so compare the medians and the spreads.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import agentbranch as ab
from agentbranch.bench import _decide_graph, _questions, _tiny_reader, run_threads, states
from agentbranch.engine.batching import BatchingReader
from agentbranch.testing import build_tiny_diffusiongemma


class FixedWindow(BatchingReader):
    """The coalescer's previous rule: once other callers are in flight, every batch that
    is not full waits ``max_wait_s`` from when the worker takes it, then closes."""

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
            self._cond.wait(left)
        return "full"


def closes(coalescer: BatchingReader, n: int) -> str:
    return " ".join(f"{size}{why[0]}" for size, why in list(coalescer.batch_closes)[-n:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--ainvoke", action="store_true")
    args = ap.parse_args()

    q = _questions()
    with tempfile.TemporaryDirectory(prefix="agentbranch-bench-") as tmp:
        folder = build_tiny_diffusiongemma(
            Path(tmp) / "model", hidden_size=128, num_layers=2, vocab_size=2048
        )
        reader = _tiny_reader(folder)
        variants = {"hold": BatchingReader(reader), "window": FixedWindow(reader)}
        engines = {name: ab.DecisionEngine(co) for name, co in variants.items()}
        many_engine = ab.DecisionEngine(reader)
        apps = {name: _decide_graph(e) for name, e in engines.items()}
        batch_states = states(32, "graph-")
        inputs = [{"ticket": s} for s in batch_states]

        def many() -> None:
            many_engine.decide_many(batch_states, q)

        def graph(name: str) -> None:
            if args.ainvoke:

                async def all_runs() -> None:
                    await asyncio.gather(*(apps[name].ainvoke(x) for x in inputs))

                asyncio.run(all_runs())
            else:
                apps[name].batch(inputs, config={"max_concurrency": 32})

        # warm-up, as the bench's sweep warms its engine
        for name, engine in engines.items():
            run_threads(lambda i, e=engine: e.decide(batch_states[i], q), 16, 2)
            graph(name)
        many()

        names = list(variants)
        ratios: dict[str, list[float]] = {n: [] for n in names}
        why: dict[str, Counter[str]] = {n: Counter() for n in names}
        per_call: dict[str, list[int]] = {n: [] for n in names}
        what = "32 × ainvoke" if args.ainvoke else "graph.batch(32)"
        print(f"{what} vs decide_many(32): ratio of medians of {args.pairs} pairs per run")
        for run in range(args.runs):
            t_many: list[float] = []
            t_graph: dict[str, list[float]] = {n: [] for n in names}
            for i in range(args.pairs):
                start = time.perf_counter()
                many()
                t_many.append(time.perf_counter() - start)
                for name in names[i % 2 :] + names[: i % 2]:
                    before = variants[name].stats["batches"]
                    start = time.perf_counter()
                    graph(name)
                    t_graph[name].append(time.perf_counter() - start)
                    per_call[name].append(variants[name].stats["batches"] - before)
            line = [f"run {run}: decide_many {statistics.median(t_many) * 1e3:.0f} ms"]
            for name in names:
                ratio = statistics.median(t_many) / statistics.median(t_graph[name])
                ratios[name].append(ratio)
                recent = list(variants[name].batch_closes)[-per_call[name][-1] :]
                why[name].update(w for _, w in list(variants[name].batch_closes)[-64:])
                line.append(f"{name} {ratio:.3f} (last: {closes(variants[name], len(recent))})")
            print(" | ".join(line), flush=True)
        print("batch closes: a = alone, q = quiet gap, b = bound, f = full, w = window")
        for name in names:
            xs = ratios[name]
            reads = Counter(per_call[name])
            print(
                f"{name:>6}: median {statistics.median(xs):.3f}, min {min(xs):.3f}, max "
                f"{max(xs):.3f}, runs >= 0.85: {sum(x >= 0.85 for x in xs)}/{len(xs)}; "
                f"reader calls per {what}: {dict(sorted(reads.items()))}"
            )

        if args.sweep:
            total = 32
            print("concurrency sweep, threads, decisions/s (alternated, median of 5)")
            for callers in (1, 4, 16, 64):
                per = max(1, total // callers)
                speed: dict[str, list[float]] = {n: [] for n in names}
                for rep in range(5):
                    for name in names[rep % 2 :] + names[: rep % 2]:
                        pool = states(callers * per, f"sweep-{rep}-{callers}-{name}-")
                        e = engines[name]
                        start = time.perf_counter()
                        run_threads(lambda i, p=pool, e=e: e.decide(p[i], q), callers, per)
                        speed[name].append(callers * per / (time.perf_counter() - start))
                print(
                    f"  {callers:>2} callers: "
                    + ", ".join(f"{n} {statistics.median(speed[n]):.1f}/s" for n in names)
                )


if __name__ == "__main__":
    main()
