"""The probability a learning question reports (``agentbranch.policy.earned.learn.probability``):
a map of the read's confidence measured on its version's labels, used only while it
predicts them better than the read's own probability, shared through the store and
replayed from a cassette; it never changes what is taken."""

from __future__ import annotations

import math
import random
import zlib

import pytest
from _learn_canvas import QUESTION, FakeEncoder, Teacher, stream, truth_of
from hypothesis import given, settings
from hypothesis import strategies as st

import agentbranch as ab
from agentbranch.policy import Earned, Generate, Policy, Resolver
from agentbranch.policy.earned import QuestionKey
from agentbranch.policy.earned.learn import probability as pr
from agentbranch.policy.earned.learn.probability import ProbabilityFit, apply


def _feed(fit: ProbabilityFit, n: int, right_at, seed: int = 0, weight=lambda i: 1.0) -> None:
    rng = random.Random(seed)
    for i in range(n):
        c = rng.random()
        fit.add(c, 0.5 + c / 2, rng.random() < right_at(c), weight(i))


def test_an_overconfident_read_reports_what_its_labels_say():
    # the read says 0.5 + c/2 (up to 1.0); it is right 0.5 + c/4 of the time
    fit = ProbabilityFit()
    _feed(fit, 2000, lambda c: 0.5 + c / 4)
    assert fit.in_force is not None
    for c in (0.1, 0.5, 0.9):
        assert apply(fit.in_force, c) == pytest.approx(0.5 + c / 4, abs=0.06)


def test_a_read_that_is_already_right_keeps_its_own_probability():
    fit = ProbabilityFit()
    _feed(fit, 2000, lambda c: 0.5 + c / 2)  # right as often as it says
    mapped = fit.in_force
    if mapped is not None:  # it may win by a hair; then it says the same
        for c in (0.1, 0.5, 0.9):
            assert apply(mapped, c) == pytest.approx(0.5 + c / 2, abs=0.05)


def test_no_map_before_its_first_labels_and_none_fitted_on_the_label_it_is_judged_by():
    fit = ProbabilityFit()
    _feed(fit, pr.MIN_LABELS - 1, lambda c: 0.0)
    assert fit.fitted is None and fit.in_force is None
    _feed(fit, 1, lambda c: 0.0)
    # fitted now, but it has predicted nothing yet: not in force
    assert fit.fitted is not None and fit.in_force is None and fit.loss_map == 0.0


def test_a_read_with_no_signal_is_reported_near_uniform():
    fit = ProbabilityFit()
    _feed(fit, 1000, lambda c: 0.5, seed=3)  # right half the time, whatever it says
    assert fit.in_force is not None
    assert all(0.4 <= apply(fit.in_force, c) <= 0.6 for c in (0.0, 0.3, 0.7, 1.0))


def test_audited_takes_weigh_for_the_takes_not_audited():
    """Takes (confidence >= 0.7) are labelled at 1 in 5 with weight 5: over all the
    decisions, the map reports on average how often the read is right (counted
    unweighted, the labels' mix of takes and fallbacks would pull it to 0.57)."""
    rng = random.Random(1)
    fit = ProbabilityFit()
    decisions = []
    for _ in range(5000):
        c = rng.random()
        right_at = 0.5 if c < 0.7 else 0.97
        decisions.append((c, right_at))
        right = rng.random() < right_at
        if c < 0.7:
            fit.add(c, 0.99, right, 1.0)
        elif rng.random() < 0.2:  # taken: audited at 0.2
            fit.add(c, 0.99, right, 5.0)
    said = sum(apply(fit.in_force, c) for c, _ in decisions) / len(decisions)
    assert said == pytest.approx(sum(r for _, r in decisions) / len(decisions), abs=0.025)


finite = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(finite, finite, st.booleans(), st.one_of(finite, st.just(1.0))),
        max_size=300,
    ),
    st.floats(0.0, 1.0),
)
def test_whatever_it_is_fed_a_map_reports_a_probability_and_keeps_order(items, c):
    fit = ProbabilityFit()
    for conf, prob, right, weight in items:
        fit.add(conf, prob, right, weight)
    assert math.isfinite(fit.loss_map) and math.isfinite(fit.loss_read)
    mapped = fit.in_force
    if mapped is None:
        return
    a, b = mapped
    assert math.isfinite(a) and math.isfinite(b) and a > 0
    p = apply(mapped, c)
    assert 0.0 <= p <= 1.0 and apply(mapped, min(1.0, c + 0.1)) >= p


def test_bad_reads_are_not_counted():
    fit = ProbabilityFit()
    for bad in (
        (math.nan, 0.5, True, 1.0),
        (0.5, math.inf, True, 1.0),
        (1.5, 0.5, True, 1.0),
        (0.5, 0.5, True, 0.0),
        (0.5, -0.1, True, 1.0),
        (0.5, 0.5, True, math.nan),
    ):
        fit.add(*bad)
    assert fit.labels == 0


# -- end to end: a scripted read that says 0.95 and is right 60 % of the time ----------


def _overconfident(state, q):
    right = truth_of(state)
    wrong = "no" if right == "yes" else "yes"
    said = right if zlib.crc32(state.encode()) % 10 < 6 else wrong
    return {o: (0.95 if o == said else 0.05) for o in q.options}


def _resolver(store):
    earned = Earned(precision=0.9, min_evidence=10, refresh_s=0, store=store, learn=True)
    earned.learner.background = False
    earned.learner.settle_s = 0  # one writer
    earned.learner.encoder = FakeEncoder()
    reader = ab.ScriptedReader({"sport": _overconfident}, model="canvas")
    engine = ab.DecisionEngine(reader, batching=False)
    policy = {"sport": Policy(take_at=earned, fallbacks=[Generate(Teacher())])}
    return earned, Resolver(engine, {"sport": QUESTION}, policy)


def test_a_learning_question_reports_the_probability_its_labels_measured(tmp_path):
    earned, r = _resolver(str(tmp_path / "evidence.jsonl"))
    records = [r.resolve(text)["sport"] for text, _ in stream(240)]
    assert all("probability" in rec for rec in records)
    mapped = [
        rec for rec in records if rec["probability"] != rec["probabilities"][rec["engine_label"]]
    ]
    assert len(mapped) >= 40
    right = [rec["engine_label"] == rec["label"] for rec in mapped]  # the teacher's label
    said = sum(rec["probability"] for rec in mapped) / len(mapped)
    assert said == pytest.approx(sum(right) / len(right), abs=0.12)
    assert said < 0.8  # not the read's 0.95
    # what is taken does not change: the band is the confidence's, as without the map
    for rec in records:
        assert rec["probabilities"][rec["engine_label"]] == pytest.approx(0.95)
        taken = rec["take_at"] is not None and rec["confidence"] >= rec["take_at"]
        assert (rec["band"] == "take") == taken
    # each label counted once: counted as made, and again as read from the store
    store = earned.evidence
    for key, fit in earned.learner.store.fits.items():
        assert fit.labels == sum(rec.probability is not None for rec in store.load(key))
    # a replica started now reads the same maps from the store
    again, _ = _resolver(str(tmp_path / "evidence.jsonl"))
    again.learner.asked(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    assert again.learner.store.fits.keys() == earned.learner.store.fits.keys()
    for key, fit in earned.learner.store.fits.items():
        assert again.learner.store.fits[key].in_force == fit.in_force


def test_a_learning_question_with_its_store_in_memory_measures_its_own_labels():
    earned, r = _resolver(None)  # Earned(store=None): nobody else writes it
    records = [r.resolve(text)["sport"] for text, _ in stream(160)]
    assert any(rec["probability"] < 0.8 for rec in records)
    assert all(f.labels <= 160 for f in earned.learner.store.fits.values())


def test_a_replay_reports_the_recorded_probability_without_the_store(tmp_path):
    from agentbranch.replay import Cassette

    texts = [t for t, _ in stream(200)]
    path = tmp_path / "run.jsonl"
    with Cassette(path, mode="all") as cassette:
        earned, r = _resolver(str(tmp_path / "evidence.jsonl"))
        r.engine = ab.DecisionEngine(cassette.reader(r.engine.reader), batching=False)
        recorded = [r.resolve(t)["sport"]["probability"] for t in texts]
    assert any(p < 0.9 for p in recorded)  # maps were in force
    with Cassette(path, mode="none") as cassette:
        _, r = _resolver(str(tmp_path / "gone.jsonl"))
        r.engine = ab.DecisionEngine(cassette.reader(), batching=False)
        assert [r.resolve(t)["sport"]["probability"] for t in texts] == recorded


def test_the_report_measures_the_probability_the_decisions_reported(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from agentbranch.audit.earned_report import earned_report
    from agentbranch.cli import app
    from agentbranch.policy.earned.learn import ladder

    # versions at 32, 64, 128 labels: each new version starts without a map, so the
    # share of decisions a map reports on depends on the schedule, not on the map
    monkeypatch.setattr(ladder, "FIRST_REFIT", 32)
    path = tmp_path / "evidence.jsonl"
    _, r = _resolver(str(path))
    records = [r.resolve(text)["sport"] for text, _ in stream(240)]
    (lq,) = earned_report(str(path)).learning.values()
    labelled = [rec for rec in records if rec["decided_by"] != "engine"]  # all labelled
    assert lq.probability_labels == len(labelled)
    # replayed from the store, each decision gets the probability it reported live
    bins: dict[int, list[float]] = {}
    for rec in labelled:
        b = bins.setdefault(min(int(rec["probability"] * 10), 9), [0.0, 0.0, 0.0])
        b[0] += 1
        b[1] += rec["probability"]
        b[2] += rec["engine_label"] == rec["label"]
    live = sum(abs(said - right) for _, said, right in bins.values()) / len(labelled)
    assert lq.probability_ece == pytest.approx(live, abs=1e-6)
    # the read's own 0.95, right 60 % of the time, is off by about 0.35; measured maps
    # report on about half of the decisions (each new version starts without one)
    own = abs(0.95 - sum(rec["engine_label"] == rec["label"] for rec in labelled) / len(labelled))
    assert lq.probability_ece < own - 0.1
    mapped = [rec["probability"] != rec["probabilities"][rec["engine_label"]] for rec in labelled]
    assert lq.probability_mapped == pytest.approx(sum(mapped) / len(mapped))
    out = (
        CliRunner()
        .invoke(app, ["audit", "report", "--details", str(path)], terminal_width=200)
        .output
    )
    assert f"reported with {len(labelled)} labelled decisions: calibration error" in out


def test_each_label_is_scored_by_the_map_fitted_before_it():
    rng = random.Random(5)
    fit = ProbabilityFit()
    for _ in range(37):
        fit.add(rng.random(), 0.9, rng.random() < 0.6, 1.0)
    before, loss = fit.fitted, fit.loss_map
    assert before is not None and fit.fitted_at == 30
    fit.add(0.8, 0.9, False, 2.0)  # the 38th: a refit point
    assert fit.fitted_at == 38 and fit.fitted != before
    assert fit.loss_map - loss == pytest.approx(-2.0 * math.log(1.0 - apply(before, 0.8)))


def test_a_store_line_written_twice_counts_once(tmp_path):
    path = tmp_path / "evidence.jsonl"
    earned, r = _resolver(str(path))
    for text, _ in stream(120):
        r.resolve(text)
    lines = path.read_text().splitlines(keepends=True)
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text("".join(line for line in lines for _ in (0, 1)))
    again, _ = _resolver(str(doubled))
    again.learner.asked(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    assert {k: f.labels for k, f in again.learner.store.fits.items()} == {
        k: f.labels for k, f in earned.learner.store.fits.items()
    }
