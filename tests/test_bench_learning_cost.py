"""``benchmarks/bench_learning_cost.py`` runs at a tiny size (no time is asserted): both
modes on a JSON Lines store, their ratios, and a restart measured in new processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_learning_cost_benchmark_prints_both_ratios(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    script = tmp_path / "benchmarks" / "bench_learning_cost.py"
    script.parent.mkdir()
    script.write_text((ROOT / "benchmarks/bench_learning_cost.py").read_text())
    done = subprocess.run(
        [sys.executable, str(script), "--messages", "4", "--stores", "jsonl"]
        + ["--restart-labels", "5", "--name", "tiny"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "jsonl learn off: wall" in out and "jsonl learn on : wall" in out
    assert "jsonl ratio on/off: wall x" in out and ", CPU x" in out
    assert "first decision ratio on/off x" in out
    result = json.loads((tmp_path / "benchmarks/results/tiny.json").read_text())
    stream = result["stream"]["jsonl"]
    assert {"wall_ratio", "cpu_ratio", "on", "off"} <= set(stream)
    assert stream["on"]["decisions"] == stream["off"]["decisions"] == 4
    (restart,) = result["restart"]
    assert restart["labels"] == 5 and restart["records"] >= 5
    assert {"build_s", "first_s"} <= set(restart["on"]) and "first_ratio" in restart
