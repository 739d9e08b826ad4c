"""Batched reads vs one read per decision, and joint vs single canvases (CPU, one process).

    python benchmarks/bench_batching.py [--states 16] [--reps 3] [--hidden 256 --layers 4]

On a random DiffusionGemma built with ``agentbranch.testing`` this times, in ONE process:

(a) ``engine.decide`` called once per state (one forward per decision) vs
    ``engine.decide_many`` (every state and question in ONE forward);
(b) three questions as three single canvases vs one joint canvas (``joint=True``);
(c) the batch in ONE padded forward vs forwards bucketed by prompt length
    (``bucket_padding=0.25``: padding under 25% of the real tokens).

It prints the medians and the ratios. Random weights make the answers meaningless; only the
timings matter. Nothing is asserted: machines here are noisy, compare the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import agentbranch as ab
from agentbranch.testing import build_tiny_diffusiongemma

QUESTIONS = {
    "team": ab.choice(
        "Which team should handle this ticket?",
        {"billing": "Invoices and refunds", "outage": "Service down", "bug": "Something broken"},
    ),
    "urgent": ab.yes_no("Does this need a reply within the hour?"),
    "frustration": ab.score("How frustrated is the customer?", ["calm", "annoyed", "angry"]),
}
TICKETS = [
    "The dashboard returns 500 errors for everyone since 9am.",
    "I was charged twice for my subscription this month.",
    "The CSV export puts dates in the wrong column.",
    "Can you add dark mode to the mobile app?",
]


def median_time(fn, reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--states", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = build_tiny_diffusiongemma(
            Path(tmp) / "model", hidden_size=args.hidden, num_layers=args.layers, vocab_size=2048
        )
        engine = ab.DecisionEngine(ab.TransformersReader.from_pretrained(folder))
        states = [TICKETS[i % len(TICKETS)] + f" (ticket {i})" for i in range(args.states)]

        loop = median_time(lambda: [engine.decide(s, QUESTIONS) for s in states], args.reps)
        batch = median_time(lambda: engine.decide_many(states, QUESTIONS), args.reps)
        print(
            f"{args.states} states x {len(QUESTIONS)} questions, hidden {args.hidden}, "
            f"{args.layers} layers"
        )
        print(f"  one decide() per state : {loop * 1e3:8.1f} ms")
        print(f"  one decide_many()      : {batch * 1e3:8.1f} ms")
        print(f"  ratio                  : {loop / batch:8.2f}x in favour of batching")

        joint_engine = ab.DecisionEngine(engine.reader, joint=True)
        single = median_time(lambda: engine.decide_many(states, QUESTIONS), args.reps)
        joint = median_time(lambda: joint_engine.decide_many(states, QUESTIONS), args.reps)
        print(f"  single canvases (3/state): {single * 1e3:8.1f} ms")
        print(f"  joint canvas (1/state)   : {joint * 1e3:8.1f} ms")
        print(f"  ratio                    : {single / joint:8.2f}x in favour of joint reads")

        bucketed_reader = ab.TransformersReader.from_pretrained(folder, bucket_padding=0.25)
        bucketed = ab.DecisionEngine(bucketed_reader)
        padded = median_time(lambda: engine.decide_many(states, QUESTIONS), args.reps)
        bucket = median_time(lambda: bucketed.decide_many(states, QUESTIONS), args.reps)
        print(f"  one padded forward       : {padded * 1e3:8.1f} ms")
        print(f"  length-bucketed forwards : {bucket * 1e3:8.1f} ms")
        print(f"  ratio                    : {padded / bucket:8.2f}x in favour of bucketing")


if __name__ == "__main__":
    main()
