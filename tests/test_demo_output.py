"""`agentbranch demo --each` reads well at 80 columns and piped to a file, and the README
shows its real output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo_80() -> str:
    """A real run, stdout piped (not a terminal), at 80 columns."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENTBRANCH_") and k not in ("COLUMNS", "LINES")
    }
    env.update(COLUMNS="80", PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-m", "agentbranch.cli", "demo", "--each"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_demo_fits_80_columns_without_breaking_words(demo_80):
    lines = demo_80.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert len(lines) < 200  # 26 tickets, about 7 lines each (the old table took ~670)
    assert "\x1b[" not in demo_80  # no terminal escapes in a file
    words = set(demo_80.split())
    text = (ROOT / "src/agentbranch/demo/tickets.jsonl").read_text("utf-8")
    for ticket in (json.loads(line)["ticket"] for line in text.splitlines() if line.strip()):
        for word in ticket.split():
            assert word in words, f"{word!r} broken or missing"


def test_band_only_where_a_policy_applied_one(demo_80):
    rows = [line.split() for line in demo_80.splitlines() if line.startswith("  ")]
    team = [r for r in rows if r[0] == "team"]
    others = [r for r in rows if r[0] in ("urgent", "frustration")]
    assert len(team) == 26 and len(others) == 52
    assert {r[4] for r in team} == {"take", "fallback"}  # team has take_at: banded
    # urgent/frustration do not route: no policy band, and below 0.5 not shown as answers
    assert all(r[4] not in ("take", "fallback", "review") for r in others)
    assert any(float(r[3]) < 0.1 for r in others)


def test_an_answer_the_engine_cannot_vouch_for_is_not_shown_as_a_decision(demo_80):
    # The first screen used to show e.g. `frustration furious` at confidence 0.02.
    rows = [line.split() for line in demo_80.splitlines() if line.startswith("  ")]
    others = [r for r in rows if r[0] in ("urgent", "frustration")]
    for r in others:
        sure = float(r[3]) >= 0.5
        assert (r[1] != "—") == sure, r
        assert (r[4:6] == ["not", "sure"]) == (not sure), r
    assert all(r[1] == "—" for r in others if r[0] == "frustration")  # ~0.01 on the CPU
    assert "else — (not sure" in " ".join(demo_80.split())
