"""`calibrated` on decisions tells the truth: the embedded CPU default is calibrated out of
the box (its shipped or leave-one-out temperatures), as the README says."""

from __future__ import annotations

import pytest

import agentbranch as ab

TEAM = ab.choice(
    "Which team?",
    {"billing": "Invoices, charges and refunds", "outage": "The service is down"},
)
URGENT = ab.yes_no(
    "Urgent?",
    yes="Customers are blocked right now",
    no="It can wait",
    examples={
        "yes": ["Checkout is down for everyone", "Nobody can log in"],
        "no": ["Please resend my invoice", "A dark theme would be nice"],
    },
)


@pytest.fixture(scope="module")
def reader():
    return ab.EmbeddedReader().load()


def test_from_env_decisions_are_calibrated(reader):
    engine = ab.DecisionEngine.from_env({})
    d = engine.decide("I was charged twice", {"team": TEAM, "urgent": URGENT})
    assert d["team"].reader == "embedded"
    assert d["team"].calibrated and d["urgent"].calibrated  # shipped / fitted on examples


def test_an_explicit_temperature_or_no_signal_is_not_calibrated(reader):
    explicit = ab.DecisionEngine(ab.EmbeddedReader(temperature=0.05).load())
    assert not explicit.decide("I was charged twice", {"team": TEAM})["team"].calibrated
    nothing = ab.DecisionEngine(reader).decide("?", {"team": TEAM})["team"]
    assert nothing.confidence == 0.0 and not nothing.calibrated  # uniform: no temperature
    # an engine Calibration still marks it, whatever the reader
    hot = ab.DecisionEngine(
        ab.EmbeddedReader(temperature=0.05).load(),
        calibration=ab.Calibration(temperatures={"team": 2.0}),
    )
    assert hot.decide("I was charged twice", {"team": TEAM})["team"].calibrated


def test_a_replayed_decision_says_calibrated_as_the_live_one_did(reader, tmp_path):
    from agentbranch.replay import Cassette

    path = tmp_path / "cal.jsonl"
    with Cassette(path, "all") as cassette:
        live = ab.DecisionEngine(cassette.reader(reader)).decide(
            "I was charged twice", {"team": TEAM}
        )
    with Cassette(path, "none") as cassette:
        again = ab.DecisionEngine(cassette.reader()).decide("I was charged twice", {"team": TEAM})
    assert live["team"].calibrated and again["team"].calibrated
    assert again["team"].probabilities == live["team"].probabilities
