"""``benchmarks/bench_node_cost.py`` runs, in a tiny configuration (no time is asserted).

The script swaps two private hooks of the library to time a ``decide_node`` as it was;
this fails when they are renamed, rather than the script rotting unnoticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_node_cost_benchmark_runs_both_variants() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/bench_node_cost.py"), "--reps", "1", "--runs", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    for line in ("now ", "before ", "empty node ", "the node's own work", "ratio before / now"):
        assert line in done.stdout
