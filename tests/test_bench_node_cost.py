"""``benchmarks/bench_node_cost.py`` runs, in a tiny configuration (no time is asserted).

The script swaps two private hooks of the library to time a ``decide_node`` as it was;
this fails when they are renamed, rather than the script rotting unnoticed."""

from __future__ import annotations

from _bench_scripts import run_benchmark


def test_the_node_cost_benchmark_runs_both_variants() -> None:
    done = run_benchmark("bench_node_cost.py", "--reps", "1", "--runs", "2")
    assert done.returncode == 0, done.stderr
    for line in ("now ", "before ", "empty node ", "the node's own work", "ratio before / now"):
        assert line in done.stdout
