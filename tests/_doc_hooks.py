"""What the pages' ``<!-- doc-test: setup/check/scenario NAME -->`` directives name
(tests/_doc_pages.py). They run in the page's own process (tests/_doc_runner.py), in its
session directory, with the page's namespace; a scenario prints what its page shows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# -- setups: names a snippet uses that its page leaves to the reader -----------------------


def import_ab(ns: dict) -> None:
    """A snippet that uses ``ab`` as every page imports it."""
    import agentbranch as ab

    ns["ab"] = ab


def policy_names(ns: dict) -> None:
    """The short policy snippets: the policy classes and a stand-in teacher model (it
    answers "billing")."""
    from _audit_fixtures import Teacher

    from agentbranch.policy import Audit, Earned, Generate, Policy

    ns.update(Policy=Policy, Earned=Earned, Generate=Generate, Audit=Audit, chat_model=Teacher())


# -- checks: what a snippet with no output of its own must have built --------------------


def earned_policy(ns: dict) -> None:
    policy = ns["policy"]
    assert policy.earned is not None and policy.earned.precision == 0.9
    assert policy.audit.rate == 0.05


def audited_policy(ns: dict) -> None:
    """The policy audits the take band with the fallback model as its teacher."""
    import agentbranch as ab
    from agentbranch.policy import Resolver

    policy = ns["policy"]
    assert policy.audit.rate == 0.05 and policy.audit.model is None  # the fallback model
    engine = ab.DecisionEngine(ab.ScriptedReader({"team": {"billing": 0.99, "outage": 0.01}}))
    q = {"team": ab.choice("Which team?", ["billing", "outage"])}
    resolver = Resolver(engine, q, policy)
    for i in range(200):
        assert resolver.resolve(f"ticket {i}")["team"]["label"] == "billing"
    assert policy.audit.flush(timeout=30)
    assert policy.audit.stats.audited == policy.audit.stats.sampled > 0
    assert Path("audits.jsonl").is_file()


def batching_engines(ns: dict) -> None:
    import agentbranch as ab
    from agentbranch.engine.batching import BatchingReader

    engine, plain = ns["engine"], ns["plain"]
    assert isinstance(engine.reads_via, BatchingReader) and engine.reads_via.cache_size == 1024
    assert plain.reads_via is plain.reader
    team = ab.choice("Which team?", ["billing", "outage", "bug"])
    assert list(engine.decide("x", {"team": team})["team"].options) == ["billing", "outage", "bug"]


# -- scenarios: docs/audit.md's messages for files a user got wrong -----------------------


def cli(*args: str, cwd: Path, status: int) -> None:
    """``agentbranch ARGS`` in ``cwd``; prints what the terminal shows (stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "agentbranch.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    print(done.stdout + done.stderr)
    assert done.returncode == status, (args, done.returncode)


def worse_fit_not_saved(block: str, ns: dict) -> None:
    """30 audit records of a small trial: the fit makes the held-out records worse."""
    from _audit_records import worse_audits

    trial = Path("trial")
    trial.mkdir()
    worse_audits(trial)  # trial/audits.jsonl
    args = ("calibrate", "--from-audit", "audits.jsonl", "--out", "calibration.json")
    cli(*args, cwd=trial, status=1)
    assert not (trial / "calibration.json").exists()


def bad_audit_files(block: str, ns: dict) -> None:
    """A third line whose confidence is 5, then an empty file: both refused, status 2."""
    import json

    from _audit_records import record

    bad = Path("bad")
    bad.mkdir()
    good = record(0.9, True)
    lines = [json.dumps(good)] * 2 + [json.dumps({**good, "confidence": 5})]
    (bad / "audits.jsonl").write_text("".join(line + "\n" for line in lines))
    cli("audit", "report", "audits.jsonl", cwd=bad, status=2)
    (bad / "audits.jsonl").write_text("")
    cli("audit", "report", "audits.jsonl", cwd=bad, status=2)


# -- scenarios: docs/replay.md, run as its reader would in their own project --------------

TRIAGE = "tests/test_triage_replay.py"
CASSETTES = Path("tests/cassettes")
# In CI mode no model may load: the test's reader factory would build one.
NO_MODEL = (
    "import agentbranch.engine.readers.transformers as tr\n\n"
    "def _no_model(*a, **k):\n"
    "    raise AssertionError('replay loaded a model')\n\n"
    "tr.TransformersReader.from_pretrained = _no_model\n\n"
)
REWORD = (
    "import pytest\nimport agentbranch as ab\nfrom agentbranch.demo import triage\n\n"
    "@pytest.fixture(autouse=True)\ndef reword(monkeypatch):\n"
    "    monkeypatch.setitem(triage.TRIAGE_QUESTIONS, 'team',\n"
    "        ab.choice('Which team owns this ticket?', triage.TEAMS))\n"
)


def pytest_run(*args: str, ci: bool = False, outcome: str = "passed") -> str:
    """``pytest ARGS`` in the project (``CI=true`` when ``ci``); returns its report."""
    Path("pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "agentbranch.replay.pytest_plugin"]
        + ["-p", "no:cacheprovider", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    report = done.stdout + done.stderr
    assert f" {outcome}" in report.splitlines()[-1], report[-3000:]
    assert done.returncode == (0 if outcome == "passed" else 1), report[-3000:]
    return report


def _cassettes() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(CASSETTES.iterdir())}


def record_and_replay(block: str, ns: dict) -> None:
    """The first run records (mode new); with CI set the run replays and loads no model."""
    assert f"pytest {TRIAGE}" in block and f"CI=true pytest {TRIAGE}" in block
    assert "2 passed" in pytest_run(TRIAGE)
    recorded = _cassettes()
    assert list(recorded) == ["test_reply_drafting.jsonl", "test_triage_routes.jsonl"]
    Path("tests/conftest.py").write_text(NO_MODEL)
    report = pytest_run(TRIAGE, ci=True)
    assert "2 passed" in report and "agentbranch decision cassettes" not in report
    assert _cassettes() == recorded


def reworded_question(block: str, ns: dict) -> None:
    """The team question reworded, replayed in CI: the miss."""
    Path("tests/conftest.py").write_text(NO_MODEL + REWORD)
    print(pytest_run(TRIAGE, "-k", "routes", ci=True, outcome="failed"))
    Path("tests/conftest.py").write_text(NO_MODEL)


def dropped_ticket(block: str, ns: dict) -> None:
    """A run that no longer asks for the last ticket: its entries are stale."""
    test = Path(TRIAGE)
    source = test.read_text()
    test.write_text(
        source.replace("for t in SAMPLE_TICKETS]", "for t in SAMPLE_TICKETS[:5]]").replace(
            '"feature_request", "billing"\n    ]', '"feature_request"\n    ]'
        )
    )
    print(pytest_run(TRIAGE, ci=True))
    test.write_text(source)


def record_then_replay(block: str, ns: dict) -> None:
    """A test file of the page records, then replays with CI set."""
    path = str(Path("tests") / "test_second_opinion.py")
    assert "1 passed" in pytest_run(path)
    assert "1 passed" in pytest_run(path, ci=True)


def model_upgrade(block: str, ns: dict) -> None:
    """Section 6 as typed: copy the cassettes, re-record with the new model, diff."""
    Path("tests/conftest.py").unlink(missing_ok=True)
    baseline = Path("baseline")
    shutil.copytree(CASSETTES, baseline)
    test = Path(TRIAGE)
    source = test.read_text()
    test.write_text(source.replace("tiny_diffusiongemma()", "tiny_diffusiongemma(seed=1)"))
    pytest_run("--agentbranch-record=all", TRIAGE)
    test.write_text(source)
    old, new = baseline / "test_triage_routes.jsonl", CASSETTES / "test_triage_routes.jsonl"
    sys.stdout.flush()
    done = subprocess.run(
        [sys.executable, "-m", "agentbranch.cli", "replay", "diff", str(old), str(new)],
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1  # decisions flipped: the command gates the upgrade


# -- scenarios: docs/learning_method.md's learning report ---------------------------


def _learning_jsonl() -> None:
    """learning.jsonl: the evidence of an ``Earned(learn=True)`` run of 700 decisions
    (tests/_learn_store.py). Built once per test run, in test_docs.py's cache folder,
    then copied: the run is seeded, a second build differs only in record ids and times."""
    from _learn_store import learn_store

    cache = os.environ.get("DOC_TEST_CACHE")
    if cache is None:
        learn_store("learning.jsonl", n=700)
        return
    built, building = Path(cache) / "learning.jsonl", Path(cache) / "building.jsonl"
    if not built.is_file():
        learn_store(building, n=700)
        building.replace(built)  # never a half-built file
    shutil.copyfile(built, "learning.jsonl")


def learning_store(ns: dict) -> None:
    """learning.jsonl (``_learning_jsonl``)."""
    _learning_jsonl()


def learning_report(block: str, ns: dict) -> None:
    """``agentbranch audit report`` on the evidence of an ``Earned(learn=True)`` run:
    700 decisions, a scripted reader that reads better with learned examples
    (``_learning_jsonl``)."""
    _learning_jsonl()
    cli("audit", "report", "learning.jsonl", "--details", cwd=Path("."), status=0)


def store_kit(block: str, ns: dict) -> None:
    """docs/stores.md: the store's own CI runs the conformance kit on it (its test file)."""
    assert "2 passed" in pytest_run(str(Path("tests") / "test_sqlite_evidence.py"))
