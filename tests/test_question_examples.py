"""Examples on questions: builders, validation, wire dicts, specs, canvas and remote text."""

import pytest
from langchain_core.decisions import Choice, Noul, Score

import agentbranch as ab
from agentbranch.core.errors import InvalidQuestionError
from agentbranch.core.examples import instructions_with_examples
from agentbranch.core.questions import (
    CompiledQuestion,
    coerce_question,
    to_spec,
    validate_questions,
)
from agentbranch.core.reads import ReadRequest
from agentbranch.engine.canvas import asked
from agentbranch.engine.plan import expand
from agentbranch.engine.readers.remote import build_payload

ROUTE = ab.choice(
    "Which team?",
    {"billing": "Invoices and refunds", "outage": None},
    examples={"billing": ["Refund my invoice"], "outage": ["The site is down", "502 on login"]},
)


def test_every_builder_takes_examples_as_data_on_its_langchain_question():
    yn = ab.yes_no("Urgent?", examples={"yes": ["Prod is down"], "no": ["Thanks!"]})
    sc = ab.score("Mood?", ["calm", "angry"], examples={"angry": ["FIX IT NOW"]})
    assert all(isinstance(q, CompiledQuestion) for q in (ROUTE, yn, sc))
    assert isinstance(ROUTE.question, Choice) and isinstance(yn.question, Noul)
    assert isinstance(sc.question, Score) and sc.type == "score"
    assert yn.examples == {"yes": ["Prod is down"], "no": ["Thanks!"]}
    assert sc.examples == {"angry": ["FIX IT NOW"]}
    assert ROUTE.instructions == "Which team?" and list(ROUTE.criteria) == ["billing", "outage"]


def test_compiled_questions_check_their_examples_however_built():
    with pytest.raises(InvalidQuestionError, match="not an option"):
        CompiledQuestion(ab.yes_no("Urgent?"), examples={"maybe": ["x"]})
    with pytest.raises(TypeError, match="Choice, Noul or Score"):
        CompiledQuestion(ROUTE)


def test_a_compiled_question_equals_any_question_with_its_wire_dict():
    plain = ab.yes_no("Urgent?")
    assert CompiledQuestion(plain) == plain and CompiledQuestion(plain).model_dump() == (
        plain.model_dump()
    )
    assert ROUTE != ROUTE.question


def test_questions_without_examples_are_unchanged():
    assert type(ab.choice("Which?", ["a", "b"])) is Choice
    assert type(ab.yes_no("Urgent?")) is Noul
    assert "examples" not in ab.score("Mood?", ["calm", "angry"]).model_dump()


def test_wire_dicts_round_trip():
    wire = ROUTE.model_dump()
    assert wire["examples"]["outage"] == ["The site is down", "502 on login"]
    back = coerce_question("team", wire)
    assert back == ROUTE
    assert validate_questions({"team": wire})["team"].examples == ROUTE.examples
    plain = coerce_question("t", {**ab.yes_no("Urgent?").model_dump(), "examples": None})
    assert type(plain) is Noul


@pytest.mark.parametrize(
    "examples, fix",
    [
        ({"refunds": ["x"]}, "not an option"),
        ({"billing": "Refund please"}, "must be a list of texts"),
        ({"billing": [""]}, "non-empty strings"),
        (["billing"], "must be a mapping"),
        ({"billing": []}, "examples are empty"),
        ({"billing": ["x"] * 51}, "at most 50"),
    ],
)
def test_bad_examples_say_what_to_fix(examples, fix):
    with pytest.raises(InvalidQuestionError, match=fix):
        ab.choice("Which team?", ["billing", "outage"], examples=examples)


def test_bad_examples_in_a_wire_dict_are_caught_with_the_question_id():
    wire = {"type": "noul", "instructions": "Urgent?", "examples": {"maybe": ["x"]}}
    with pytest.raises(InvalidQuestionError, match="question 'u'.*'maybe'"):
        to_spec("u", coerce_question("u", wire))


def test_spec_carries_examples_in_option_order_and_chunks_keep_them():
    spec = to_spec("team", ROUTE)
    assert spec.examples == (("Refund my invoice",), ("The site is down", "502 on login"))
    assert to_spec("t", ab.choice("Which?", ["a", "b"])).examples == ()
    units = expand(spec, max_options=26, permutations=2)
    assert units[1].spec.options == ("outage", "billing")
    assert units[1].spec.examples == (("The site is down", "502 on login"), ("Refund my invoice",))


def test_canvas_readers_show_examples_as_few_shot_lines_in_the_instructions():
    spec = to_spec("team", ROUTE)
    assert asked(spec).instructions == (
        "Which team?\n"
        "Examples:\n"
        '"Refund my invoice" -> billing\n'
        '"The site is down" -> outage\n'
        '"502 on login" -> outage'
    )
    plain = to_spec(
        "t", ab.choice("Which team?", {"billing": "Invoices and refunds", "outage": None})
    )
    assert asked(plain) is plain  # no examples: exactly the question vLLM would build


def test_example_lines_are_one_line_each():
    text = instructions_with_examples("Q?", ["yes", "no"], (('Say "hi"\nthen go',), ()))
    assert text == "Q?\nExamples:\n\"Say 'hi' then go\" -> yes"


def test_remote_payload_carries_the_few_shot_instructions():
    body = build_payload(ReadRequest(state="s", questions=(to_spec("team", ROUTE),)))
    (question,) = body["questions"].values()
    assert question["instructions"].startswith("Which team?\nExamples:\n")
    assert "examples" not in question  # the server schema forbids unknown fields
