"""``benchmarks/trace_decision.py`` runs on the embedded engine and traces what it says: a
take, an audit and a fallback after 80 labelled messages, on every thread the library
starts. The number of modules is measured, never asserted (issue 62 tracks it).

It runs in its own process: the trace installs process-wide profile functions
(``sys.setprofile``, ``threading.setprofile``) that no other test should share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.script]


def test_trace_decision_traces_a_take_an_audit_and_a_fallback(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/trace_decision.py"), "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)

    decisions = out["decisions"]
    assert [d["kind"] for d in decisions] == ["take", "audit", "fallback"]
    assert [d["decided_by"] for d in decisions] == ["engine", "engine", "fallback"]
    assert [d["audits"] for d in decisions] == [0, 1, 0]
    take_at = decisions[0]["take_at"]
    assert decisions[0]["confidence"] >= take_at > decisions[2]["confidence"]
    assert out["warmup"] == 80

    modules = out["modules"]
    assert out["count"] == len(modules) == len(set(modules)) > 0
    assert all(m == "agentbranch" or m.startswith("agentbranch.") for m in modules)
    assert sorted(m for group in out["by_package"].values() for m in group) == modules
    # every thread is traced: the node's own, the audit worker's, learning's
    threads = {t for names in out["threads"].values() for t in names}
    assert {"MainThread", "agentbranch-audit", "agentbranch-learn"} <= threads
    # the path of each kind of decision is in the trace
    for module in (
        "agentbranch.integrations.langgraph",  # the decide node
        "agentbranch.policy.generation",  # the fallback's teacher
        "agentbranch.policy.auditing.shadow",  # the audit
        "agentbranch.policy.earned.learn.loop",  # learning from the labels
    ):
        assert module in modules, module
