"""The earned-trust soak (``benchmarks/soak.py earned``) runs end to end: a short run with
the scripted reader on each store answers every invoke, and every label it reports is
in the store (the long runs in docs/reliability.md use the same script)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parent.parent / "benchmarks" / "soak.py"


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_a_short_earned_soak_loses_nothing(tmp_path, store):
    done = subprocess.run(
        [sys.executable, str(SOAK), "earned", "--reader", "scripted", "--store", store,
         "--max-invokes", "40", "--report-s", "1", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    found = re.search(r"decisions (\d+), errors (\d+), labels (\d+)", out)
    assert found, out
    decisions, errors, labels = map(int, found.groups())
    assert (decisions, errors) == (120, 0)  # 40 invokes of 3 questions
    assert labels == decisions + 3  # and the warm-up invoke's three
    per_question = re.findall(r"^\s+(team|frustration|urgent)\s+\w+\s+take_at=\S+ labels=(\d+)",
                              out, flags=re.M)  # fmt: skip
    assert sorted(q for q, _ in per_question) == ["frustration", "team", "urgent"]
    assert sum(int(n) for _, n in per_question) == labels
    if store == "jsonl":
        lines = (tmp_path / "evidence.jsonl").read_text().splitlines()
        assert len(lines) == labels and all(json.loads(x)["schema"] for x in lines)
    else:
        assert (tmp_path / "evidence.sqlite").stat().st_size > 0
