"""``benchmarks/bench_audit_health.py`` runs in a tiny configuration (no time is
asserted): it prints both variants and their ratio."""

from __future__ import annotations

from _bench_scripts import run_benchmark


def test_the_audit_health_benchmark_runs() -> None:
    args = ("--calls", "10", "--rounds", "2", "--suspended", "3")
    done = run_benchmark("bench_audit_health.py", *args, timeout=300)
    assert done.returncode == 0, done.stderr
    for line in ("without check ", "with check ", "ratio with / without check"):
        assert line in done.stdout
