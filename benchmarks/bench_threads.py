"""The torch readers' ``threads`` option: ``"auto"`` vs torch's own thread count (CPU).

    python benchmarks/bench_threads.py [--reps 5] [--busy 1]

Times, in ONE process, the embedded reader (MiniLM) deciding a batch of tickets with
``threads="auto"`` and with ``threads=None`` (torch's default: one thread per core),
alternating the two so both see the same machine. ``--busy N`` starts N processes that
spin on a core each, as the rest of an agent (or other tenants) would. It prints the
medians and the ratio. Nothing is asserted: machines here are noisy, compare the ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import agentbranch as ab
from agentbranch.engine.readers.embedded import EmbeddedReader
from agentbranch.engine.readers.threads import resolve_threads

QUESTIONS = {
    "team": ab.choice(
        "Which team should handle this ticket?",
        {"billing": "Invoices and refunds", "outage": "Service down", "bug": "Something broken"},
    ),
    "urgent": ab.yes_no("Urgent?", yes="Customers are blocked", no="It can wait"),
}
TICKETS = [
    f"{text} (ticket {i})"
    for i, text in enumerate(
        [
            "The dashboard returns 500 errors for everyone since 9am.",
            "I was charged twice for my subscription this month.",
            "The CSV export puts dates in the wrong column.",
            "Can you add dark mode to the mobile app?",
        ]
        * 4
    )
]


def _spin(stop: mp.Event) -> None:  # type: ignore[valid-type]
    while not stop.is_set():
        sum(range(10_000))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--busy", type=int, default=1, help="spinning processes (0: idle)")
    args = ap.parse_args()
    import torch

    engines = {
        "auto": ab.DecisionEngine(EmbeddedReader(threads="auto"), eager=True),
        "torch default": ab.DecisionEngine(EmbeddedReader(threads=None), eager=True),
    }
    stop = mp.Event()
    busy = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    times: dict[str, list[float]] = {name: [] for name in engines}
    try:
        for _ in range(args.reps):
            for name, engine in engines.items():
                # states are embedded on every call (only option texts are cached)
                start = time.perf_counter()
                engine.decide_many(TICKETS, QUESTIONS)
                times[name].append(time.perf_counter() - start)
    finally:
        stop.set()
        for p in busy:
            p.join()
    auto, default = (statistics.median(times[n]) for n in engines)
    print(
        f"{len(TICKETS)} tickets x {len(QUESTIONS)} questions, {args.busy} busy process(es); "
        f"auto = {resolve_threads('auto')} thread(s), torch default = {torch.get_num_threads()}"
    )
    print(f"  threads='auto'   : {auto * 1e3:8.1f} ms")
    print(f"  torch default    : {default * 1e3:8.1f} ms")
    print(f"  ratio            : {default / auto:8.2f}x in favour of 'auto'")


if __name__ == "__main__":
    main()
