"""What the audit-health check costs a decision: ``Earned.threshold`` (which asks
``audit_health.suspended`` for every decision) against the same state lookup without the
check, alternating in one process, with many other questions suspended (the set the
check looks in is not empty).

    PYTHONPATH=src python benchmarks/bench_audit_health.py [--calls 20000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import agentbranch as ab
from agentbranch.policy import Earned, QuestionKey


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--suspended", type=int, default=1000, help="other questions suspended")
    args = ap.parse_args()
    question = ab.yes_no("Is the ticket urgent?")
    earned = Earned(precision=0.9, start_at=0.9, refresh_s=1e9)
    for i in range(args.suspended):
        for _ in range(earned.audit_health.window):
            earned.audit_health.missing(f"other-{i}", "reader", "model")

    def without_check(key: QuestionKey) -> object:  # what Earned.threshold did before
        return earned.state(key).threshold

    variants = {"without check": without_check, "with check": earned.threshold}
    times: dict[str, list[float]] = {name: [] for name in variants}
    key = QuestionKey("urgent", question, "reader", "model")
    for r in range(args.rounds):
        order = list(variants.items()) if r % 2 else list(reversed(variants.items()))
        for name, fn in order:
            start = time.perf_counter()
            for _ in range(args.calls):
                fn(key)
            times[name].append((time.perf_counter() - start) / args.calls * 1e6)
    for name, ts in times.items():
        print(f"{name:14} median {statistics.median(ts):.2f} us per decision")
    ratio = statistics.median(times["with check"]) / statistics.median(times["without check"])
    print(f"ratio with / without check: {ratio:.3f}")


if __name__ == "__main__":
    main()
