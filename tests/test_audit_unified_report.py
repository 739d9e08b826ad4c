"""``agentbranch audit report``: one report, one threshold per question (issue 37, "the
two reports must agree"), read at the policy's own precision, with the threshold the
policy would use next beside the recorded one; and its --diagram faults."""

from __future__ import annotations

import json
import math
import random

import pytest
from _evidence_records import evidence
from typer.testing import CliRunner

import agentbranch as ab
from agentbranch.audit.earned_report import earned_report
from agentbranch.audit.report import json_safe
from agentbranch.cli import app
from agentbranch.policy import Earned
from agentbranch.policy.earned import QuestionKey

runner = CliRunner()
URGENT = ab.yes_no("Is the ticket urgent?")
WHO = {"reader": "embedded", "model": "m"}


def _observe(earned: Earned, n: int, *, conf=lambda i: 0.97, right=lambda i: True) -> None:
    for i in range(n):
        earned.observe(
            QuestionKey("urgent", URGENT, **WHO),
            "yes" if right(i) else "no",
            source="fallback",
            band="fallback",
            confidence=conf(i),
            options=["yes", "no"],
            engine_label="yes",
            rate=1.0,
            take_at=None,
            trust="learning",
        )


@pytest.fixture
def store_at_80(tmp_path):
    """Evidence an Earned(precision=0.8) opened on: 60 labels, 57 right."""
    path = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.8, min_evidence=60, store=str(path))
    _observe(earned, 60, right=lambda i: i % 20 != 0)
    assert earned.threshold(QuestionKey("urgent", URGENT, **WHO)).trust == "earned"
    return path


def test_the_target_is_the_policys_own_and_the_flag_only_asks_what_if(store_at_80):
    rep = earned_report(store_at_80)
    (q,) = rep.questions.values()
    # Old code: reported at 0.9 (the CLI's default) whatever the policy's precision.
    assert (rep.precision, q.target.precision, q.target.origin) == (0.8, 0.8, "policy")
    assert q.trust == "earned" and q.what_if is None
    asked = earned_report(store_at_80, precision=0.95)
    (qa,) = asked.questions.values()
    assert qa.target.precision == 0.8 and qa.take_at == q.take_at  # in force: unchanged
    assert qa.what_if.precision == 0.95 and qa.what_if.trust == "learning"
    res = runner.invoke(app, ["audit", "report", "--details", str(store_at_80)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert f"urgent: take_at {q.take_at:g} in force (earned)" in res.output
    assert "precision 0.8 at level 0.95: the policy's own" in res.output
    assert "what if" not in res.output
    res = runner.invoke(
        app,
        ["audit", "report", "--details", str(store_at_80), "--target-precision", "0.95"],
        terminal_width=200,
    )
    assert "at precision 0.95 (asked with --target-precision; not the policy's, not in" in (
        res.output
    )
    assert f"urgent: take_at {q.take_at:g} in force (earned)" in res.output


def test_a_store_that_does_not_record_its_precision_says_so(store_at_80, tmp_path):
    old = tmp_path / "old.jsonl"
    lines = []
    for line in store_at_80.read_text().splitlines():
        rec = json.loads(line)
        del rec["earned"]  # what a store written by the previous release holds
        lines.append(json.dumps(rec))
    old.write_text("\n".join(lines) + "\n")
    (q,) = earned_report(old).questions.values()
    assert (q.target.precision, q.target.origin) == (0.9, "default")
    res = runner.invoke(app, ["audit", "report", "--details", str(old)], terminal_width=200)
    assert "a default; the records do not say the policy's" in res.output
    (q,) = earned_report(old, precision=0.8).questions.values()
    assert (q.target.precision, q.target.origin, q.what_if) == (0.8, "asked", None)
    assert q.trust == "earned"


def test_the_threshold_the_policy_would_use_is_shown_next_to_the_recorded_one(tmp_path):
    """Records that say "earned at 0.6" (a bug of an older release, a hand edit) on
    evidence that shows nothing: the report shows what the policy computes now."""
    path = tmp_path / "evidence.jsonl"
    settings = Earned(precision=0.9).settings
    with path.open("w") as f:
        for i in range(60):
            rec = evidence(
                key="k",
                **WHO,
                confidence=0.7,
                teacher_label="yes" if i % 2 else "no",
                take_at=0.6 if i else None,
                trust="earned" if i else "learning",
                earned=settings,
            )
            f.write(json.dumps(rec.to_json()) + "\n")
    (q,) = earned_report(path).questions.values()
    assert (q.recorded_take_at, q.recorded_trust) == (0.6, "earned")
    assert (q.take_at, q.trust, q.recomputed) == (None, "learning", True)
    res = runner.invoke(app, ["audit", "report", "--details", str(path)], terminal_width=200)
    assert "urgent: nothing taken (learning)" in res.output
    assert "the latest labelled decision was made under earned, take_at 0.6" in res.output


def test_a_low_take_at_gets_one_sentence_of_meaning(tmp_path):
    rng = random.Random(0)
    earned = Earned(precision=0.9, min_evidence=100, store=str(tmp_path / "e.jsonl"))
    confs = [rng.uniform(0.01, 0.3) for _ in range(200)]
    _observe(earned, 200, conf=lambda i: confs[i], right=lambda i: confs[i] > 0.08)
    take_at = earned.threshold(QuestionKey("urgent", URGENT, **WHO)).take_at
    assert take_at is not None and take_at < 0.2
    (q,) = earned_report(tmp_path / "e.jsonl").questions.values()
    assert "confidences are low (median" in q.meaning and "but well ordered" in q.meaning
    assert f"at or above {take_at:g} were shown right at least 90%" in q.meaning
    res = runner.invoke(
        app, ["audit", "report", "--details", str(tmp_path / "e.jsonl")], terminal_width=200
    )
    assert "what it means" in res.output


def test_a_live_earned_reports_a_band_suspended_for_missing_audits(store_at_80):
    earned = Earned(precision=0.8, min_evidence=60, store=str(store_at_80))
    for _ in range(earned.audit_health.window):
        earned.audit_health.missing("urgent", "embedded", "m", why="test")
    (q,) = earned_report(earned).questions.values()
    assert q.suspended and q.take_at is None and q.trust == "learning"


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_the_report_is_strict_json_never_infinity(store_at_80, tmp_path):
    assert json_safe({"a": [math.inf, -math.inf, math.nan, 1.0]}) == {"a": [None, None, None, 1.0]}
    # A record standing for an astronomical number of decisions (rate 1e-310): the
    # report either refuses the store with a clear error or prints strict JSON.
    rec = json.loads(store_at_80.read_text().splitlines()[-1])
    rec.update(id="tiny-rate", rate=1e-310, band="take", source="audit", take_at=0.5)
    rec.update(trust="earned", time="2099-01-01T00:00:00.000+00:00")
    bad = tmp_path / "tiny.jsonl"
    bad.write_text(store_at_80.read_text() + json.dumps(rec) + "\n")
    res = runner.invoke(app, ["audit", "report", "--details", str(bad), "--json"])
    assert "Infinity" not in res.output and "NaN" not in res.output
    if res.exit_code == 0:
        (q,) = _strict(res.output)["questions"].values()
        assert q["recorded_take_at"] == 0.5
    else:
        assert res.exit_code == 2 and res.output.startswith("error:")


def test_help_says_it_reads_evidence_stores_too():
    res = runner.invoke(app, ["audit", "report", "--help"], terminal_width=200)
    text = " ".join(res.output.replace("│", " ").split())
    assert "or an Earned policy's evidence store" in text  # the FILE argument's own help


# -- --diagram ------------------------------------------------------------------------


def test_diagram_without_an_extension_prints_the_file_it_wrote(store_at_80, tmp_path):
    res = runner.invoke(
        app,
        ["audit", "report", "--details", str(store_at_80), "--diagram", str(tmp_path / "trust")],
        terminal_width=300,
    )
    assert res.exit_code == 0, res.output
    written = tmp_path / "trust.png"
    # Old code printed ".../trust" while matplotlib wrote ".../trust.png".
    assert f"threshold and coverage diagram {written}" in res.output
    assert written.read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "trust").exists()


@pytest.mark.parametrize(
    "name, message",
    [
        ("missing_dir/x.png", "folder"),  # old code: a traceback from matplotlib
        ("x.notanimage", "not an image format"),
    ],
)
def test_a_diagram_that_cannot_be_written_is_a_clear_error(store_at_80, tmp_path, name, message):
    res = runner.invoke(
        app,
        ["audit", "report", "--details", str(store_at_80), "--diagram", str(tmp_path / name)],
        terminal_width=300,
    )
    assert res.exit_code == 2 and res.output.startswith("error: ") and message in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


@pytest.mark.parametrize("flag, value", [("--target-precision", "1.5"), ("--level", "nan")])
def test_bad_flags_are_clear_errors(store_at_80, flag, value):
    res = runner.invoke(app, ["audit", "report", "--details", str(store_at_80), flag, value])
    assert res.exit_code == 2 and res.output.startswith(f"error: {flag}")
