"""Cold start: the time from a fresh interpreter to the first decision, phase by phase.

    python benchmarks/bench_cold_start.py [--reps 5] [--json out.json]

What a CLI user or a CI replay job pays on every run. Each repetition starts a FRESH
Python process per reader and times, inside it:

* ``import``: ``import agentbranch`` (and how many modules it loaded; whether the CLI,
  plotting or benchmark modules came with it);
* ``load``: building the engine (``DecisionEngine.from_env({})`` for the embedded CPU
  default; ``TransformersReader.from_pretrained`` of a tiny DiffusionGemma; a replay
  cassette's reader);
* ``first``: the first ``decide`` (warm-up included: lazy weights, first forward);
* ``second``: the next ``decide`` of another state, for scale.

The readers are alternated within each repetition so they see the same machine, and the
script prints the medians per phase and the ratio of each reader's time-to-first-decision
to the embedded default's. Nothing is asserted (machines here are noisy).
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

# Runs in the child process: prints one JSON line of phase times.
CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import agentbranch as ab
t_import = time.perf_counter() - t0
loaded = set(sys.modules)
heavy = sorted(
    m for m in ("agentbranch.cli", "agentbranch_bench", "matplotlib", "typer", "rich", "scipy",
                "torch", "transformers", "httpx", "langgraph")
    if m in loaded
)
n_modules = len(loaded)
kind, arg = sys.argv[1], sys.argv[2]
Q = {
    "team": ab.choice("Which team?", {"billing": "Invoices and refunds", "outage": "Service down"}),
    "urgent": ab.yes_no("Urgent?"),
}
t1 = time.perf_counter()
if kind == "embedded":
    engine = ab.DecisionEngine.from_env({})
elif kind == "transformers":
    engine = ab.DecisionEngine(ab.TransformersReader.from_pretrained(arg))
else:  # replay
    from agentbranch.replay import Cassette
    cassette = Cassette(arg, "none")
    engine = ab.DecisionEngine(cassette.reader())
t_load = time.perf_counter() - t1
t2 = time.perf_counter()
engine.decide("The site is down and we are losing orders", Q)
t_first = time.perf_counter() - t2
t3 = time.perf_counter()
engine.decide("Please resend my March invoice", Q) if kind != "replay" else None
t_second = time.perf_counter() - t3
print(json.dumps({
    "import": t_import, "load": t_load, "first": t_first, "second": t_second,
    "modules": n_modules, "heavy": heavy,
}))
"""

# Records the replay cassette the replay child reads (same questions, same first state).
RECORD = r"""
import sys
import agentbranch as ab
from agentbranch.replay import Cassette
Q = {
    "team": ab.choice("Which team?", {"billing": "Invoices and refunds", "outage": "Service down"}),
    "urgent": ab.yes_no("Urgent?"),
}
with Cassette(sys.argv[1], "all") as cassette:
    engine = ab.DecisionEngine(cassette.reader(ab.EmbeddedReader()))
    engine.decide("The site is down and we are losing orders", Q)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(code: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
        timeout=600,
    )
    return out.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")

    with tempfile.TemporaryDirectory(prefix="agentbranch-cold-") as tmp:
        cassette = Path(tmp) / "cold.jsonl"
        _run(RECORD, str(cassette))
        tiny = _run(
            "from agentbranch.testing import tiny_diffusiongemma; print(tiny_diffusiongemma())"
        ).strip()
        readers = {"embedded": "-", "transformers": tiny, "replay": str(cassette)}
        runs: dict[str, list[dict]] = {k: [] for k in readers}
        for rep in range(args.reps):
            for kind, arg in readers.items():
                runs[kind].append(json.loads(_run(CHILD, kind, arg).strip().splitlines()[-1]))
            print(f"rep {rep + 1}/{args.reps} done", file=sys.stderr)

    phases = ("import", "load", "first", "second")
    summary = {}
    for kind, rs in runs.items():
        med = {p: statistics.median(r[p] for r in rs) for p in phases}
        med["to_first_decision"] = statistics.median(
            r["import"] + r["load"] + r["first"] for r in rs
        )
        med["modules"] = rs[-1]["modules"]
        med["heavy"] = rs[-1]["heavy"]
        summary[kind] = med

    base = summary["embedded"]["to_first_decision"]
    print(f"cold start, medians of {args.reps} fresh processes (seconds)")
    print(
        f"{'reader':<14}{'import':>8}{'load':>8}{'first':>8}{'second':>8}{'total':>8}{'ratio':>8}"
    )
    for kind, m in summary.items():
        second = f"{m['second']:8.3f}" if kind != "replay" else f"{'-':>8}"
        print(
            f"{kind:<14}{m['import']:8.3f}{m['load']:8.3f}{m['first']:8.3f}{second}"
            f"{m['to_first_decision']:8.3f}{m['to_first_decision'] / base:8.2f}"
        )
    m = summary["embedded"]
    print(
        f"`import agentbranch` loads {m['modules']} modules; of the heavy ones: "
        f"{', '.join(m['heavy']) or 'none'}"
    )
    if args.json:
        args.json.write_text(json.dumps({"reps": args.reps, "readers": summary}, indent=2))


if __name__ == "__main__":
    main()
