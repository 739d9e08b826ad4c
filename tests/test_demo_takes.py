"""The README's numbers on how often the demo's team takes are right, recomputed on the
labelled tickets the demo ships, so the sentence stays true when the reader changes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import agentbranch as ab
from agentbranch import calibration as cal
from agentbranch.demo.triage import DEFAULT_TEAM_TAKE_AT, TRIAGE_QUESTIONS

ROOT = Path(__file__).resolve().parents[1]
DEMO = Path(ab.__file__).parent / "demo"


def _readme_paragraph() -> str:
    readme = (ROOT / "README.md").read_text("utf-8")
    match = re.search(
        r"A take is not a promise of being right\..*?embedded CPU reader:", readme, re.S
    )
    assert match is not None, "the README's paragraph on the demo's takes is gone"
    return " ".join(match.group(0).split())


def _clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    from scipy.stats import beta

    a = (1 - level) / 2
    low = beta.ppf(a, k, n - k + 1) if k else 0.0
    high = beta.ppf(1 - a, k + 1, n - k) if k < n else 1.0
    return float(low), float(high)


def test_the_readme_says_how_often_the_demos_takes_are_right():
    from agentbranch.engine.readers.embedded import EmbeddedReader

    team = [
        ex for ex in cal.load_labelled(DEMO / "labelled_tickets.jsonl") if ex.question_id == "team"
    ]
    engine = ab.DecisionEngine(EmbeddedReader())
    decisions = engine.decide_many([ex.state for ex in team], {"team": TRIAGE_QUESTIONS["team"]})
    pairs = [(d["team"], ex.label) for d, ex in zip(decisions, team)]
    taken = [(d, label) for d, label in pairs if d.confidence >= DEFAULT_TEAM_TAKE_AT]
    right_taken = sum(d.label == label for d, label in taken)
    right_all = sum(d.label == label for d, label in pairs)
    low, high = _clopper_pearson(right_taken, len(taken))

    text = _readme_paragraph()
    assert f"On the {len(team)} labelled tickets the demo ships" in text
    assert f"takes the team for {len(taken)} (confidence ≥ {DEFAULT_TEAM_TAKE_AT:g})" in text
    assert f"{right_taken} of those takes are right: {right_taken / len(taken):.0%}" in text
    assert f"(95% interval {low:.0%}–{high:.0%}".replace("%–", "–") in text
    assert f"{right_all} of {len(team)} right over all tickets" in text


def test_the_wrong_take_the_readme_points_at_is_wrong_and_shown():
    tickets = [json.loads(line) for line in (DEMO / "tickets.jsonl").read_text().splitlines()]
    t1014 = next(t for t in tickets if t["id"] == "T-1014")
    assert "Android" in t1014["ticket"] and t1014["expected"]["team"] == "bug"
    readme = (ROOT / "README.md").read_text("utf-8")
    assert re.search(r"team\s+outage\s+0\.\d\d\s+0\.76\s+take", readme)  # the shown run
    labelled = (DEMO / "labelled_tickets.jsonl").read_text("utf-8")
    assert not any(t["ticket"] in labelled for t in tickets)  # "none of them among the 26"
