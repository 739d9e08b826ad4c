"""The examples run unchanged on the tiny DiffusionGemma and on the embedded CPU reader."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(script: str, *args: str) -> str:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(
            [str(EXAMPLES.parent / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    for key in ("AGENTBRANCH_VLLM_MODEL", "AGENTBRANCH_REMOTE_URL", "AGENTBRANCH_ENGINE"):
        env.pop(key, None)
    done = subprocess.run(
        [sys.executable, script, *args],
        cwd=EXAMPLES,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("engine", [["--tiny"], []], ids=["tiny-diffusiongemma", "embedded"])
def test_support_triage_example(engine):
    out = run("support_triage.py", *engine)
    rows = [
        line
        for line in out.splitlines()
        if line.split(" ")[0]
        in {"billing", "outage", "account_access", "bug", "feature_request", "human_triage"}
    ]
    assert len(rows) == 6  # one row per sample ticket


def test_support_triage_routes_clear_tickets_on_the_embedded_reader():
    out = run("support_triage.py")
    queues = {line.split()[0] for line in out.splitlines() if line and not line.startswith("{")}
    assert {"billing", "outage", "account_access"} <= queues


@pytest.mark.parametrize("engine", [["--tiny"], []], ids=["tiny-diffusiongemma", "embedded"])
def test_tool_gating_example(engine):
    out = run("tool_gating.py", *engine)
    assert out.count("->") == 3  # every proposed tool call was gated
    assert "rm -rf" in out
