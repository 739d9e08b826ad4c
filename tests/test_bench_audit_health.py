"""``benchmarks/bench_audit_health.py`` runs in a tiny configuration (no time is
asserted): it prints both variants and their ratio."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_audit_health_benchmark_runs() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/bench_audit_health.py"),
            *("--calls", "10", "--rounds", "2", "--suspended", "3"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for line in ("without check ", "with check ", "ratio with / without check"):
        assert line in done.stdout
