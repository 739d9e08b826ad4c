"""EmbeddedReader: the MiniLM CPU default gives sensible answers and batches its reads."""

from __future__ import annotations

import logging
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentbranch as ab
from agentbranch.core.questions import to_spec
from agentbranch.core.reads import QuestionSpec, ReadRequest
from agentbranch.engine.readers.embedded import (
    EmbeddedReader,
    fit_temperature,
    hypothesis_texts,
    shipped_temperatures,
)

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
    expected = [s / read.extras["temperature"] for s in sims]
    z = math.log(sum(math.exp(x) for x in expected))
    assert read.logprobs == pytest.approx([x - z for x in expected])
    assert sum(math.exp(lp) for lp in read.logprobs) == pytest.approx(1.0)


def test_a_state_read_again_soon_is_not_embedded_again(reader):
    """Issue 61: a learned version on trial reads the state a teacher just labelled; the
    reader keeps its recent states' embeddings, so that read runs no forward pass, and
    reads as the first read did."""
    engine = ab.DecisionEngine(reader)
    state = "ticket 61: I was charged twice for my subscription"
    first = engine.decide(state, QUESTIONS)
    before = reader.forward_calls
    again = engine.decide(state, QUESTIONS)
    assert reader.forward_calls == before  # nothing embedded
    assert {q: d.probabilities for q, d in again.items()} == {
        q: d.probabilities for q, d in first.items()
    }
    assert reader.embed([state]).numpy()[0].tolist() == reader._states.kept[state][0].tolist()
    assert reader.forward_calls == before  # (a fit's embedding of it too)
    engine.decide_many([state, state + " again"], QUESTIONS)
    assert reader.forward_calls == before + 1  # only the new one


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
        t in reader._cache.kept
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
    assert hypothesis_texts(noul) == [None, None]  # the question text is never a hypothesis
    described = QuestionSpec("u", "noul", "Urgent?", ("yes", "no"), ("down", "can wait"), ())
    assert hypothesis_texts(described) == ["down", "can wait"]
    sc = QuestionSpec("s", "score", "How angry?", ("calm", "very_angry"), (None, None), ())
    assert hypothesis_texts(sc) == ["calm", "very angry"]
    ch = QuestionSpec("c", "choice", "", ("tech_support", "sales"), ("help", None), ())
    assert hypothesis_texts(ch) == ["tech support: help", "sales"]
    # intent names as routers name them are read as words (the embedder is uncased)
    names = ("AddToPlaylist", "getWeather", "URLCheck", "book-table", "Birth Control")
    ch = QuestionSpec("c", "choice", "", names, (None,) * 5, ())
    assert hypothesis_texts(ch) == [
        "Add To Playlist",
        "get Weather",
        "URL Check",
        "book table",
        "Birth Control",
    ]


def test_camel_case_intent_names_route_by_their_words(engine):
    # Named only (no descriptions, no examples), as intents often are. Read as one
    # unknown word each, these names routed 4 of 7 and put a playlist request on
    # PlayMusic at confidence 1.0.
    requests = {
        "will it rain in paris tomorrow": "GetWeather",
        "reserve a table for four at an italian restaurant tonight": "BookRestaurant",
        "put this song on my road trip playlist": "AddToPlaylist",
        "play some jazz by miles davis": "PlayMusic",
        "give this novel four out of five stars": "RateBook",
        "find the tv show called the wire": "SearchCreativeWork",
        "what movies are showing at the cinema near me tonight": "SearchScreeningEvent",
    }
    intents = ab.choice("What does the user want?", sorted(set(requests.values())))
    got = [d["intent"] for d in engine.decide_many(list(requests), {"intent": intents})]
    right = [d.label == want for d, want in zip(got, requests.values())]
    assert sum(right) >= 6
    assert all(d.confidence < 0.5 for d, ok in zip(got, right) if not ok)


def test_a_bare_yes_no_is_near_uniform_and_warns_once(reader, caplog):
    engine = ab.DecisionEngine(reader)
    q = {"urgent": ab.yes_no("Is this urgent?")}
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        for state in ("The site is down", "Thanks, all good now"):
            d = engine.decide(state, q)["urgent"]
            assert d.probabilities == {"yes": 0.5, "no": 0.5}
            assert d.confidence == 0.0
    warnings = [r.getMessage() for r in caplog.records if r.name == "agentbranch"]
    assert len(warnings) == 1  # once per question, not per read
    assert "'urgent'" in warnings[0] and "examples=" in warnings[0]


#: Text with no word the embedder knows: blanks, control characters, emoji.
UNREADABLE = st.text(
    st.one_of(
        st.sampled_from(" \t\n\r\x00\x01\x7f\u00a0\u200b\u3000"),
        st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, database=None)
@given(states=st.lists(UNREADABLE, min_size=1, max_size=4))
def test_a_state_with_nothing_to_read_gets_uniform_answers(reader, states):
    # Its embedding is still a vector: without the rule, "" routed to billing at 0.88
    # and "😀" at 0.91 (the softmax sharpens whatever small differences are left).
    engine = ab.DecisionEngine(reader, batching=False)
    readable = "I was charged twice, please refund me"
    got = engine.decide_many([*states, readable], QUESTIONS)
    for decisions in got[:-1]:
        for d in decisions.values():
            uniform = 1 / len(d.probabilities)
            assert d.probabilities == pytest.approx(dict.fromkeys(d.probabilities, uniform))
            assert d.confidence == 0.0
    # a readable state in the same batch is read as if alone (up to padding's rounding)
    alone = engine.decide(readable, QUESTIONS)
    for qid, d in alone.items():
        assert got[-1][qid].probabilities == pytest.approx(d.probabilities, abs=1e-5)


def test_an_unreadable_state_warns_once(reader, caplog):
    engine = ab.DecisionEngine(EmbeddedReader().load(), batching=False)
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        engine.decide("", QUESTIONS)
        engine.decide("😀😀", QUESTIONS)
    warnings = [r.getMessage() for r in caplog.records if r.name == "agentbranch"]
    assert len(warnings) == 1 and "state_key" in warnings[0]


def test_bare_word_score_levels_are_near_uniform(reader, caplog):
    engine = ab.DecisionEngine(reader)
    q = {"mood": ab.score("How frustrated?", ["calm", "annoyed", "angry"])}
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        d = engine.decide("THIS IS THE THIRD TIME, FIX IT NOW", q)["mood"]
    assert max(d.probabilities.values()) == pytest.approx(1 / 3)
    assert "bare-word levels" in caplog.text


def test_yes_no_descriptions_that_only_negate_each_other_are_not_read(reader, caplog):
    engine = ab.DecisionEngine(reader)
    q = {
        "refund": ab.yes_no(
            "Refund?",
            yes="The customer asks for a refund",
            no="The customer does not ask for a refund",
        )
    }
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        d = engine.decide("Please refund my order", q)["refund"]
    assert d.probabilities == {"yes": 0.5, "no": 0.5}
    assert "negations" in caplog.text


EXAMPLES = {
    "refund": ["I want my money back", "Please refund my last order", "Charge me back for this"],
    "outage": ["The site is down", "Every page returns a 503", "Nobody can reach the server"],
    "greeting": ["Hi there!", "Hello, good morning", "Hey, how are you?"],
}


def test_examples_route_like_utterances_with_a_temperature_fitted_on_them(reader):
    question = ab.choice("Which intent?", list(EXAMPLES), examples=EXAMPLES)
    (read,) = reader.read([ReadRequest("Good morning to you!", (to_spec("intent", question),))])[0]
    assert read.extras["source"] == "examples"
    assert 0.005 <= read.extras["temperature"] <= 1.0
    d = ab.DecisionEngine(reader).decide("Good morning to you!", {"intent": question})
    assert d["intent"].label == "greeting"


def test_yes_no_with_examples_reads_the_answer(reader):
    q = {
        "spam": ab.yes_no(
            "Is this spam?",
            examples={
                "yes": ["BUY CHEAP WATCHES NOW", "You won a prize, click here", "Cheap pills"],
                "no": ["The report is attached", "Meeting moved to 3pm", "Can you review my PR?"],
            },
        )
    }
    engine = ab.DecisionEngine(reader)
    assert engine.decide("Click here for cheap watches and pills!", q)["spam"].label == "yes"
    assert engine.decide("Hi team, the quarterly report is attached.", q)["spam"].label == "no"


def test_questions_without_examples_use_the_shipped_temperature_of_their_type(reader):
    shipped = shipped_temperatures()
    assert set(shipped) == {"choice", "noul", "score"}
    spec = to_spec("team", QUESTIONS["team"])
    (read,) = reader.read([ReadRequest("The site is down", (spec,))])[0]
    assert read.extras["source"] == "shipped"
    assert read.extras["temperature"] == shipped["choice"]
    assert EmbeddedReader(temperature=0.5)._temperature(spec, {}) == (0.5, "explicit")


def test_fit_temperature_finds_the_nll_minimum():
    rows = [[1.0, 0.0]] * 8 + [[0.0, 1.0]] * 2  # right 80 % at a margin of 1
    t = fit_temperature(rows, [0] * 10)
    assert 1 / (1 + math.exp(-1 / t)) == pytest.approx(0.8, abs=0.01)
    assert fit_temperature([[1.0, 0.0]] * 5, [0] * 5) == pytest.approx(0.005)  # bound
    assert fit_temperature([[1.0, 0.0]] * 5, [0] * 5, prior=0.05) > 0.005


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
