"""What a ``decide_node`` costs per graph run beyond the read, before and after the node
looks for LangChain callback handlers once instead of twice.

    OMP_NUM_THREADS=1 python benchmarks/bench_node_cost.py [--reps 25] [--runs 32]

A one-node ``decide_node`` graph over the embedded reader, whose reads are memoised per
state after the first (so each ``invoke`` times LangGraph's run and our node's own work,
not the model), run ``--runs`` times per repetition with ``graph.invoke``. Two variants,
alternated in one process:

* ``now``: the library as it is. With no callback handler configured, the node skips
  its callback run and tells the emit of its records so (one callback-manager lookup
  per node call); a question without a policy shares one ``Policy()``;
* ``before``: the emit builds the callback manager again to find no handler (about
  30 µs), and every policy lookup of a question without one builds a fresh ``Policy()``.

Also times the same graph with an empty node (LangGraph's own work). Prints the median
microseconds per run of each and the ratio before / now. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))


def memoised(reader: Any) -> None:
    """Answer each state from the first read of it: the read drops out of the timing."""
    read, memo = reader.read, {}

    def fast(requests: Any) -> list[Any]:
        for r in requests:
            if r.state not in memo:
                memo[r.state] = read([r])[0]
        return [memo[r.state] for r in requests]

    reader.read = fast


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--runs", type=int, default=32, help="graph runs per repetition")
    args = ap.parse_args()
    if args.reps < 1 or args.runs < 1:
        ap.error("--reps and --runs must be at least 1")

    from agentbranch_bench.pattern_graphs import decide_graph, pattern_questions, pattern_states

    import agentbranch as ab
    import agentbranch.integrations.langgraph as node_module
    import agentbranch.policy.config as policy_config
    import agentbranch.policy.resolving as resolver_module
    from agentbranch.engine.readers.embedded import EmbeddedReader
    from agentbranch.integrations.langgraph import decide_node

    reader = EmbeddedReader()
    memoised(reader)
    engine = ab.DecisionEngine(reader, batching=False)
    q = pattern_questions(3)
    inputs = [{"ticket": s} for s in pattern_states(args.runs, "n-")]
    app = decide_graph(decide_node(engine, q, state_key="ticket"))
    empty = decide_graph(lambda state: {"decisions": {}})

    unheard, policy_for = node_module._unheard, resolver_module.policy_for

    def fresh_policy_for(policy: Any, qid: str) -> Any:
        found = policy_for(policy, qid)
        return policy_config.Policy() if found is policy_config.TAKE_EVERY_ANSWER else found

    variants = {
        "now": (unheard, policy_for, app),
        "before": (lambda config: config, fresh_policy_for, app),
        "empty node": (unheard, policy_for, empty),
    }
    per_run: dict[str, list[float]] = {name: [] for name in variants}
    for rep in range(args.reps + 1):  # the first repetition warms up
        for name, (mark, lookup, graph) in variants.items():
            node_module._unheard, resolver_module.policy_for = mark, lookup
            start = time.perf_counter()
            for x in inputs:
                graph.invoke(x)
            if rep:
                per_run[name].append((time.perf_counter() - start) / len(inputs) * 1e6)
    node_module._unheard, resolver_module.policy_for = unheard, policy_for
    reader.close()
    medians = {name: statistics.median(v) for name, v in per_run.items()}
    for name, us in medians.items():
        print(f"{name:11} {us:7.1f} µs per run")
    ours_now = medians["now"] - medians["empty node"]
    ours_before = medians["before"] - medians["empty node"]
    print(f"the node's own work: before {ours_before:.1f} µs, now {ours_now:.1f} µs")
    print(f"ratio before / now (whole run): {medians['before'] / medians['now']:.3f}")


if __name__ == "__main__":
    main()
