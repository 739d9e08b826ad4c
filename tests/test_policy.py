"""Confidence policy: bands, fallbacks, fail-open/closed (agentbranch.policy)."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from _lg_fixtures import DrawsReader, StrictFakeChat, sure, unsure
from hypothesis import example, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError, FallbackError, ReaderError
from agentbranch.policy import (
    FailClosed,
    FailOpen,
    Generate,
    GotoNode,
    MoreDraws,
    Policy,
    Resolver,
    parse_label,
)

TEAM = ab.choice("Which team?", {"billing": "money", "outage": "down", "bug": "broken"})
URGENT = ab.yes_no("Urgent?")


def engine(script=None, **kw):
    return ab.DecisionEngine(ab.ScriptedReader(script or {}, **kw))


# -- configuration ----------------------------------------------------------------------


def test_default_policy_takes_everything():
    p = Policy()
    d = engine({"team": unsure("bug")}).decide("x", {"team": TEAM})["team"]
    assert d.confidence < 0.1
    assert p.band(d) == "take"


def test_fallback_band_without_fallbacks_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="no fallbacks"):
        Policy(take_at=0.7)
    # every uncertain answer to review: no fallback band, so no fallbacks needed
    Policy(take_at=0.7, review_below=0.7)


def test_more_draws_alone_cannot_resolve():
    with pytest.raises(ConfigurationError, match="MoreDraws alone"):
        Policy(take_at=0.7, fallbacks=[MoreDraws(4)])


@pytest.mark.parametrize("learn", [False, True])
def test_earned_threshold_never_takes_a_more_draws_re_read(learn):
    # its threshold was earned on the first read; a re-read with more draws (or through
    # another engine) has another confidence scale and no evidence of its own
    from agentbranch.policy.earned import Earned

    model = StrictFakeChat(replies=["bug"])
    with pytest.raises(ConfigurationError, match="cannot take a MoreDraws re-read"):
        Policy(take_at=Earned(learn=learn), fallbacks=[MoreDraws(4), Generate(model)])
    Policy(take_at=Earned(learn=learn), fallbacks=[Generate(model)])


def test_review_threshold_must_not_exceed_take():
    with pytest.raises(ConfigurationError, match="review_below"):
        Policy(take_at=0.5, review_below=0.8, fallbacks=[GotoNode("x")])


def test_fail_open_label_must_be_an_option():
    with pytest.raises(ConfigurationError, match="FailOpen label 'maybe'"):
        Resolver(engine(), {"urgent": URGENT}, Policy(on_error=FailOpen("maybe")))


def test_policy_mapping_with_unknown_question_is_rejected():
    with pytest.raises(ConfigurationError, match="unknown question ids"):
        Resolver(engine(), {"urgent": URGENT}, {"urgnet": Policy()})


# -- bands ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [(sure("billing"), "take"), (unsure("billing"), "review")],
)
def test_band_by_confidence(entry, expected):
    p = Policy(take_at=0.6, review_below=0.3, fallbacks=[GotoNode("human")])
    d = engine({"team": entry}).decide("x", {"team": TEAM})["team"]
    assert p.band(d) == expected


def test_middle_band_is_fallback():
    p = Policy(take_at=0.9, review_below=0.1, fallbacks=[GotoNode("human")])
    d = engine({"team": {"billing": 0.8, "outage": 0.15, "bug": 0.05}}).decide("x", {"team": TEAM})[
        "team"
    ]
    assert 0.1 < d.confidence < 0.9
    assert p.band(d) == "fallback"


def test_low_label_mass_is_not_taken():
    p = Policy(take_at=0.5, min_label_mass=0.5, fallbacks=[GotoNode("human")])
    confident_but_off_label = engine({"team": sure("bug")}, label_mass=0.2)
    d = confident_but_off_label.decide("x", {"team": TEAM})["team"]
    assert d.confidence > 0.5 and d.label_mass == pytest.approx(0.2)
    assert p.band(d) == "fallback"


# -- resolution -------------------------------------------------------------------------


def _team_resolver(script, model: StrictFakeChat) -> Resolver:
    """Resolves ``team`` as ``script`` reads it, taken at 0.6, else ``model``'s answer."""
    policy = Policy(take_at=0.6, fallbacks=[Generate(model)])
    return Resolver(engine({"team": script}), {"team": TEAM}, policy)


def test_take_band_keeps_engine_label_and_never_calls_the_model():
    model = StrictFakeChat(replies=[])
    r = _team_resolver(sure("outage"), model)
    rec = r.resolve("site down")["team"]
    assert (rec["label"], rec["band"], rec["decided_by"]) == ("outage", "take", "engine")
    assert model.calls == 0


def test_generation_fallback_answers_below_threshold():
    model = StrictFakeChat(replies=['{"label": "billing"}'])
    r = _team_resolver(unsure("bug"), model)
    rec = r.resolve("I was charged twice")["team"]
    assert rec["label"] == "billing"
    assert rec["engine_label"] == "bug"
    assert (rec["band"], rec["decided_by"]) == ("fallback", "fallback")
    assert rec["fallback"]["kind"] == "generate"
    assert model.calls == 1
    # the model saw the same question and the same options
    prompt = "\n".join(str(m.content) for m in model.prompts[0])
    assert "Which team?" in prompt and "I was charged twice" in prompt
    for option in ("billing", "outage", "bug"):
        assert f"- {option}" in prompt


def test_invalid_generation_is_rejected_never_an_unknown_label():
    model = StrictFakeChat(replies=['{"label": "sales"}'])
    r = _team_resolver(unsure("bug"), model)
    with pytest.raises(FallbackError, match="sales"):
        r.resolve("x")


def test_invalid_generation_moves_on_to_the_next_fallback():
    model = StrictFakeChat(replies=["I think it's probably sales?"])
    r = Resolver(
        engine({"team": unsure("bug")}),
        {"team": TEAM},
        Policy(take_at=0.6, fallbacks=[Generate(model), GotoNode("human_triage")]),
    )
    rec = r.resolve("x")["team"]
    assert rec["goto"] == "human_triage" and rec["decided_by"] == "fallback_node"
    assert model.calls == 1


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ('{"label": "outage"}', "outage"),
        ('```json\n{"label": "bug"}\n```', "bug"),
        ("Billing", "billing"),
        ('"outage".', "outage"),
        ('{"choice": "bug"}', "bug"),
    ],
)
def test_parse_label_accepts_json_or_bare_option(reply, label):
    assert parse_label(reply, ["billing", "outage", "bug"]) == label


@pytest.mark.parametrize("reply", ["", "billing or bug", '{"label": 3}', '{"label": "Sales"}'])
def test_parse_label_rejects_anything_else(reply):
    with pytest.raises(FallbackError):
        parse_label(reply, ["billing", "outage", "bug"])


def _draws_then_generate(reader: DrawsReader, draws: int, model: StrictFakeChat) -> dict:
    """The record of ``team`` for state "x": taken at 0.6, else read again with ``draws``
    draws, else ``model``'s answer."""
    policy = Policy(take_at=0.6, fallbacks=[MoreDraws(draws), Generate(model)])
    return Resolver(ab.DecisionEngine(reader), {"team": TEAM}, policy).resolve("x")["team"]


def test_more_draws_is_taken_when_it_clears_the_threshold():
    reader = DrawsReader(sure_at=8)
    model = StrictFakeChat(replies=[])
    rec = _draws_then_generate(reader, 8, model)
    assert reader.draws_seen == [1, 8]
    assert rec["decided_by"] == "engine" and rec["draws"] == 8
    assert rec["fallback"] == {"kind": "more_draws", "draws": 8}
    assert rec["confidence"] >= 0.6
    assert model.calls == 0


def test_more_draws_that_stay_uncertain_go_on_to_generation():
    reader = DrawsReader(sure_at=100)
    model = StrictFakeChat(replies=["outage"])
    rec = _draws_then_generate(reader, 4, model)
    assert reader.draws_seen == [1, 4]
    assert rec["decided_by"] == "fallback" and rec["label"] == "outage"
    assert rec["draws"] == 4


def test_review_band_asks_the_reviewer_before_any_fallback():
    order = []
    model = StrictFakeChat(replies=["billing"])

    def review(payload):
        order.append(("review", model.calls))
        assert payload["options"] == ["yes", "no"]
        assert "state" not in payload
        return "no"

    r = Resolver(
        engine({"team": {"billing": 0.8, "outage": 0.15, "bug": 0.05}, "urgent": unsure("yes")}),
        {"team": TEAM, "urgent": URGENT},
        {
            "team": Policy(take_at=0.9, fallbacks=[Generate(model)]),
            "urgent": Policy(take_at=0.9, review_below=0.9),
        },
        review=review,
    )
    recs = r.resolve("x")
    assert order == [("review", 0)]
    assert (recs["urgent"]["label"], recs["urgent"]["decided_by"]) == ("no", "human")
    assert recs["urgent"]["band"] == "review"
    assert recs["team"]["decided_by"] == "fallback"


def test_reviewer_answer_outside_options_is_rejected():
    r = Resolver(
        engine({"urgent": unsure("yes")}),
        {"urgent": URGENT},
        Policy(take_at=0.9, review_below=0.9),
        review=lambda payload: "perhaps",
    )
    with pytest.raises(FallbackError, match="perhaps"):
        r.resolve("x")


# -- engine errors ----------------------------------------------------------------------


def test_engine_errors_raise_by_default():
    r = Resolver(engine(error=RuntimeError("GPU fell over")), {"urgent": URGENT}, Policy())
    with pytest.raises(ReaderError, match="GPU fell over"):
        r.resolve("x")


def test_fail_open_takes_the_named_default():
    r = Resolver(
        engine(error=RuntimeError("boom")), {"urgent": URGENT}, Policy(on_error=FailOpen("no"))
    )
    rec = r.resolve("x")["urgent"]
    assert (rec["label"], rec["decided_by"], rec["band"]) == ("no", "fail_open", "error")
    assert "boom" in rec["error"]
    assert rec["goto"] is None


def test_fail_closed_goes_to_the_safe_node():
    r = Resolver(
        engine(error=RuntimeError("boom")),
        {"urgent": URGENT},
        Policy(on_error=FailClosed("refuse")),
    )
    rec = r.resolve("x")["urgent"]
    assert (rec["label"], rec["goto"], rec["decided_by"]) == (None, "refuse", "fail_closed")


def test_fail_open_does_not_hide_programming_errors():
    r = Resolver(engine(), {"urgent": URGENT}, Policy(on_error=FailOpen("no")))
    with pytest.raises(ab.InvalidStateError):
        r.resolve(object())


def test_async_resolution_matches_sync():
    model = StrictFakeChat(replies=["billing"])
    r = Resolver(
        engine({"team": unsure("bug"), "urgent": sure("yes")}),
        {"team": TEAM, "urgent": URGENT},
        {"team": Policy(take_at=0.6, fallbacks=[Generate(model)])},
    )
    recs = asyncio.run(r.aresolve("x"))
    assert recs["team"]["decided_by"] == "fallback" and recs["team"]["label"] == "billing"
    assert recs["urgent"]["decided_by"] == "engine" and recs["urgent"]["label"] == "yes"


def test_async_fail_open():
    r = Resolver(
        engine(error=RuntimeError("boom")), {"urgent": URGENT}, Policy(on_error=FailOpen("yes"))
    )
    rec = asyncio.run(r.aresolve("x"))["urgent"]
    assert rec["decided_by"] == "fail_open" and rec["label"] == "yes"


def test_more_effort_on_another_engine():
    """``MoreDraws(engine=...)``: escalate to another engine, e.g. a vLLM reader variant
    with more denoising steps; its confident read is taken, the base engine read once."""
    base = ab.ScriptedReader({"team": {"billing": 0.4, "outage": 0.35, "bug": 0.25}})
    stronger = ab.ScriptedReader(
        {"team": {"billing": 0.02, "outage": 0.97, "bug": 0.01}}, model="stronger"
    )
    model = StrictFakeChat(replies=[])
    r = Resolver(
        ab.DecisionEngine(base),
        {"team": TEAM},
        Policy(
            take_at=0.6,
            fallbacks=[MoreDraws(1, engine=ab.DecisionEngine(stronger)), Generate(model)],
        ),
    )
    rec = r.resolve("x")["team"]
    assert rec["label"] == "outage" and rec["model"] == "stronger"
    assert len(base.calls) == 1 and len(stronger.calls) == 1 and model.calls == 0
    with pytest.raises(ConfigurationError):
        MoreDraws(1)


def test_each_decision_is_logged_once_direct_and_under_a_policy(caplog):
    def events() -> list[logging.LogRecord]:
        return [r for r in caplog.records if getattr(r, "event", None) == "agentbranch.decision"]

    caplog.set_level(logging.INFO, logger="agentbranch")
    questions = {"team": TEAM, "urgent": ab.yes_no("Urgent?")}
    reader = ab.ScriptedReader({"team": {"billing": 0.4, "outage": 0.35, "bug": 0.25}})
    ab.DecisionEngine(reader).decide("x", questions)
    assert [r.question_id for r in events()] == ["team", "urgent"]
    caplog.clear()
    model = StrictFakeChat(replies=["outage"])
    r = Resolver(
        ab.DecisionEngine(reader),
        questions,
        {"team": Policy(take_at=0.6, fallbacks=[MoreDraws(4), Generate(model)]), "*": Policy()},
    )
    records = r.resolve("x")
    from agentbranch.integrations.observability import emit_all

    emit_all(records.values())
    assert sorted(e.question_id for e in events()) == ["team", "urgent"]
    team = next(e for e in events() if e.question_id == "team")
    assert team.decided_by == "fallback" and team.label == "outage"
    assert hasattr(team, "probabilities") and not hasattr(team, "state")


# -- the reply parser accepts every exact option name (issue 22) -------------------------

OPTION_NAME = (
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=24)
    .map(str.strip)
    .filter(bool)
)


@settings(max_examples=200, deadline=None)
@given(options=st.lists(OPTION_NAME, min_size=2, max_size=6, unique=True), data=st.data())
@example(options=["Not urgent.", "Very urgent."], data=None)
@example(options=["yes", "yes."], data=None)
@example(options=['{"label": "a"}', "b"], data=None)
def test_parse_label_accepts_every_exact_option_name(options, data):
    chosen = options if data is None else [data.draw(st.sampled_from(options))]
    for option in chosen:
        assert parse_label(option, options) == option
        assert parse_label(f"  {option}\n", options) == option
        for reply in (
            json.dumps({"label": option}),
            json.dumps({"label": option}, ensure_ascii=False),
        ):
            if reply not in options:  # else the reply names that option exactly
                assert parse_label(reply, options) == option
        assert parse_label(AIMessage(option), options) == option


@settings(max_examples=200, deadline=None)
@given(options=st.lists(OPTION_NAME, min_size=2, max_size=6, unique=True), reply=st.text())
def test_parse_label_never_answers_outside_the_options(options, reply):
    try:
        assert parse_label(reply, options) in options
    except FallbackError:
        pass


def test_generate_can_choose_an_option_that_ends_with_a_period():
    levels = ["Calm.", "Annoyed.", "Very urgent."]
    model = StrictFakeChat(replies=['{"label": "Very urgent."}', "Very urgent.", "very urgent"])
    r = Resolver(
        engine({}),  # uniform: every read falls back
        {"tone": ab.choice("How urgent is it?", levels)},
        Policy(take_at=0.6, fallbacks=[Generate(model)]),
    )
    for _ in range(3):
        rec = r.resolve("Production is down!")["tone"]
        assert (rec["label"], rec["decided_by"]) == ("Very urgent.", "fallback")
