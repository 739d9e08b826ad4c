"""Soak: 10,000 decisions from 64 concurrent graph runs sharing one engine.

    python benchmarks/soak.py [--decisions 10000] [--concurrency 64] [--read-ms 2]
    python benchmarks/soak.py earned [--minutes 30] [--callers 8] [--store jsonl|sqlite]

The second form is the earned-trust soak (``benchmarks/earned_soak.py``): 8 callers
on the triage graph under ``Earned`` with a teacher and audits for a set time, printing
per minute decisions/s, CPU per decision, p50/p99, RSS, threads, descriptors and store
size, and the CPU per decision of the first and last few thousand decisions.

A LangGraph triage graph (a decide node asking two questions in one engine call, then a
router on its record) runs concurrently: half the runs on threads (``app.invoke``), half
as asyncio tasks (``app.ainvoke``) on one event loop, all at once, all on ONE
``DecisionEngine(BatchingReader(reader), timeout_s=5)``. The reader is a
``ScriptedReader`` whose distribution depends on the ticket text (so every run's answer
is its own) and which sleeps ``--read-ms`` per batch, a stand-in for a model forward, so
concurrent runs really share batches. The numbers measure the engine, the batching and
LangGraph around a reader, not a model.

It prints throughput, errors (must be 0), cross-talk (must be 0: every record's
probabilities equal an unbatched read of its own ticket on a separate engine), the batch
sizes the reader saw, and the process RSS at start, middle and end. Exit status 1 if
errors or cross-talk are not 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import structlog
from earned_soak import rss_mb  # benchmarks/earned_soak.py (this folder)
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import agentbranch as ab
from agentbranch.engine.batching import BatchingReader
from agentbranch.langgraph import DecisionRecords, decide_node

QUESTIONS = {
    "team": ab.choice(
        "Which team should handle this ticket?",
        {"billing": "Invoices and refunds", "outage": "Service down", "bug": "Something broken"},
    ),
    "urgent": ab.yes_no("Does this need a reply within the hour?"),
}
WORDS = "site down refund invoice crash slow login error angry please now charge".split()


def distribution(state: str, q: Any) -> dict[str, float]:
    """A distribution over ``q``'s options that depends on the ticket text."""
    rng = random.Random(f"{state}|{q.id}")
    weights = [rng.random() + 0.05 for _ in q.options]
    z = sum(weights)
    return {o: w / z for o, w in zip(q.options, weights)}


class SizedReader(ab.ScriptedReader):
    """Keeps only the size of each batch it reads (not the requests), so the soak's
    RSS figures are the engine's, not a growing call log's."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.sizes: list[int] = []

    def read(self, requests: Any) -> Any:
        reads = super().read(requests)
        with self._lock:
            self.sizes.append(sum(len(r.questions) for r in requests))
            self.calls.clear()
        return reads


class State(TypedDict, total=False):
    ticket: str
    decisions: DecisionRecords
    out: str


def build_graph(engine: ab.DecisionEngine) -> Any:
    triage = decide_node(engine, QUESTIONS, state_key="ticket")
    by_team = triage.router("team", {"billing": "billing", "outage": "oncall", "bug": "eng"})
    g = StateGraph(State)
    g.add_node("triage", triage)
    for node in ("billing", "oncall", "eng"):
        g.add_node(node, lambda s, node=node: {"out": node})
        g.add_edge(node, END)
    g.add_edge(START, "triage")
    g.add_conditional_edges("triage", by_team, by_team.path_map)
    return g.compile()


class Soak:
    def __init__(self, runs: int, app: Any) -> None:
        self.app = app
        self.runs = runs
        self.tickets = [
            f"ticket {i}: " + " ".join(random.Random(i).choices(WORDS, k=8)) for i in range(runs)
        ]
        #: per run: the route taken and each question's probabilities (all it keeps)
        self.results: dict[int, tuple[str, dict[str, dict[str, float]]]] = {}
        self.errors: list[str] = []
        self.by_mode = {"thread": 0, "asyncio": 0}
        self.rss = {"start": rss_mb()}
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            if self._next >= self.runs:
                return None
            self._next += 1
            return self._next - 1

    def done(self, i: int, mode: str, out: dict[str, Any] | None, error: str | None) -> None:
        with self._lock:
            if error is not None:
                self.errors.append(error)
            else:
                assert out is not None
                probs = {q: rec["probabilities"] for q, rec in out["decisions"].items()}
                self.results[i] = (out["out"], probs)
            self.by_mode[mode] += 1
            if len(self.results) + len(self.errors) == self.runs // 2:
                self.rss["middle"] = rss_mb()

    def thread_worker(self) -> None:
        while (i := self.take()) is not None:
            try:
                out = self.app.invoke({"ticket": self.tickets[i]})
                self.done(i, "thread", out, None)
            except Exception as e:  # noqa: BLE001 - counted, the soak goes on
                self.done(i, "thread", None, f"{type(e).__name__}: {e}")

    async def task_worker(self) -> None:
        while (i := self.take()) is not None:
            try:
                out = await self.app.ainvoke({"ticket": self.tickets[i]})
                self.done(i, "asyncio", out, None)
            except Exception as e:  # noqa: BLE001
                self.done(i, "asyncio", None, f"{type(e).__name__}: {e}")


def main() -> int:
    if sys.argv[1:2] == ["earned"]:
        from earned_soak import main as earned_soak  # benchmarks/earned_soak.py

        return earned_soak(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--read-ms", type=float, default=2.0)
    args = parser.parse_args()
    # An app's choice, not the library's: keep the per-decision info events quiet.
    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    inner = SizedReader(default=distribution, delay_s=args.read_ms / 1000)
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=0.002), timeout_s=5.0)
    app = build_graph(engine)
    runs = args.decisions // len(QUESTIONS)
    soak = Soak(runs, app)
    n_threads = args.concurrency // 2
    n_tasks = args.concurrency - n_threads

    async def tasks() -> None:
        await asyncio.gather(*(soak.task_worker() for _ in range(n_tasks)))

    start = time.perf_counter()
    threads = [threading.Thread(target=soak.thread_worker) for _ in range(n_threads)]
    for t in threads:
        t.start()
    asyncio.run(tasks())
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    soak.rss["end"] = rss_mb()

    # Cross-talk: each record must equal an unbatched read of its own ticket.
    reference = ab.DecisionEngine(ab.ScriptedReader(default=distribution))
    crosstalk = 0
    route = {"billing": "billing", "outage": "oncall", "bug": "eng"}
    for i, (went, probs) in soak.results.items():
        expected = reference.decide(soak.tickets[i], QUESTIONS, log_decisions=False)
        for qid, d in expected.items():
            got = probs[qid]
            if any(not math.isclose(got[o], p, abs_tol=1e-12) for o, p in d.probabilities.items()):
                crosstalk += 1
        if went != route[expected["team"].label]:
            crosstalk += 1

    decisions = len(soak.results) * len(QUESTIONS)
    sizes = inner.sizes
    print(
        f"soak: {decisions} decisions from {runs} graph runs, {args.concurrency} concurrent "
        f"({n_threads} threads + {n_tasks} asyncio tasks; runs done: {soak.by_mode}), "
        f"one engine, timeout_s=5, reader read {args.read_ms} ms per batch"
    )
    print(f"  throughput   {decisions / elapsed:,.0f} decisions/s ({elapsed:.1f} s)")
    print(f"  errors       {len(soak.errors)}  (must be 0)")
    print(f"  cross-talk   {crosstalk}  (must be 0)")
    print(
        f"  batches      {len(sizes)} reader calls, question reads per call: median "
        f"{statistics.median(sizes):.0f}, max {max(sizes)}"
    )
    print(
        "  RSS          "
        + ", ".join(f"{k} {v:.0f} MB" for k, v in soak.rss.items())
        + f" (growth start→end {soak.rss['end'] - soak.rss['start']:+.0f} MB)"
    )
    for error in soak.errors[:5]:
        print("  error:", error)
    return 0 if not soak.errors and not crosstalk else 1


if __name__ == "__main__":
    sys.exit(main())
