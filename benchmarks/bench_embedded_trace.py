"""The embedded reader eager and traced, alone and next to a busy Python thread.

    OMP_NUM_THREADS=1 python benchmarks/bench_embedded_trace.py [--reps 7] [--states 32]

Two readers on the same MiniLM weights, alternated in one process: ``eager``
(``EmbeddedReader(trace=False)``: the encoder driven step by step from Python) and
``traced`` (the default: from the second forward on, the checked TorchScript trace of
the embedding). Each repetition times one ``decide_many`` of ``--states`` new states (3
questions) on each, first alone, then while another thread of the process runs Python
without pause (as a graph run arriving, a tool call finishing or the app's own work
does). Prints the median milliseconds, the ratios eager / traced, and how much a busy
thread slows each (busy / alone), plus what making the trace cost once. Both readers'
answers are checked to be the same. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))


@contextmanager
def busy_thread(on: bool) -> Iterator[None]:
    """Another thread running Python without pause while the block runs (when ``on``)."""
    stop = threading.Event()

    def spin() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    thread = threading.Thread(target=spin, daemon=True) if on else None
    if thread is not None:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if thread is not None:
            thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--states", type=int, default=32, help="states per decide_many")
    args = ap.parse_args()
    if args.reps < 1 or args.states < 1:
        ap.error("--reps and --states must be at least 1")

    import agentbranch as ab
    from agentbranch_bench.pattern_graphs import pattern_questions, pattern_states

    q = pattern_questions()
    engines = {
        "eager": ab.DecisionEngine(ab.EmbeddedReader(trace=False).load(), batching=False),
        "traced": ab.DecisionEngine(ab.EmbeddedReader().load(), batching=False),
    }
    for engine in engines.values():  # the first forward, untimed (one-off setup)
        engine.decide("warm-up", q)
    start = time.perf_counter()
    engines["traced"].decide("warm-up, again", q)  # makes the trace
    trace_s = time.perf_counter() - start
    if not engines["traced"].reader.pipelined_batch:
        sys.exit("the embedding could not be traced here: nothing to compare")

    def labels(out: Any) -> list[Any]:
        return [{k: d.label for k, d in ds.items()} for ds in out]

    check = pattern_states(args.states, "check-")
    if labels(engines["eager"].decide_many(check, q)) != labels(
        engines["traced"].decide_many(check, q)
    ):
        sys.exit("eager and traced answers differ")

    times: dict[tuple[str, bool], list[float]] = {(k, b): [] for k in engines for b in (0, 1)}
    cells = list(times)
    for rep in range(args.reps):
        for i in range(len(cells)):  # a rotating order: no variant always goes first
            name, busy = cells[(rep + i) % len(cells)]
            states = pattern_states(args.states, f"r{rep}-{name}-{busy}-")
            with busy_thread(bool(busy)):
                start = time.perf_counter()
                engines[name].decide_many(states, q)
                times[(name, busy)].append(time.perf_counter() - start)
        print(f"  repetition {rep + 1}/{args.reps} done", file=sys.stderr)

    ms = {cell: statistics.median(v) * 1e3 for cell, v in times.items()}
    print(f"decide_many of {args.states} states, 3 questions, medians of {args.reps}:")
    print(f"{'':24}{'alone ms':>10}{'busy ms':>10}{'busy / alone':>14}")
    for name in engines:
        alone, busy = ms[(name, 0)], ms[(name, 1)]
        print(f"{name:24}{alone:10.1f}{busy:10.1f}{busy / alone:14.2f}")
    print(
        f"{'ratio eager / traced':24}{ms[('eager', 0)] / ms[('traced', 0)]:10.2f}"
        f"{ms[('eager', 1)] / ms[('traced', 1)]:10.2f}"
    )
    print(f"making the trace (once, in the second read): {trace_s * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
