"""What metrics cost a decision: the same decisions (a policy's read, half of them
answered by a Generate fallback, each record emitted as a node emits it), alternating in
one process between OpenTelemetry's API absent (as if not installed), the API without an
SDK (the application set no provider), and the SDK with an in-memory reader.

    PYTHONPATH=src:tests python benchmarks/bench_metrics.py [--decisions 2000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from _earned_fixtures import URGENT, Oracle, engine, state

import agentbranch as ab
from agentbranch.core import _telemetry
from agentbranch.integrations.observability import emit_all
from agentbranch.policy import Generate, Policy, Resolver


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    resolver = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=0.5, fallbacks=[Generate(Oracle())])
    )
    states = [state(i, "yes", 0.99 if i % 2 else 0.6, "yes") for i in range(args.decisions)]
    reader = InMemoryMetricReader()
    sdk = MeterProvider(metric_readers=[reader])

    def run() -> float:
        start = time.perf_counter()
        for s in states:
            emit_all(resolver.resolve(s).values())
        return (time.perf_counter() - start) / len(states)

    class NoAPI:  # what agentbranch sees when the API is not installed
        modules: dict[str, Any] = {}

    def absent() -> float:
        # Hidden from agentbranch only: langsmith (under langchain-core) imports the API
        # itself when it is installed, and its own cost is not agentbranch's.
        real, _telemetry.sys = _telemetry.sys, NoAPI
        try:
            return run()
        finally:
            _telemetry.sys = real

    def no_sdk() -> float:
        ab.use_meter_provider(None)  # the global provider: the API's stand-in
        return run()

    def with_sdk() -> float:
        ab.use_meter_provider(sdk)
        try:
            return run()
        finally:
            ab.use_meter_provider(None)

    variants: dict[str, Any] = {"API absent": absent, "API, no SDK": no_sdk, "SDK": with_sdk}
    times: dict[str, list[float]] = {name: [] for name in variants}
    run()  # warm up
    for r in range(args.rounds):
        order = list(variants.items())
        order = order[r % 3 :] + order[: r % 3]
        for name, fn in order:
            times[name].append(fn())
    base, fastest = statistics.median(times["API absent"]), min(times["API absent"])
    print(f"{args.decisions} decisions x {args.rounds} rounds, per decision (median, best)")
    for name, ts in times.items():
        med, best = statistics.median(ts), min(ts)
        print(
            f"  {name:12s} {med * 1e6:8.1f} µs {best * 1e6:8.1f} µs   ratio to API absent "
            f"{med / base:.3f} (best {best / fastest:.3f})"
        )
    points = sum(
        len(m.data.data_points)
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    )
    print(f"  (the SDK run recorded {points} series)")


if __name__ == "__main__":
    main()
