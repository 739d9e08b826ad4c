"""Running a script of benchmarks/ the way its test does: a fresh interpreter on this
checkout's src, one BLAS thread, its output captured (the tests run each script in a
tiny configuration and assert what it prints, never a time)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> <args>``, finished (``timeout`` seconds at most)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
