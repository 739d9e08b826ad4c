"""Calibration: fitting, metrics, thresholds, the saved file, and permutation debiasing."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

import agentbranch as ab
from agentbranch import calibration as cal
from agentbranch.calibration import Scored
from agentbranch.core.decisions import confidence_from
from agentbranch.core.errors import ConfigurationError, InvalidQuestionError
from agentbranch.core.questions import coerce_question

DEMO = Path(ab.__file__).parent / "demo"

TEAM = {
    "type": "choice",
    "instructions": "Which team?",
    "criteria": {"billing": "money", "outage": "down", "bug": "broken"},
}


def _softmax(z: list[float]) -> list[float]:
    m = max(z)
    e = [math.exp(x - m) for x in z]
    return [x / sum(e) for x in e]


def synthetic(n: int, sharpen: float, seed: int = 0, k: int = 3) -> list[Scored]:
    """Labels drawn from softmax(z); the 'reader' reports softmax(sharpen * z):
    over-confident by a factor ``sharpen`` (the right temperature is ``sharpen``)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        z = [rng.gauss(0, 1.5) for _ in range(k)]
        true = _softmax(z)
        label = rng.choices(range(k), weights=true)[0]
        out.append(
            Scored(
                "q", "choice", tuple("abc"[:k]), tuple(_softmax([sharpen * x for x in z])), label
            )
        )
    return out


# -- file format -------------------------------------------------------------------


def test_parse_header_inline_and_multi_label_lines():
    lines = [
        json.dumps({"questions": {"team": TEAM}}),
        json.dumps({"state": "site down", "question": "team", "label": "outage"}),
        json.dumps(
            {
                "state": "refund",
                "id": "urgent",
                "question": {"type": "noul", "instructions": "Urgent?"},
                "label": True,
            }
        ),
        json.dumps({"state": {"text": "angry"}, "labels": {"team": "bug", "mood": 2}}),
        "",
    ]
    questions = {
        "mood": {"type": "score", "instructions": "Mood?", "criteria": ["calm", "annoyed", "angry"]}
    }
    ex = cal.parse_labelled(lines, questions)
    assert [(e.question_id, e.label, e.line) for e in ex] == [
        ("team", "outage", 2),
        ("urgent", "yes", 3),
        ("team", "bug", 4),
        ("mood", "angry", 4),
    ]


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ({"state": "x", "question": "nope", "label": "a"}, ConfigurationError),
        ({"question": "team", "label": "bug"}, ConfigurationError),
        ({"state": "x", "question": "team", "label": "sales"}, InvalidQuestionError),
        ({"state": "x"}, ConfigurationError),
    ],
)
def test_parse_errors_say_where(line, error):
    with pytest.raises(error, match="<data>:2"):
        cal.parse_labelled([json.dumps({"questions": {"team": TEAM}}), json.dumps(line)])


def test_shipped_labelled_tickets_parse():
    ex = cal.load_labelled(DEMO / "labelled_tickets.jsonl")
    assert {e.question_id for e in ex} == {"team", "urgent", "frustration"}
    assert len(ex) >= 150


def test_split_is_deterministic_stratified_and_keeps_lines_together():
    ex = cal.load_labelled(DEMO / "labelled_tickets.jsonl")
    fit, test = cal.split(ex, 0.3, seed=1)
    fit2, test2 = cal.split(ex, 0.3, seed=1)
    assert fit == fit2 and test == test2
    assert len(fit) + len(test) == len(ex)
    assert {e.line for e in fit}.isdisjoint({e.line for e in test})
    teams_held = {e.label for e in test if e.question_id == "team"}
    assert len(teams_held) == 5  # every team is on both sides


# -- fitting and metrics -----------------------------------------------------------


def test_fit_temperature_recovers_the_overconfidence_factor():
    data = synthetic(3000, sharpen=3.0)
    t = cal.fit_temperature(data)
    assert 2.6 < t < 3.4
    assert cal.nll(data, t) < cal.nll(data, 1.0)
    under = synthetic(3000, sharpen=0.5, seed=1)
    assert 0.4 < cal.fit_temperature(under) < 0.6


def test_apply_temperature_matches_the_engine_rule():
    p = [0.7, 0.2, 0.1]
    out = cal.apply_temperature(p, 2.0)
    w = [x**0.5 for x in p]
    assert out == pytest.approx([x / sum(w) for x in w])
    assert cal.apply_temperature(p, 1.0) == pytest.approx(p)


def test_metrics_by_hand():
    data = [
        Scored("q", "choice", ("a", "b"), (0.9, 0.1), 0),  # right, conf bin 9
        Scored("q", "choice", ("a", "b"), (0.8, 0.2), 1),  # wrong, bin 8
        Scored("q", "choice", ("a", "b"), (0.6, 0.4), 0),  # right, bin 6
        Scored("q", "choice", ("a", "b"), (0.3, 0.7), 1),  # right, bin 7
    ]
    m = cal.metrics(data, target_precision=0.9)
    assert m.accuracy == 0.75
    assert m.ece == pytest.approx((0.1 + 0.8 + 0.4 + 0.3) / 4)
    brier = (2 * 0.01 + 2 * 0.64 + 2 * 0.16 + 2 * 0.09) / 4
    assert m.brier == pytest.approx(brier)
    # Confidence 1 - H/ln2: 0.9/0.1 is the most confident and right; adding 0.8/0.2
    # (wrong) drops precision to 0.5, so the threshold keeps only the first.
    assert m.threshold.threshold == pytest.approx(confidence_from([0.9, 0.1]))
    assert m.threshold.coverage == 0.25 and m.threshold.precision == 1.0


def test_suggest_threshold_takes_the_widest_coverage_and_keeps_ties():
    conf = [0.9, 0.8, 0.8, 0.5, 0.2]
    ok = [True, True, False, True, False]
    t = cal.suggest_threshold(conf, ok, 0.75)
    assert t.threshold == 0.5 and t.coverage == 0.8 and t.precision == 0.75
    none = cal.suggest_threshold([0.5, 0.4], [False, False], 0.9)
    assert none.threshold is None and none.coverage == 0.0


def test_calibration_lowers_ece_on_a_held_out_split_of_synthetic_data():
    report = cal.calibrate_scored(synthetic(600, 4.0, seed=2), synthetic(600, 4.0, seed=3))
    assert report.held_out
    assert report.after.ece < report.before.ece
    assert report.after.nll < report.before.nll
    assert report.after.accuracy == report.before.accuracy  # temperature never flips a label
    assert report.calibration.temperatures["q"] > 2.0
    assert "q" in report.calibration.thresholds


def test_fit_by_type_and_min_examples():
    data = synthetic(200, 2.0) + [Scored("rare", "choice", ("a", "b"), (0.99, 0.01), 1)] * 3
    by_q = cal.fit(data, by="question", min_examples=10)
    assert "q" in by_q.temperatures and "rare" not in by_q.temperatures
    assert by_q.temperature("rare", "choice") == by_q.by_type["choice"]
    by_t = cal.fit(data, by="type")
    assert by_t.temperatures == {} and "choice" in by_t.by_type


# -- the saved file and the engine -------------------------------------------------


def test_a_saved_calibration_changes_the_engine_probabilities_as_expected(tmp_path):
    reader = ab.ScriptedReader({"team": {"billing": 0.7, "outage": 0.2, "bug": 0.1}})
    q = {"team": TEAM}
    raw = ab.DecisionEngine(reader).decide("x", q)["team"]
    path = ab.Calibration(temperatures={"team": 2.0}).save(tmp_path / "cal.json")
    calibrated = ab.DecisionEngine(reader, calibration=str(path)).decide("x", q)["team"]
    w = [p**0.5 for p in raw.probs]
    assert calibrated.probs == pytest.approx([x / sum(w) for x in w])
    assert calibrated.label == raw.label and calibrated.calibrated
    assert calibrated.confidence < raw.confidence  # T > 1 flattens
    sharp = ab.Calibration(by_type={"choice": 0.5})
    sharper = ab.DecisionEngine(reader, calibration=sharp).decide("x", q)["team"]
    assert sharper.confidence > raw.confidence


def test_end_to_end_fit_save_load_matches_calibrated_scores(tmp_path):
    def overconfident(state, q):
        # Right 60% of the time (by the state's parity) but always 97% sure.
        right = int(state) % 5 != 0 and int(state) % 5 != 1
        truth = "outage" if int(state) % 2 else "billing"
        top = truth if right else ("bug" if truth != "bug" else "billing")
        return {o: (0.97 if o == top else 0.015) for o in q.options}

    engine = ab.DecisionEngine(ab.ScriptedReader({"team": overconfident}))
    examples = [
        cal.Example(
            str(i),
            "team",
            coerce_question("team", TEAM),
            "outage" if i % 2 else "billing",
            i + 1,
        )
        for i in range(200)
    ]
    report = cal.calibrate(engine, examples, holdout=0.5)
    assert report.after.ece < report.before.ece
    path = report.calibration.save(tmp_path / "c.json")
    loaded = ab.DecisionEngine(engine.reader, calibration=str(path))
    d = loaded.decide("7", {"team": TEAM})["team"]
    t = report.calibration.temperature("team", "choice")
    expected = cal.apply_temperature([0.015, 0.97, 0.015], t)
    assert d.probs == pytest.approx(expected)


def test_reliability_diagram_writes_a_png(tmp_path):
    data = synthetic(200, 3.0)
    after = cal.calibrated(data, cal.fit(data))
    path = cal.reliability_diagram(data, after, tmp_path / "r.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_embedded_reader_calibration_lowers_ece_on_held_out_labelled_tickets():
    from agentbranch.engine.readers.embedded import EmbeddedReader

    examples = cal.load_labelled(DEMO / "labelled_tickets.jsonl")
    report = cal.calibrate(ab.DecisionEngine(EmbeddedReader()), examples, holdout=0.4, seed=0)
    assert report.held_out and report.n_eval > 50
    assert report.after.ece < report.before.ece
    assert report.after.nll < report.before.nll
    team_before, _ = report.per_question["team"]
    assert team_before.accuracy > 0.7


# -- permutation debiasing ---------------------------------------------------------


def position_biased(state, q):
    """Prefers 'outage' slightly, but multiplies whatever sits in position A by 4."""
    base = {"billing": 1.0, "outage": 1.5, "bug": 1.0}
    weights = [base[o] * (4.0 if i == 0 else 1.0) for i, o in enumerate(q.options)]
    return {o: w / sum(weights) for o, w in zip(q.options, weights)}


def test_permutations_cancel_a_position_bias_in_one_batched_read():
    q = {"team": TEAM}
    plain_reader = ab.ScriptedReader({"team": position_biased})
    plain = ab.DecisionEngine(plain_reader).decide("x", q)["team"]
    assert plain.label == "billing"  # the bias wins: billing sits in position A

    reader = ab.ScriptedReader({"team": position_biased})
    debiased = ab.DecisionEngine(reader, permutations=3).decide("x", q)["team"]
    assert debiased.label == "outage"
    # Every option sat in every position once, so each gets the same boost: the
    # probabilities are the orders' averages and equal options stay equal.
    outage = (6.0 / 8.0 + 2 * 1.5 / 6.5) / 3
    assert debiased.probabilities["outage"] == pytest.approx(outage)
    assert debiased.probabilities["billing"] == pytest.approx(debiased.probabilities["bug"])
    # One batched reader call, one request, three orders of the question.
    assert len(reader.calls) == 1 and len(reader.calls[0]) == 1
    orders = [spec.options for spec in reader.calls[0][0].questions]
    assert orders == [
        ("billing", "outage", "bug"),
        ("outage", "bug", "billing"),
        ("bug", "billing", "outage"),
    ]


def test_permutations_batch_across_states_and_leave_other_types_alone():
    reader = ab.ScriptedReader({"team": position_biased})
    engine = ab.DecisionEngine(reader, permutations=3)
    qs = {"team": TEAM, "urgent": ab.yes_no("Urgent?")}
    out = engine.decide_many(["a", "b"], qs)
    assert [d["team"].label for d in out] == ["outage", "outage"]
    assert len(reader.calls) == 1
    assert [len(r.questions) for r in reader.calls[0]] == [4, 4]  # 3 orders + 1 yes/no


# -- common shapes, bound warnings, evaluate-only -------------------------------------


def test_text_label_lines_answer_the_default_question():
    lines = [json.dumps({"text": "refund me", "label": "billing"}), '{"input": "down", "label": 1}']
    ex = cal.parse_labelled(lines, {"team": TEAM}, default_question="team")
    assert [(e.state, e.question_id, e.label) for e in ex] == [
        ("refund me", "team", "billing"),
        ("down", "team", "outage"),
    ]


def test_unknown_shapes_say_what_is_expected():
    with pytest.raises(ConfigurationError, match="--question ID"):
        cal.parse_labelled([json.dumps({"text": "hi", "label": "billing"})], {"team": TEAM})
    with pytest.raises(ConfigurationError, match="no state.*'intent', 'sentence'.*expected"):
        cal.parse_labelled([json.dumps({"sentence": "hi", "intent": "greet"})])


def test_a_fit_at_the_upper_bound_is_reported_as_no_signal():
    uniform = [Scored("vague", "noul", ("yes", "no"), (0.5, 0.5), i % 2) for i in range(20)]
    report = cal.calibrate_scored(uniform + synthetic(200, 2.0))
    assert report.calibration.temperatures["vague"] == cal.T_HIGH
    assert any("no signal for question 'vague'" in w for w in report.warnings)
    assert not any("'q'" in w for w in report.warnings)


def test_evaluate_scores_a_saved_calibration_without_fitting():
    engine = ab.DecisionEngine(ab.ScriptedReader({"team": {"billing": 0.9, "outage": 0.05}}))
    lines = [json.dumps({"text": t, "label": lab}) for t, lab in [("a", "billing"), ("b", "bug")]]
    examples = cal.parse_labelled(lines, {"team": TEAM}, default_question="team")
    saved = ab.Calibration(temperatures={"team": 2.0}, thresholds={"team": 0.5})
    report = cal.evaluate(engine, examples, saved)
    assert report.calibration is saved and report.n_fit == 0 and report.n_eval == 2
    assert report.before.accuracy == report.after.accuracy == 0.5
    assert report.after.mean_confidence < report.before.mean_confidence  # T = 2 flattens
