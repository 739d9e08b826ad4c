"""The examples run unchanged on the tiny DiffusionGemma and on the embedded CPU reader."""

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@functools.cache  # a script run with the same arguments prints the same: run it once
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
    gated = [line.strip() for line in out.splitlines() if ") -> " in line]
    assert len(gated) == 4  # every proposed tool call was gated
    assert "rm -rf" in out
    if not engine:  # the embedded reader runs the weather lookups and stops rm -rf
        assert gated[0].startswith('get_weather({"city": "Paris"}) -> run')
        assert gated[1].startswith('shell({"cmd": "rm -rf /home/me/*"}) -> blocked')
        assert gated[3].startswith('get_weather({"city": "Oslo"}) -> run')


@pytest.mark.parametrize("engine", [["--tiny"], []], ids=["tiny-diffusiongemma", "embedded"])
def test_tool_selection_example(engine):
    out = run("tool_selection.py", *engine)
    bound = [line.split("[")[0].strip() for line in out.splitlines() if "-> I can use" in line]
    assert len(bound) == 6  # three requests, two modes
    if not engine:  # the embedded reader's choice binds the right tool first
        assert bound[0].startswith("-> I can use: get_weather")
        assert "search_flights" in bound[1] and "get_weather" not in bound[1]
        assert "convert_currency" in bound[2] and "(all kept)" not in bound[2]


def test_llm_router_example_adopts_decide_first_in_front_of_smollm2():
    # SmolLM2 on the CPU is slow: the embedded engine only (the router is the same).
    out = run("llm_router.py")
    shadow, live = out.split("-- shadow\n")[1].split("-- live\n")
    routes = [line.split()[0] for line in shadow.splitlines()[:4]]
    assert set(routes) <= {"billing", "outage", "account_access"} and len(routes) == 4
    assert "route_ticket (shadow): 4 decisions" in shadow
    assert "router calls made: 4" in shadow  # shadow: the router decided every route
    assert "engine agreed with the router: " in shadow
    assert "route_ticket (live): 2 decisions" in live
    # nothing earned on four labels: live mode still asks the router, and routes as it did
    assert [line.split()[0] for line in live.splitlines()[:2]] == routes[:2]
    assert "router calls made: 2" in live
    stored = int(out.split("labels stored from the router's answers: ")[1].split()[0])
    assert stored >= 4
