"""``benchmarks/bench_embedded_trace.py`` runs, in a tiny configuration (no time is
asserted): it checks that eager and traced readers answer alike and prints both."""

from __future__ import annotations

from _bench_scripts import run_benchmark


def test_the_trace_benchmark_runs_both_readers() -> None:
    done = run_benchmark("bench_embedded_trace.py", "--reps", "1", "--states", "3")
    assert done.returncode == 0, done.stderr
    for line in ("eager ", "traced ", "ratio eager / traced", "making the trace"):
        assert line in done.stdout
