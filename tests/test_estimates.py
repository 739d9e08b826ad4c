"""Estimated counts are said as estimates, with an interval that holds the truth."""

from __future__ import annotations

import random

from agentbranch.audit.estimates import decisions_estimate, decisions_text


def test_labels_at_rate_one_are_a_count():
    e = decisions_estimate([1.0] * 75)
    assert e.exact and e.value == 75
    assert decisions_text(e) == "75 labels standing for 75 decisions"


def test_sampled_labels_are_an_estimate_with_its_interval():
    e = decisions_estimate([1.0] * 30 + [10.0] * 24)
    assert not e.exact and e.value == 270 and e.low < 270 < e.high
    text = decisions_text(e)
    assert text.startswith("54 labels standing for an estimated 270 decisions (95% interval ")
    assert e.low >= 54  # never fewer decisions than labels


def _coverage(rates: list[float], runs: int = 400) -> float:
    rng = random.Random(7)
    taken, fallback = 200, 100
    held = 0
    for _ in range(runs):
        weights = [1.0] * fallback
        for i in range(taken):
            rate = rates[i % len(rates)]
            if rng.random() < rate:
                weights.append(1.0 / rate)
        e = decisions_estimate(weights)
        held += e.low <= taken + fallback <= e.high
    return held / runs


def test_the_interval_holds_the_served_count_about_as_often_as_it_says():
    assert _coverage([0.1]) >= 0.92  # one rate: the exact Poisson interval
    assert _coverage([0.1, 0.25]) >= 0.90  # several: the normal interval


def test_the_earned_report_says_estimated_when_labels_were_sampled(tmp_path):
    from agentbranch.audit.earned_now import Target
    from agentbranch.audit.earned_report import _question
    from agentbranch.audit.earned_sources import EvidenceRow

    fields = EvidenceRow.__dataclass_fields__
    base = {name: None for name in fields}
    rows = []
    for i in range(40):
        take = i % 2 == 0
        row = dict(base)
        row.update(
            question_id="team",
            group="g",
            reader="r",
            model="m",
            trust="earned",
            take_at=0.5,
            band="take" if take else "fallback",
            correct=True,
            rate=0.1 if take else 1.0,
            time=f"2026-01-01T00:00:{i:02d}+00:00",
        )
        rows.append(EvidenceRow(**{k: v for k, v in row.items() if k in fields}))
    q = _question(rows, Target(0.9, 0.95, "asked"), 4, None)
    assert q.decisions == 220 and q.decisions_estimate is not None
    assert "an estimated 220 decisions (95% interval" in decisions_text(q.decisions_estimate)
