"""The audit report's maths (Wilson intervals, weighted thresholds, audits needed), the
`agentbranch audit report` command and calibration from audit records."""

from __future__ import annotations

import json
import random

import pytest
from _audit_records import overconfident_records, record
from typer.testing import CliRunner

from agentbranch.audit import (
    audit_report,
    audits_needed,
    calibrate_from_audit,
    labelled_examples,
    load_records,
    scored_examples,
    wilson,
)
from agentbranch.calibration import ece
from agentbranch.cli import app
from agentbranch.core.errors import ConfigurationError

# -- Wilson ----------------------------------------------------------------------------


def test_wilson_matches_the_textbook_values():
    low, high = wilson(8, 10)
    assert (round(low, 3), round(high, 3)) == (0.490, 0.943)
    assert wilson(0, 0) == (0.0, 1.0)
    low, high = wilson(0, 20)
    assert low == 0.0 and 0.15 < high < 0.17
    assert wilson(20, 20)[1] == 1.0


def test_wilson_intervals_cover_the_true_precision_about_95_percent_of_the_time():
    rng = random.Random(0)
    p, n, trials = 0.85, 150, 400
    covered = 0
    for _ in range(trials):
        hits = sum(rng.random() < p for _ in range(n))
        low, high = wilson(hits, n)
        covered += low <= p <= high
    assert 0.91 <= covered / trials <= 0.99


def test_audits_needed_is_the_first_sample_size_whose_lower_bound_reaches_the_target():
    n = audits_needed(0.97, 0.9)
    assert n is not None
    assert wilson(0.97 * n, n)[0] >= 0.9 > wilson(0.97 * (n - 1), n - 1)[0]
    assert audits_needed(0.99, 0.9) < n  # a clearer margin needs fewer
    assert audits_needed(0.9, 0.9) is None and audits_needed(0.8, 0.9) is None


# -- the report ------------------------------------------------------------------------


def test_report_weights_the_sampled_take_band_against_the_kept_fallback_band():
    rng = random.Random(1)
    recs = [record(0.95, rng.random() < 0.97, rate=0.1) for _ in range(300)]  # take band
    recs += [record(0.6, rng.random() < 0.6, kind="fallback") for _ in range(3000)]
    rep = audit_report(recs, target_precision=0.9)
    q = rep.questions["team"]
    assert q.audits == 300 and q.fallback_examples == 3000
    assert q.take_band.n == 300 and q.take_band.low <= 0.97 <= q.take_band.high
    t = q.threshold
    # Weighted, the take band stands for 3000 decisions: 50/50 with the fallback band,
    # whose 60% agreement pulls precision below 0.9; only the take band's confidence
    # reaches the target, and it is known (lower bound >= 0.9) with 300 audits.
    conf_take = record(0.95, True)["confidence"]
    assert t.estimate == pytest.approx(conf_take) and t.take_at == pytest.approx(conf_take)
    assert t.coverage == pytest.approx(0.5, abs=0.01) and t.more_audits == 0
    bins = {b.low: b for b in q.bins if b.n}
    assert sum(b.n for b in q.bins) == 3300 and len(bins) == 2


def test_report_says_how_many_more_audits_would_show_the_threshold():
    rng = random.Random(2)
    recs = [record(0.95, rng.random() < 0.95, rate=0.5) for _ in range(40)]
    t = audit_report(recs, target_precision=0.9).questions["team"].threshold
    assert t.estimate is not None and t.take_at is None  # estimated, not known yet
    p = t.at_estimate.precision
    assert p >= 0.9
    if p > 0.9:
        assert t.more_audits == audits_needed(p, 0.9) - 40
        assert wilson(p * (40 + t.more_audits), 40 + t.more_audits)[0] >= 0.9
    else:
        assert t.more_audits is None


def test_report_with_no_threshold_reaching_the_target():
    recs = [record(0.9, i % 2 == 0) for i in range(50)]
    t = audit_report(recs, target_precision=0.9).questions["team"].threshold
    assert t.estimate is None and t.take_at is None and t.more_audits is None


def test_report_as_dict_is_json_safe():
    rep = audit_report([record(0.9, True), record(0.8, False, qid="urgent")])
    data = json.loads(json.dumps(rep.as_dict()))
    assert set(data["questions"]) == {"team", "urgent"}
    assert data["questions"]["team"]["bins"][0]["agreement"] is None


def test_bad_records_and_files_are_clear_errors(tmp_path):
    with pytest.raises(ConfigurationError, match="missing"):
        audit_report([{"kind": "audit"}])
    with pytest.raises(ConfigurationError, match="audit file .*nope.jsonl does not exist"):
        load_records(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(record(0.9, True)) + "\n{oops\n")
    with pytest.raises(ConfigurationError, match="bad.jsonl:2"):
        load_records(bad)
    with pytest.raises(ConfigurationError, match="level"):
        audit_report([record(0.9, True)], level=1.5)


# -- the command -------------------------------------------------------------------------


def _write(path, recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_audit_report_command_table_json_and_diagram(tmp_path):
    rng = random.Random(3)
    recs = [record(0.95, rng.random() < 0.96) for _ in range(200)]
    recs += [record(0.55, rng.random() < 0.5, kind="fallback") for _ in range(100)]
    path = _write(tmp_path / "audits.jsonl", recs)
    runner = CliRunner()
    png = tmp_path / "audit.png"
    result = runner.invoke(app, ["audit", "report", "--details", str(path), "--diagram", str(png)])
    assert result.exit_code == 0, result.output
    assert "take-band precision" in result.output and "team" in result.output
    assert "take_at for 90%" in result.output and "95% Wilson" in result.output
    assert "200 taken + 100 fallback" in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = runner.invoke(
        app, ["audit", "report", "--details", str(path), "--json", "--target-precision", "0.8"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["target_precision"] == 0.8
    assert data["questions"]["team"]["take_band"]["n"] == 200


def test_audit_report_command_bad_file(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"kind": "audit"}\n')
    result = CliRunner().invoke(app, ["audit", "report", "--details", str(bad)])
    assert result.exit_code == 2 and "x.jsonl:1: not a valid audit record" in result.output


# -- calibration from audit records ------------------------------------------------------


def test_calibrating_from_audit_records_moves_ece_on_the_teachers_labels_down():
    report = calibrate_from_audit(overconfident_records(600), holdout=0.3)
    assert report.held_out and report.n_eval > 150
    assert report.after.ece < report.before.ece / 2
    assert report.calibration.temperature("team", "choice") > 1.5  # flattened


def test_audit_records_become_labelled_examples():
    recs = overconfident_records(20)
    examples = labelled_examples(recs)
    assert [e.label for e in examples] == [r["teacher_label"] for r in recs]
    assert examples[0].question.type == "choice" and examples[0].state is None
    scored = scored_examples(recs)
    assert [s.options[s.label_index] for s in scored] == [r["teacher_label"] for r in recs]


def test_inconsistent_records_are_clear_errors():
    rec = record(0.9, True)
    with pytest.raises(ConfigurationError, match="teacher_label: 'sales' is not one of"):
        scored_examples([{**rec, "teacher_label": "sales"}])
    with pytest.raises(ConfigurationError, match="spec"):
        labelled_examples([{k: v for k, v in rec.items() if k != "spec"}])


def test_the_engines_own_temperature_is_undone_before_fitting():
    raw = overconfident_records(50, seed=4)
    logged = overconfident_records(50, seed=4, temperature=2.0)
    a = scored_examples(raw)
    b = scored_examples(logged)
    for x, y in zip(a, b):
        assert x.probs == pytest.approx(y.probs, abs=1e-9)
    as_seen = scored_examples(logged, raw=False)
    assert ece(as_seen) != pytest.approx(ece(a))


def test_calibrate_from_audit_command(tmp_path):
    path = _write(tmp_path / "audits.jsonl", overconfident_records(400))
    out = tmp_path / "calibration.json"
    result = CliRunner().invoke(
        app,
        [
            "calibrate",
            "--from-audit",
            str(path),
            "--out",
            str(out),
            "--diagram",
            str(tmp_path / "r.png"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["after"]["ece"] < data["before"]["ece"]
    saved = json.loads(out.read_text())
    assert saved["temperatures"]["team"] > 1.5
    both = CliRunner().invoke(app, ["calibrate", str(path), "--from-audit", str(path)])
    assert both.exit_code != 0
