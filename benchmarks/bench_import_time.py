"""Import time of ``import agentbranch``: this tree against another revision, in one run.

    python benchmarks/bench_import_time.py [--before REV] [--reps 15] [--json out.json]

``--before`` names a git revision (default ``HEAD~1``); its ``src/`` is exported to a
temporary folder with ``git archive`` and both trees are imported in FRESH interpreters,
alternating (before, after, before, ...), so both see the same machine. Each child times
``import agentbranch`` and each public module after it, counts the modules loaded, and
names any heavy module that came along (CLI, benchmark harness, plotting, torch).
Prints the medians and the after/before ratio; nothing is asserted (machines are noisy).
The installed packages (langchain-core, pydantic ...) are shared by both trees.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import agentbranch_bench  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))

from agentbranch_bench.cold_start import export_src  # noqa: E402

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import agentbranch
t_import = time.perf_counter() - t0
n_core = len(sys.modules)
t1 = time.perf_counter()
import agentbranch.langgraph, agentbranch.policy, agentbranch.replay, agentbranch.audit
t_public = time.perf_counter() - t1
heavy = sorted(
    m for m in ("agentbranch.cli", "agentbranch.bench", "agentbranch_bench", "matplotlib",
                "typer", "rich", "scipy", "torch", "transformers")
    if m in sys.modules
)
print(json.dumps({"import": t_import, "public": t_public, "modules": n_core, "heavy": heavy}))
"""


def run_child(src: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD~1", help="git revision to compare with")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--json", type=Path, help="write the medians here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": export_src(ROOT, args.before, Path(tmp)), "after": ROOT / "src"}
        for src in trees.values():  # warm the OS file cache and __pycache__-free paths once
            run_child(src)
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for _ in range(args.reps):
            for name, src in trees.items():
                runs[name].append(run_child(src))
    result = {}
    for name, rows in runs.items():
        result[name] = {
            "import_ms": 1000 * statistics.median(r["import"] for r in rows),
            "public_modules_ms": 1000 * statistics.median(r["public"] for r in rows),
            "modules_loaded": rows[-1]["modules"],
            "heavy_modules": rows[-1]["heavy"],
        }
    result["before_rev"] = args.before
    result["ratio_after_before"] = result["after"]["import_ms"] / result["before"]["import_ms"]
    total = {n: result[n]["import_ms"] + result[n]["public_modules_ms"] for n in trees}
    result["ratio_with_public_modules"] = total["after"] / total["before"]
    print(f"{'':8} {'import agentbranch':>19} {'+ public modules':>17} {'modules':>8}  heavy")
    for name in trees:
        r = result[name]
        print(
            f"{name:8} {r['import_ms']:17.0f}ms {r['public_modules_ms']:15.0f}ms "
            f"{r['modules_loaded']:8d}  {', '.join(r['heavy_modules']) or '-'}"
        )
    print(
        f"after / before: import agentbranch {result['ratio_after_before']:.2f}, "
        f"with the public modules {result['ratio_with_public_modules']:.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
