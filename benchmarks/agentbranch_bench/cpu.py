"""The CPU part: a random-weight DiffusionGemma (``agentbranch.testing``) read by
``TransformersReader`` through ``DecisionEngine``: the concurrency sweep, ``graph.batch``
and ``ainvoke`` vs ``decide_many``, a router vs a direct ``decide``, an answer-cache hit
vs a miss and length bucketing; then ``read_vs_generate`` on a ~50M model."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentbranch_bench.generate import read_vs_generate
from agentbranch_bench.joint import joint_vs_singles
from agentbranch_bench.results import BenchResult, Report
from agentbranch_bench.timing import paired, sweep_point
from agentbranch_bench.workload import THREAD, questions, states

__all__ = ["cpu_part", "decide_graph", "tiny_reader"]


def tiny_reader(folder: Path, **backend_kwargs: Any) -> Any:
    """A ``TransformersReader`` on the model in ``folder``."""
    import agentbranch as ab

    return ab.TransformersReader.from_pretrained(folder, **backend_kwargs)


def decide_graph(engine: Any) -> Any:
    """A one-node LangGraph graph deciding ``questions()`` about its ``ticket``."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from agentbranch.integrations.langgraph import decide_node

    class S(TypedDict, total=False):
        ticket: str
        decisions: dict

    g = StateGraph(S)
    g.add_node("triage", decide_node(engine, questions(), state_key="ticket"))
    g.add_edge(START, "triage")
    g.add_edge("triage", END)
    return g.compile()


def cpu_part(report: Report, tick: Callable[[str], None], *, quick: bool) -> None:
    """Every CPU comparison into ``report`` (``tick`` says what was measured)."""
    import agentbranch as ab
    from agentbranch.engine.batching import BatchingReader
    from agentbranch.integrations.langgraph import route
    from agentbranch.testing import build_tiny_diffusiongemma

    reps = 2 if quick else 3
    q = questions()
    with tempfile.TemporaryDirectory(prefix="agentbranch-bench-") as tmp:
        folder = build_tiny_diffusiongemma(
            Path(tmp) / "model", hidden_size=128, num_layers=2, vocab_size=2048
        )
        reader = tiny_reader(folder)
        engine = ab.DecisionEngine(reader)
        tick("tiny DiffusionGemma built")

        # -- concurrency sweep ----------------------------------------------------
        total = 16 if quick else 32
        for kind in ("threads", "asyncio"):
            points: dict[int, float] = {}
            for callers in (1, 4, 16, 64):
                points[callers] = sweep_point(
                    engine, q, kind, callers, total, f"sweep-{kind}-{callers}-"
                )
                tick(f"sweep {kind} {callers} callers: {points[callers]:.1f}/s")
            report.sweep[f"transformers, {kind}"] = points

        # -- graph.batch / ainvoke vs decide_many ---------------------------------
        app = decide_graph(engine)
        batch_states = states(32, "graph-")
        inputs = [{"ticket": s} for s in batch_states]

        def graph_batch() -> Any:
            return app.batch(inputs, config={"max_concurrency": 32})

        def graph_ainvoke() -> Any:
            async def main() -> Any:
                return await asyncio.gather(*(app.ainvoke(x) for x in inputs))

            return asyncio.run(main())

        def many() -> Any:
            return engine.decide_many(batch_states, q)

        coalescer = engine.reads_via
        # 3 paired runs moved these ratios by ±0.05 from run to run; 9 hold them steadier.
        pairs = reps * 3
        for name, fn in (("graph.batch(32)", graph_batch), ("32 × ainvoke", graph_ainvoke)):
            t_many, t_graph = paired(many, fn, pairs)
            sizes = list(coalescer.batch_sizes)[-pairs * 8 :]
            report.results.append(
                BenchResult(
                    f"{name} vs decide_many(32)",
                    t_many / t_graph,
                    "× (throughput)",
                    "≥ 0.85",
                    {"decide_many_s": t_many, "graph_s": t_graph, "last_batch_sizes": sizes},
                )
            )
            tick(f"{name}: {t_many / t_graph:.2f}×")

        # -- joint vs single reads ------------------------------------------------
        joint_vs_singles(report, tick, reader, "tiny", reps * 8)
        one = THREAD

        # -- router vs direct decide ----------------------------------------------
        urgent = {"urgent": q["urgent"]}
        router = route(
            engine, "urgent", q["urgent"], path_map={"yes": "a", "no": "b"}, state_key="ticket"
        )
        t_direct, t_router = paired(
            lambda: engine.decide(one, urgent), lambda: router.invoke({"ticket": one}), reps * 8
        )
        report.results.append(
            BenchResult(
                "router call vs direct decide",
                t_router / t_direct,
                "× (time)",
                "≤ 1.05",
                {"direct_s": t_direct, "router_s": t_router},
            )
        )
        tick(f"router vs decide: {t_router / t_direct:.2f}×")

        # -- cache hit vs miss ------------------------------------------------------
        cached = ab.DecisionEngine(BatchingReader(reader, cache_size=1024))
        fresh = iter(states(10_000, "cache-"))
        t_miss, t_hit = paired(
            lambda: cached.decide(next(fresh), q), lambda: cached.decide(one, q), reps * 4
        )
        report.results.append(
            BenchResult(
                "answer-cache hit vs miss",
                t_miss / t_hit,
                "× faster",
                None,
                {"miss_s": t_miss, "hit_s": t_hit},
            )
        )
        tick(f"cache hit vs miss: {t_miss / t_hit:.1f}×")

        # -- length bucketing ---------------------------------------------------------
        mixed = [
            s + " " + " ".join(["More detail about the problem."] * (i % 4) * 20)
            for i, s in enumerate(states(16, "bucket-"))
        ]
        padded = ab.DecisionEngine(tiny_reader(folder, bucket_padding=None))
        bucketed = ab.DecisionEngine(tiny_reader(folder, bucket_padding=0.25))
        t_pad, t_bucket = paired(
            lambda: padded.decide_many(mixed, q), lambda: bucketed.decide_many(mixed, q), reps
        )
        report.results.append(
            BenchResult(
                "length bucketing (0.25) vs one padded forward, mixed lengths",
                t_pad / t_bucket,
                "× faster",
                None,
                {"padded_s": t_pad, "bucketed_s": t_bucket},
            )
        )
        tick(f"bucketing: {t_pad / t_bucket:.2f}×")
        engine.close()

    read_vs_generate(report, tick, reps=reps)
