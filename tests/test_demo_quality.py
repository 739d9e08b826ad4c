"""The demo's urgent question reads better calibrated with its examples than from its two
descriptions, on the labelled tickets' held-out half (the half not read while writing
``URGENT_EXAMPLES``; docs/quality.md)."""

from __future__ import annotations

from pathlib import Path

import agentbranch as ab
from agentbranch import calibration as cal
from agentbranch.demo.triage import TRIAGE_QUESTIONS, URGENT_EXAMPLES

TICKETS = Path(ab.__file__).parent / "demo" / "labelled_tickets.jsonl"


def test_urgent_examples_are_not_labelled_or_demo_tickets():
    texts = {ex.state for ex in cal.load_labelled(TICKETS)}
    demo = (TICKETS.parent / "tickets.jsonl").read_text("utf-8")
    for sentence in URGENT_EXAMPLES["yes"] + URGENT_EXAMPLES["no"]:
        assert sentence not in texts and sentence not in demo
    assert TRIAGE_QUESTIONS["urgent"].examples  # the demo asks with them


def test_urgent_examples_lower_held_out_ece_without_losing_accuracy():
    from agentbranch.engine.readers.embedded import EmbeddedReader

    _, held_out = cal.split(cal.load_labelled(TICKETS), 0.5, seed=0)
    urgent = [ex for ex in held_out if ex.question_id == "urgent"]
    described = urgent[0].question  # the labelled file's header: descriptions only
    assert not getattr(described, "examples", None)
    with_examples = [
        cal.Example(ex.state, "urgent", TRIAGE_QUESTIONS["urgent"], ex.label, ex.line)
        for ex in urgent
    ]
    engine = ab.DecisionEngine(EmbeddedReader())
    before = cal.metrics(cal.read_examples(engine, urgent))
    after = cal.metrics(cal.read_examples(engine, with_examples))
    assert before.n == after.n > 30
    assert after.ece < before.ece - 0.05
    assert after.accuracy >= before.accuracy
    assert after.mean_confidence < before.mean_confidence  # flatter: it knows less
