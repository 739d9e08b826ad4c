"""``benchmarks/bench_embedded_trace.py`` runs, in a tiny configuration (no time is
asserted): it checks that eager and traced readers answer alike and prints both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_trace_benchmark_runs_both_readers() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks/bench_embedded_trace.py"),
            "--reps",
            "1",
            "--states",
            "3",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    for line in ("eager ", "traced ", "ratio eager / traced", "making the trace"):
        assert line in done.stdout
