"""Cold start: the time from a fresh interpreter to the first decision, phase by phase.

Each measurement starts a FRESH Python process (``child``) that times, inside it:

* ``import``: ``import agentbranch`` (and how many modules it loaded; which heavy ones
  came with it);
* ``build``: building the engine (``DecisionEngine.from_env({})`` for the embedded CPU
  default; ``TransformersReader.from_pretrained`` of a tiny DiffusionGemma; a replay
  cassette's reader);
* ``first``: the first ``decide`` (lazy imports, weights, the first forward);
* ``second``: the next ``decide`` of another state, for scale.

``embedded, by phase`` is the embedded default again with its first decision taken
apart: the child imports what the reader imports when it loads, in the reader's order,
right before the first ``decide`` (``import torch``, ``import transformers``, then
transformers' ``AutoModel``/``AutoTokenizer``, which load its modelling stack), and
times the tokenizer's and the weights' ``from_pretrained`` inside it; ``first read`` is
what is left of the first ``decide``: tokenising, the first forward, the temperatures.

The kinds of process alternate within each repetition so they see the same machine;
``measure`` returns the medians. ``--before`` runs (``benchmarks/bench_cold_start.py``)
alternate two source trees the same way. Used by ``benchmarks/bench.py`` and
``benchmarks/bench_cold_start.py``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "FIRST_PHASES",
    "KINDS",
    "cold_start_part",
    "default_tree",
    "export_src",
    "fixtures",
    "measure",
    "rows",
    "run_child",
]

# Runs in the child process: writes its phase times as JSON to the file named last on
# its command line (``run_child``), so nothing it or a library prints gets in the way.
CHILD = r"""
import json, sys, time
from pathlib import Path
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
phases = {"import": t_import}
t1 = time.perf_counter()
if kind in ("embedded", "embedded, by phase"):
    engine = ab.DecisionEngine.from_env({})
elif kind == "transformers":
    engine = ab.DecisionEngine(ab.TransformersReader.from_pretrained(arg))
else:  # replay
    from agentbranch.replay import Cassette
    cassette = Cassette(arg, "none")
    engine = ab.DecisionEngine(cassette.reader())
phases["build"] = time.perf_counter() - t1
t2 = time.perf_counter()
if kind == "embedded, by phase":
    def timing(name, fn):
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                phases[name] = time.perf_counter() - start
        return run
    for name, module in (("import torch", "torch"), ("import transformers", "transformers")):
        start = time.perf_counter()
        __import__(module)
        phases[name] = time.perf_counter() - start
    start = time.perf_counter()
    from transformers import AutoModel, AutoTokenizer
    phases["transformers models"] = time.perf_counter() - start
    AutoTokenizer.from_pretrained = timing("load tokenizer", AutoTokenizer.from_pretrained)
    AutoModel.from_pretrained = timing("load weights", AutoModel.from_pretrained)
    t3 = time.perf_counter()
    engine.decide("The site is down and we are losing orders", Q)
    phases["first read"] = (
        time.perf_counter() - t3 - phases["load tokenizer"] - phases["load weights"]
    )
else:
    engine.decide("The site is down and we are losing orders", Q)
phases["first"] = time.perf_counter() - t2
t3 = time.perf_counter()
engine.decide("Please resend my March invoice", Q) if kind != "replay" else None
phases["second"] = time.perf_counter() - t3
phases["to first decision"] = phases["import"] + phases["build"] + phases["first"]
Path(sys.argv[-1]).write_text(json.dumps({"phases": phases, "modules": n_modules, "heavy": heavy}))
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

#: Every kind of child, in the order they alternate.
KINDS = ("embedded", "embedded, by phase", "transformers", "replay")

#: The phases of the first decision the by-phase child times, in order.
FIRST_PHASES = (
    "import torch",
    "import transformers",
    "transformers models",
    "load tokenizer",
    "load weights",
    "first read",
)


def _env(src: Path | None) -> dict[str, str]:
    # Bytecode is written: the warm-up child of each tree caches it, so no tree pays
    # for compiling its modules in the timed runs.
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    if src is not None:
        env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_child(code: str, *args: str, src: Path | None = None, timeout: float = 600) -> str:
    """``code`` run by a fresh interpreter (``src`` first on its path) with ``args`` and,
    last, the path of a file for its answer; what it wrote there ("" if nothing)."""
    with tempfile.TemporaryDirectory(prefix="agentbranch-child-") as tmp:
        answer = Path(tmp) / "answer"
        done = subprocess.run(
            [sys.executable, "-c", code, *args, str(answer)],
            capture_output=True,
            text=True,
            env=_env(src),
            timeout=timeout,
        )
        if done.returncode:
            raise RuntimeError(
                f"a cold-start child ({' '.join(args) or 'setup'}) failed:\n{done.stderr[-2000:]}"
            )
        return answer.read_text() if answer.exists() else ""


def export_src(root: Path, rev: str, into: Path) -> Path:
    """``src/`` of git revision ``rev`` of the checkout at ``root``, written below
    ``into`` (``git archive``, no checkout touched)."""
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", rev, "src"],
        check=True,
        capture_output=True,
    ).stdout
    tar_path = into / "src.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def fixtures(into: Path, kinds: tuple[str, ...], src: Path | None = None) -> dict[str, str]:
    """Each kind's argument: the tiny DiffusionGemma's folder, a recorded cassette (made
    only for the kinds that read them)."""
    args = dict.fromkeys(kinds, "-")
    if "replay" in kinds:
        args["replay"] = str(into / "cold.jsonl")
        run_child(RECORD, args["replay"], src=src)
    if "transformers" in kinds:
        args["transformers"] = run_child(
            "import sys, pathlib; from agentbranch.testing import tiny_diffusiongemma; "
            "pathlib.Path(sys.argv[-1]).write_text(str(tiny_diffusiongemma()))",
            src=src,
        )
    return args


def measure(
    trees: dict[str, Path | None],
    *,
    reps: int = 5,
    kinds: tuple[str, ...] = KINDS,
    warmup: bool = True,
    tick: Callable[[str], None] = lambda _: None,
) -> dict[str, dict[str, Any]]:
    """Median seconds per phase: ``{tree: {kind: {"phases": {...}, "modules", "heavy"}}}``
    for each source tree (a ``src`` folder put first on the children's path; ``None``:
    agentbranch as the children find it), every tree and kind alternated in fresh
    processes each repetition, after one untimed child per tree (``warmup``: the OS
    file cache and the bytecode alike for every tree). The last tree records the
    cassette the replay kind reads."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kinds {sorted(unknown)}; known: {list(KINDS)}")
    if reps < 1:
        raise ValueError("reps must be at least 1")
    with tempfile.TemporaryDirectory(prefix="agentbranch-cold-") as tmp:
        args = fixtures(Path(tmp), kinds, list(trees.values())[-1])
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            tree: {k: [] for k in kinds} for tree in trees
        }
        for src in trees.values() if warmup else ():
            run_child(CHILD, kinds[0], args[kinds[0]], src=src)
        for rep in range(reps):
            order = list(trees.items())
            if rep % 2:
                order.reverse()
            for kind in kinds:
                for tree, src in order:
                    out = run_child(CHILD, kind, args[kind], src=src)
                    runs[tree][kind].append(json.loads(out))
            tick(f"cold start: repetition {rep + 1}/{reps} done")
    result: dict[str, dict[str, Any]] = {}
    for tree, by_kind in runs.items():
        result[tree] = {}
        for kind, rows in by_kind.items():
            names = list(rows[-1]["phases"])
            result[tree][kind] = {
                "phases": {p: statistics.median(r["phases"][p] for r in rows) for p in names},
                "modules": rows[-1]["modules"],
                "heavy": rows[-1]["heavy"],
            }
    return result


def rows(result: dict[str, Any]) -> list[tuple[str, str, float]]:
    """``(kind, phase, median seconds)`` for the table: every kind's import, build,
    first decision (the by-phase kind's parts of it indented) and second decision."""
    out = []
    for kind, r in result.items():
        p = r["phases"]
        out += [(kind, "import agentbranch", p["import"]), (kind, "build the engine", p["build"])]
        out += [(kind, f"  {name}", p[name]) for name in FIRST_PHASES if name in p]
        out.append((kind, "first decide", p["first"]))
        out.append((kind, "to first decision", p["to first decision"]))
        if kind != "replay":
            out.append((kind, "second decide", p["second"]))
    return out


def default_tree() -> Path | None:
    """The folder this interpreter imports agentbranch from, for the children's path
    (``None`` when it is installed: the children find it as this process does)."""
    import agentbranch

    folder = Path(agentbranch.__file__).resolve().parents[1]
    return None if folder.name in ("site-packages", "dist-packages") else folder


def cold_start_part(report: Any, tick: Callable[[str], None], *, quick: bool) -> None:
    """The cold start of every kind into ``report.cold_start`` (medians of 2 fresh
    processes each with ``quick``, else 5)."""
    reps = 2 if quick else 5
    result = measure({"now": default_tree()}, reps=reps, tick=tick)["now"]
    report.cold_start = {"reps": reps, "kinds": result}
    first = result.get("embedded", {}).get("phases", {}).get("to first decision")
    if first is not None:
        tick(f"cold start: embedded default to first decision {first:.2f}s")
