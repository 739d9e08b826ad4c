"""EmbeddedReader with examples: prototype scores, and a leave-one-out temperature
that shrinks towards the shipped with-examples one (never sharper without signal),
fitted by the log loss of the top answer's probability."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import to_spec
from agentbranch.core.reads import ReadRequest
from agentbranch.engine.readers.embedded import (
    OBJECTIVE,
    PRIOR_WEIGHT,
    EmbeddedReader,
    combine,
    described,
    fit_temperature,
    log_softmax,
    shipped_temperatures,
    top_label_log_likelihood,
)


@pytest.fixture(scope="module")
def reader() -> EmbeddedReader:
    return EmbeddedReader().load()


def test_combine_mixes_prototype_and_top_k_then_description():
    sims = [[0.9, 0.1, 0.1]]
    assert combine([None], sims, top_k=1, prototypes=[0.4], prototype_weight=1.0) == [0.4]
    assert combine([None], sims, top_k=1, prototypes=[0.4], prototype_weight=0.0) == [0.9]
    assert combine([None], sims, top_k=1, prototypes=[0.4]) == [
        pytest.approx(0.75 * 0.4 + 0.25 * 0.9)
    ]
    mixed = combine(
        [0.2], sims, top_k=1, example_weight=0.5, prototypes=[0.4], prototype_weight=0.5
    )
    assert mixed == [pytest.approx(0.5 * (0.5 * 0.4 + 0.5 * 0.9) + 0.5 * 0.2)]
    assert combine([None], sims, top_k=3) == [pytest.approx(1.1 / 3)]  # no prototypes: top-k
    assert combine([None, None], [[], []]) == [-1.0, -1.0]


def test_few_examples_of_a_described_option_weigh_less_than_its_description():
    one = [[0.9]]
    ramp = {"top_k": 1, "prototypes": [0.9], "full_weight_examples": 5}
    # described, one example of five for full weight: 0.7 x 1/5 of the score
    assert combine([0.2], one, described=[True], **ramp) == [pytest.approx(0.14 * 0.9 + 0.86 * 0.2)]
    # an option's name read as words is not a description: its examples weigh in full
    assert combine([0.2], one, described=[False], **ramp) == [pytest.approx(0.7 * 0.9 + 0.3 * 0.2)]
    # five examples or more: full weight
    five = [[0.9] * 5]
    assert combine([0.2], five, described=[True], **ramp) == [pytest.approx(0.7 * 0.9 + 0.3 * 0.2)]
    # without a description the examples are the whole score, however few
    assert combine([None], one, described=[True], **ramp) == [pytest.approx(0.9)]


def test_which_options_are_described():
    assert described(to_spec("u", ab.yes_no("Urgent?", yes="Down", no="Fine"))) == [True, True]
    assert described(to_spec("u", ab.yes_no("Urgent?", examples={"yes": ["a"], "no": ["b"]}))) == [
        False,
        False,
    ]
    team = ab.choice("Team?", {"billing": "Invoices", "bug": None})
    assert described(to_spec("t", team)) == [True, False]
    assert described(to_spec("s", ab.score("How angry?", ["calm", "angry"]))) == [False, False]


def test_option_score_mixes_prototype_and_top_k_example_similarity(reader):
    examples = {"yes": ["The site is down", "Every page returns a 503"], "no": ["Hi", "Hello"]}
    spec = to_spec("q", ab.yes_no("Down?", examples=examples))
    texts = [t for ex in examples.values() for t in ex]
    vecs = dict(zip(texts, reader.embed(texts)))
    x = reader.embed(["Our server is not responding"])[0]
    scores = reader.written_scores(x.unsqueeze(0), spec)[0]
    w = reader.prototype_weight
    for score, ex in zip(scores, examples.values()):
        mean = sum(vecs[t] for t in ex) / len(ex)
        proto = float(x @ mean) / float(mean.norm())
        top = sum(sorted((float(x @ vecs[t]) for t in ex), reverse=True)[:3]) / len(ex)
        assert score == pytest.approx(w * proto + (1 - w) * top, abs=1e-5)


def test_shipped_with_examples_temperatures_are_per_type():
    prior = shipped_temperatures(with_examples=True)
    assert set(prior) == {"choice", "noul", "score"}
    assert all(0.005 <= t <= 1.0 for t in prior.values())


def test_too_few_examples_to_fit_use_the_with_examples_prior(reader):
    q = ab.yes_no("Is this spam?", examples={"yes": ["Cheap pills"], "no": ["Report attached"]})
    (read,) = reader.read([ReadRequest("Cheap watches", (to_spec("spam", q),))])[0]
    assert read.extras["source"] == "shipped"
    assert read.extras["temperature"] == shipped_temperatures(with_examples=True)["noul"]


def test_many_agreeing_examples_move_the_temperature_away_from_the_prior():
    # Leave-one-out reads right 80 % at a margin of 1: the NLL minimum is T ≈ 0.72.
    rows, targets = [[1.0, 0.0]] * 80 + [[0.0, 1.0]] * 20, [0] * 100
    few = fit_temperature(rows[::10], targets[::10], prior=0.1, prior_weight=PRIOR_WEIGHT)
    many = fit_temperature(rows, targets, prior=0.1, prior_weight=PRIOR_WEIGHT)
    unshrunk = fit_temperature(rows, targets)
    assert 0.1 < few < many < unshrunk
    assert 1 / (1 + math.exp(-1 / unshrunk)) == pytest.approx(0.8, abs=0.01)


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(
        st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=4), min_size=1, max_size=30
    ),
    prior=st.floats(0.01, 0.5),
    objective=st.sampled_from(["nll", "top_label"]),
)
def test_examples_without_signal_never_fit_sharper_than_the_prior(scores, prior, objective):
    """Every leave-one-out row read with every target (the scores say nothing about the
    answer): the fitted temperature is never below the prior, whichever the loss."""
    k = min(len(r) for r in scores)
    rows = [r[:k] for r in scores for _ in range(k)]
    targets = [y for _ in scores for y in range(k)]
    t = fit_temperature(rows, targets, prior=prior, prior_weight=PRIOR_WEIGHT, objective=objective)
    assert t >= prior * 0.999


def _top_probability(row, t):
    return max(math.exp(x) for x in log_softmax(row, t))


def test_top_label_fit_calibrates_the_top_answer_where_the_nll_cannot():
    """Right 60 % of the time, and when wrong the truth is mostly the option scored
    lowest (as tone examples confuse negative with positive): the NLL flattens the
    answer to give that option mass, under-stating the top answer; the top-answer log
    loss makes the top probability 0.6."""
    rows = [[1.0, 0.5, 0.0]] * 10
    targets = [0] * 6 + [1] + [2] * 3
    nll_t = fit_temperature(rows, targets)
    top_t = fit_temperature(rows, targets, objective="top_label")
    assert _top_probability(rows[0], top_t) == pytest.approx(0.6, abs=0.005)
    assert _top_probability(rows[0], nll_t) < 0.55
    assert top_t < nll_t


def test_top_label_log_likelihood_is_the_nll_with_two_options():
    rows = [[0.3, 0.1], [0.0, 0.2], [0.5, 0.45], [0.1, 0.4]]
    targets = [0, 0, 1, 1]
    for row, y in zip(rows, targets):
        assert top_label_log_likelihood(row, y, 0.1) == pytest.approx(log_softmax(row, 0.1)[y])
    assert fit_temperature(rows, targets, objective="top_label") == pytest.approx(
        fit_temperature(rows, targets), rel=1e-6
    )
    row = [0.9, 0.2, 0.1]  # wrong: the log of everything but the top answer
    p = [math.exp(x) for x in log_softmax(row, 0.2)]
    assert top_label_log_likelihood(row, 2, 0.2) == pytest.approx(math.log(p[1] + p[2]))
    with pytest.raises(ConfigurationError):
        fit_temperature(rows, targets, objective="brier")


def test_a_score_question_fits_its_leave_one_out_temperature_by_the_top_answer(reader):
    assert OBJECTIVE == "top_label"
    examples = {
        "An angry, disappointed tweet": ["This airline lost my bag again", "Worst service ever"],
        "A neutral tweet sharing news": ["Flight 22 boards at gate 4", "New schedule from May"],
        "A happy, grateful tweet": ["Thanks for the upgrade, lovely crew!", "Great flight today"],
    }
    spec = to_spec("tone", ab.score("Tone?", list(examples), examples=examples))
    (read,) = reader.read([ReadRequest("My luggage is gone, furious", (spec,))])[0]
    texts = [*examples, *(t for ex in examples.values() for t in ex)]
    rows, targets = reader.leave_one_out(spec, dict(zip(texts, reader.embed(texts))))
    prior = shipped_temperatures(with_examples=True)["score"]
    expected = fit_temperature(
        rows, targets, prior=prior, prior_weight=PRIOR_WEIGHT, objective="top_label"
    )
    assert read.extras["source"] == "examples"
    assert read.extras["temperature"] == pytest.approx(expected, rel=1e-4)
    assert read.extras["temperature"] != pytest.approx(
        fit_temperature(rows, targets, prior=prior, prior_weight=PRIOR_WEIGHT), rel=1e-3
    )


POOL = [
    "The weather was mild for most of the week",
    "She bought a new bicycle for the summer",
    "The library closes early on public holidays",
    "Our team meeting moved to Thursday afternoon",
    "He planted tomatoes and basil in the garden",
    "The train to the coast leaves every hour",
    "They painted the kitchen a pale shade of blue",
    "A new bakery opened on the corner last month",
    "The museum has an exhibition of old maps",
    "We watched a documentary about deep sea fish",
]
STATES = ["I like reading in the evening", "The parcel arrived this morning"]


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(st.sampled_from(POOL), min_size=2, max_size=6, unique=True),
    order=st.randoms(use_true_random=False),
    state=st.sampled_from(STATES + POOL),
)
def test_the_same_examples_on_both_sides_read_uniform(reader, texts, order, state):
    """Examples that do not tell the answers apart (the same texts on both sides, in any
    order) give an exactly uniform answer, whatever the state, even one of the examples."""
    other = list(texts)
    order.shuffle(other)
    q = ab.yes_no("Is it?", examples={"yes": texts, "no": other})
    d = ab.DecisionEngine(reader).decide(state, {"q": q})["q"]
    assert d.probabilities["yes"] == pytest.approx(0.5, abs=1e-6)
    assert d.confidence == pytest.approx(0.0, abs=1e-6)
