"""`agentbranch demo` shows the loop on the embedded CPU reader: the teacher answers, the
engine earns thresholds and learns versions, and it takes more block after block, right
as often as the target asks. The README's transcript of it is checked in test_docs.py."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import agentbranch as ab
from agentbranch.cli import app
from agentbranch.demo.loop import LOOP_QUESTIONS, run_loop
from agentbranch.demo.stream import ticket_stream


def test_the_stream_is_seeded_labelled_and_varied():
    stream = ticket_stream(240)
    assert stream == ticket_stream(240) and stream != ticket_stream(240, seed=8)
    options = {"team": set(LOOP_QUESTIONS["team"].criteria), "urgent": {"yes", "no"}}
    for t in stream:
        assert t["team"] in options["team"] and t["urgent"] in options["urgent"]
    assert {t["team"] for t in stream} == options["team"]
    assert 20 <= sum(t["urgent"] == "yes" for t in stream) <= 100
    assert len({t["ticket"] for t in stream}) == 240  # numbered: each ticket its own text


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    store = tmp_path_factory.mktemp("loop") / "evidence.jsonl"
    return run_loop(ab.DecisionEngine.from_env(), ticket_stream(400), store=str(store))


def test_takes_rise_across_blocks_and_the_teacher_is_asked_less(blocks):
    took = [sum(b.taken.values()) for b in blocks]
    assert took[0] == 0  # nothing is taken before it is earned
    assert took[-1] > took[0] and max(took[-2:]) >= 60  # of 80 decisions a block
    assert blocks[-1].asked < blocks[0].asked / 2
    # learned versions decide by the end: a head fitted on the teacher's labels
    assert all(blocks[-1].version[q] >= 1 for q in LOOP_QUESTIONS)
    # every decision the engine did not take went to the teacher, and audits on top
    for b in blocks:
        size = b.last - b.first + 1
        for q in LOOP_QUESTIONS:
            assert b.taken[q] + b.teacher[q] == size
        assert b.asked >= sum(b.teacher.values())


def test_takes_are_right_as_often_as_the_target_asks(blocks):
    taken = sum(sum(b.taken.values()) for b in blocks)
    right = sum(sum(b.right.values()) for b in blocks)
    assert taken and right / taken >= 0.9
    for b in blocks:
        for q in LOOP_QUESTIONS:
            assert 0 <= b.right[q] <= b.taken[q]
            if b.taken[q]:
                assert b.take_at[q] is not None


def test_the_loop_refuses_a_store_it_cannot_write(tmp_path):
    result = CliRunner().invoke(
        app, ["demo", "--store", str(tmp_path / "missing" / "e.jsonl"), "--stream", "40"]
    )
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "missing" in result.output


def test_the_loop_keeps_its_evidence_for_the_report(tmp_path):
    store = tmp_path / "evidence.jsonl"
    result = CliRunner().invoke(app, ["demo", "--store", str(store), "--stream", "40"])
    assert result.exit_code == 0, result.output
    assert f"agentbranch audit report {store}" in result.output
    lines = [json.loads(line) for line in store.read_text("utf-8").splitlines()]
    assert len(lines) >= 40  # a label per question the teacher answered


def test_a_run_prints_the_same_every_time(blocks, tmp_path):
    """Fits wait for labels by count, not by seconds (the loop is its store's only
    writer), so a second run over the first 160 tickets reads the same blocks: what
    each took, its threshold and version, the teacher's calls (timings aside)."""
    again = run_loop(
        ab.DecisionEngine.from_env(), ticket_stream(400)[:160], store=str(tmp_path / "e.jsonl")
    )

    def shown(b):
        return (b.first, b.last, b.taken, b.right, b.teacher, b.take_at, b.version, b.asked)

    assert [shown(b) for b in again] == [shown(b) for b in blocks[:4]]
