"""``assert_decision``/``assert_band``: they pass and fail where they should, and a
failure's message holds the whole decision (distribution, entropy, band, who decided)."""

from __future__ import annotations

import pytest

import agentbranch as ab
from agentbranch.policy import Generate, Policy, Resolver
from agentbranch.testing import assert_band, assert_decision, describe_decision

TEAM = {"team": ab.choice("Which team?", ["billing", "outage", "bug"])}


def read(state, question):
    if "charged" in state:
        return {"billing": 0.9, "outage": 0.06, "bug": 0.04}
    return {"billing": 0.4, "outage": 0.35, "bug": 0.25}


ENGINE = ab.DecisionEngine(reader=ab.ScriptedReader({"team": read}))


def decision(text):
    return ENGINE.decide(text, TEAM)["team"]


def record(text):
    fallback = Generate(_Teacher())
    resolver = Resolver(ENGINE, TEAM, Policy(take_at=0.5, fallbacks=[fallback]))
    return resolver.resolve(text)["team"]


class _Teacher:
    """Stands in for a chat model: always answers outage."""

    model_name = "stub-teacher"

    def invoke(self, messages):
        return '{"label": "outage"}'

    async def ainvoke(self, messages):
        return '{"label": "outage"}'


def test_a_decision_that_meets_the_bar_passes():
    d = decision("I was charged twice")
    assert_decision(d, label="billing", min_probability=0.85)
    assert_decision(d, min_probability=0.89, min_confidence=0.5)
    assert_band(d, "take", take_at=0.5)
    assert_band(d, "fallback", take_at=0.99)


def test_a_wrong_label_fails_with_the_whole_distribution():
    d = decision("something else")
    with pytest.raises(AssertionError) as failed:
        assert_decision(d, label="outage", min_probability=0.7)
    message = str(failed.value)
    assert "label is 'billing', expected 'outage'" in message
    assert "P('outage') is 0.350, expected at least 0.7" in message
    for option, p in (("billing", "0.400"), ("outage", "0.350"), ("bug", "0.250")):
        assert f"{option}" in message and p in message
    assert f"entropy {d.entropy:.3f}" in message and f"confidence {d.confidence:.3f}" in message
    # most likely first
    assert message.index("billing ") < message.index("outage ") < message.index("bug ")


def test_too_little_probability_or_confidence_fails():
    d = decision("I was charged twice")
    with pytest.raises(AssertionError, match=r"P\('billing'\) is 0.900, expected at least 0.95"):
        assert_decision(d, label="billing", min_probability=0.95)
    with pytest.raises(AssertionError, match="confidence is 0.6"):
        assert_decision(d, min_confidence=0.9)


def test_a_record_carries_its_band_and_what_decided():
    taken = record("I was charged twice")
    assert_band(taken, "take")
    assert_decision(taken, label="billing", min_probability=0.8)
    fell = record("something else")
    assert_band(fell, "fallback")
    with pytest.raises(AssertionError) as failed:
        assert_band(fell, "take")
    message = str(failed.value)
    assert "band is 'fallback', expected 'take'" in message
    assert "band 'fallback' (take_at 0.500, trust 'fixed')" in message
    assert "decided by 'fallback' (the engine said 'billing'), fallback generate" in message
    assert "billing" in message and "0.400" in message
    with pytest.raises(AssertionError, match="label is 'outage', expected 'billing'"):
        assert_decision(fell, label="billing")


def test_misuse_is_a_clear_error_not_a_pass():
    d = decision("I was charged twice")
    with pytest.raises(ValueError, match="not an option"):
        assert_decision(d, label="sales")
    with pytest.raises(ValueError, match="min_probability"):
        assert_decision(d, min_probability=70)
    with pytest.raises(ValueError, match="take_at="):
        assert_band(d, "take")
    with pytest.raises(ValueError, match="band must be one of"):
        assert_band(d, "taken", take_at=0.5)
    with pytest.raises(TypeError, match="expected a Decision"):
        assert_decision("billing", label="billing")


def test_describe_decision_reads_an_error_record():
    rec = {
        "question_id": "team",
        "label": None,
        "probabilities": None,
        "band": "error",
        "take_at": 0.8,
        "trust": "fixed",
        "decided_by": "fail_closed",
        "goto": "human",
        "error": "ReaderError: down",
        "reader": "r",
        "model": "m",
    }
    text = describe_decision(rec)
    assert "no distribution" in text and "goto 'human'" in text and "ReaderError" in text


def test_a_value_just_below_the_bar_is_not_shown_as_meeting_it():
    d = decision("I was charged twice")  # P(billing) is 0.9 renormalised: 0.8999...
    assert d.probabilities["billing"] < 0.9
    with pytest.raises(AssertionError, match=r"P\('billing'\) is 0\.8999"):
        assert_decision(d, min_probability=0.9)
