"""Mutation testing of the trust and read-validation code with mutmut (``make mutation``).

    python scripts/mutation.py                    # every module below, one after another
    python scripts/mutation.py trust evidence     # some of them
    python scripts/mutation.py --budget-s 900     # stop a module's run after 15 minutes
    python scripts/mutation.py --again trust      # last run's survivors and unreached, new tests
    python scripts/mutation.py --report           # the last results again, runs nothing

Each module runs in its own scratch copy of the repo (``.mutation/<module>/``: ``src/``,
``tests/`` and a ``pyproject.toml`` whose ``[tool.mutmut]`` names that module and its
tests), so a module is checked against its own fast test selection only, and mutmut's
cache of one module never mixes with another's. mutmut maps each mutated function to
the selected tests that call it and runs only those per mutant. At the end it prints,
per module, the mutants killed, survived, timed out and not covered, the score
(killed + timed out, over all mutants), the run time, and each survivor's name; see one
with ``cd .mutation/<module> && python -m mutmut show <name>``.

Not run by CI (``make test``): a run takes minutes per module (docs/reliability.md,
"Mutation testing", gives the times and the score).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"

#: Slow tests left out of every selection: real processes and servers (they exercise the
#: same code as the in-process tests, and mutants run in-process) and the statistical
#: simulations (seconds each, their code is covered by the exact tests).
SLOW = "not two_processes and not postgres and not false_alarm"


@dataclass(frozen=True)
class Module:
    source: str  #: the file mutated, relative to the repo root
    tests: tuple[str, ...]  #: the test files that run against its mutants
    deselect: str = SLOW  #: a pytest -k expression applied to them


_EARNED_TESTS = (
    "tests/test_trust_mutants.py",
    "tests/test_earned.py",
    "tests/test_earned_looks.py",
)

#: The incremental statistics are checked against the per-label ones here.
_SCALE_TESTS = (*_EARNED_TESTS, "tests/test_earned_scale.py")

MODULES: dict[str, Module] = {
    # The statistics as the state machine runs them: counts per confidence cell, the
    # looks and predicted entry read from the cells, the p-values and the grid (checked
    # against the per-label reference forms in tests/_reference_statistics.py), and the
    # running drift e-process and what it takes to withdraw.
    "cells": Module(
        "src/agentbranch/policy/earned/_statistics.py",
        (*_SCALE_TESTS, "tests/test_earned_checkpoint.py"),  # cells written, read
    ),
    # The per-question state machine: looks, openings, lowering, withdrawal.
    "trust": Module("src/agentbranch/policy/earned/_state.py", _SCALE_TESTS),
    # The evidence record's schema and key.
    "evidence": Module(
        "src/agentbranch/policy/earned/_evidence.py",
        (*_EARNED_TESTS, "tests/test_evidence_store_mutants.py", "tests/test_earned_stores.py"),
    ),
    # The stores: JSON Lines (LangGraph BaseStore: policy/earned/_langgraph_store.py).
    "evidence_store": Module(
        "src/agentbranch/policy/earned/_jsonl_store.py",
        (
            "tests/test_trust_mutants.py",
            "tests/test_evidence_store_mutants.py",
            "tests/test_earned_stores.py",
            "tests/test_earned_store_faults.py",  # torn, moved, replaced, truncated files
            "tests/test_earned_checkpoint.py",  # position/resume: a checkpoint's read offset
            "tests/test_earned_scale.py",  # incremental reads, newest-first LangGraph reads
        ),
    ),
    # Read validation and folding (check_read, combine, normalise; the reads' types are
    # plain dataclasses in core/reads.py, the checks on them live here).
    "reads": Module(
        "src/agentbranch/engine/plan.py",
        (
            "tests/test_read_validation_mutants.py",
            "tests/test_engine.py",
            "tests/test_question_examples.py",
        ),
    ),
}


def _mutmut_config(module: Module) -> str:
    tests = ", ".join(json.dumps(t) for t in module.tests)
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src/"]\n'
        f"only_mutate = [{json.dumps(module.source)}]\n"
        f'pytest_add_cli_args_test_selection = [{tests}, "-k", {json.dumps(module.deselect)}]\n'
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]\n'
    )


def _prepare(name: str, module: Module) -> Path:
    """A fresh scratch copy for ``name``: sources, tests and its mutmut configuration."""
    work = WORK / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    shutil.copytree(ROOT / "src", work / "src", ignore=skip)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=skip)
    pyproject = (ROOT / "pyproject.toml").read_text()
    if "[tool.mutmut]" in pyproject:
        raise SystemExit("pyproject.toml has a [tool.mutmut] section: this script writes its own")
    (work / "pyproject.toml").write_text(pyproject + _mutmut_config(module))
    return work


def _again(name: str, module: Module) -> tuple[Path, list[str]]:
    """The scratch copy of an earlier run with today's tests (the source must not have
    changed), and the mutants that run did not kill."""
    work = WORK / name
    if not (work / "summary.json").exists():
        raise SystemExit(f"no earlier run of {name} in {work}: run it without --again first")
    if (work / module.source).read_bytes() != (ROOT / module.source).read_bytes():
        raise SystemExit(f"{module.source} changed since the run in {work}: run it afresh")
    # mutmut forgets results when the tests change: keep what earlier runs found (valid
    # while selections only grow: a mutant killed then is killed by a superset too).
    kept = _codes(work / "previous_codes.json")
    for name_, code in _codes(work / "mutants" / (module.source + ".meta")).items():
        if code is not None:
            kept[name_] = code
    (work / "previous_codes.json").write_text(json.dumps(kept, indent=1) + "\n")
    skip = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    shutil.rmtree(work / "tests")
    shutil.copytree(ROOT / "tests", work / "tests", ignore=skip)  # mutmut copies it on
    pyproject = (ROOT / "pyproject.toml").read_text() + _mutmut_config(module)
    (work / "pyproject.toml").write_text(pyproject)
    return work, list(json.loads((work / "summary.json").read_text())["survivors"])


def _run(work: Path, budget_s: float, children: int, names: list[str] = ()) -> bool:
    """``mutmut run`` in ``work`` (only ``names`` if given); False when it was stopped
    at the time budget."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # import the mutants
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", CI="1")  # CI: fixed examples
    with open(work / "run.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(children), *names],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its workers are stopped with it
        )
        try:
            return proc.wait(timeout=budget_s) == 0 or _failed(work, proc.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            return False


def _failed(work: Path, code: int) -> bool:
    tail = (work / "run.log").read_bytes()[-2000:].decode("utf-8", "replace")
    raise SystemExit(f"mutmut failed (exit {code}) in {work}; the end of run.log:\n{tail}")


def _codes(path: Path) -> dict[str, int | None]:
    """Exit codes by mutant: a mutmut ``.meta`` file or ``previous_codes.json``."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return data["exit_code_by_key"] if path.suffix == ".meta" else data


def _results(work: Path, module: Module) -> dict[str, str]:
    """Each mutant's status, from mutmut's own records (``mutants/<source>.meta``), and
    for a mutant this run did not check, from an earlier run (``--again``)."""
    from mutmut.stats import status_by_exit_code

    codes = _codes(work / "mutants" / (module.source + ".meta"))
    for name, code in _codes(work / "previous_codes.json").items():
        if codes.get(name) is None:
            codes[name] = code
    return {name: status_by_exit_code[code] for name, code in sorted(codes.items())}


def score(results: dict[str, str]) -> tuple[int, int, float]:
    """``(killed, checked, killed / checked)``: a timeout counts as killed (the mutant
    made a test hang), an unchecked mutant (budget ran out) is left out."""
    checked = [s for s in results.values() if s != "not checked"]
    killed = sum(s in ("killed", "timeout", "caught by type check") for s in checked)
    return killed, len(checked), killed / len(checked) if checked else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"some of {', '.join(MODULES)} (default all)")
    parser.add_argument("--budget-s", type=float, default=1800.0, help="per module")
    parser.add_argument("--children", type=int, default=1, help="mutants run at once")
    parser.add_argument(
        "--report", action="store_true", help="print the last run's results, run nothing"
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="re-run only the mutants the last run left alive, against today's tests",
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.modules) - set(MODULES))
    if unknown:
        parser.error(f"unknown module(s) {unknown}; choose among {sorted(MODULES)}")
    summary = {}
    for name in args.modules or list(MODULES):
        module = MODULES[name]
        start = time.monotonic()
        if args.report:
            work, finished = WORK / name, True
            if not (work / "summary.json").exists():
                continue
        elif args.again:
            work, names = _again(name, module)
            finished = _run(work, args.budget_s, args.children, names) if names else True
        else:
            work = _prepare(name, module)
            finished = _run(work, args.budget_s, args.children)
        took = time.monotonic() - start
        if args.report:
            took = json.loads((work / "summary.json").read_text())["seconds"]
        results = _results(work, module)
        killed, checked, share = score(results)
        counts: dict[str, int] = {}
        for status in results.values():
            counts[status] = counts.get(status, 0) + 1
        survivors = [m for m, s in results.items() if s not in ("killed", "timeout")]
        summary[name] = dict(
            source=module.source,
            score=share,
            killed=killed,
            checked=checked,
            mutants=len(results),
            counts=counts,
            seconds=round(took),
            finished=finished,
            survivors={m: results[m] for m in survivors},
        )
        print(
            f"{name:15s} {module.source:45s} {killed}/{checked} killed ({share:.1%}), "
            f"{len(results)} mutants, {took:.0f} s{'' if finished else ' (STOPPED at budget)'}",
            flush=True,
        )
        for m in survivors:
            if results[m] != "not checked":
                print(f"    {results[m]:12s} {m}", flush=True)
        if counts.get("not checked"):
            print(f"    not checked: {counts['not checked']} (the budget ran out)", flush=True)
        (work / "summary.json").write_text(json.dumps(summary[name], indent=2) + "\n")
    killed = sum(s["killed"] for s in summary.values())
    checked = sum(s["checked"] for s in summary.values())
    if checked:
        print(f"{'total':15s} {killed}/{checked} killed ({killed / checked:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
