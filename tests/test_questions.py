import pytest
from langchain_core.decisions import Choice, Noul, Score

import agentbranch as ab
from agentbranch.core.questions import to_spec, validate_questions


def test_constructors_build_langchain_questions():
    assert isinstance(ab.choice("Which team?", ["billing", "outage"]), Choice)
    assert isinstance(ab.yes_no("Urgent?", yes="needs a reply within the hour"), Noul)
    assert isinstance(ab.score("How angry?", ["calm", "angry"]), Score)


def test_spec_labels_follow_vllm_label_sets():
    spec = to_spec("t", ab.choice("Which?", {"billing": "money", "outage": None}))
    assert spec.labels == ("A", "B")
    assert spec.descriptions == ("money", None)
    assert to_spec("u", ab.yes_no("Urgent?")).labels == ("yes", "no")
    assert to_spec("s", ab.score("?", ["lo", "mid", "hi"])).labels == ("0", "1", "2")


def test_wire_dicts_are_accepted():
    qs = validate_questions(
        {"t": {"type": "choice", "instructions": "Which?", "criteria": {"a": None, "b": None}}}
    )
    assert isinstance(qs["t"], Choice)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ab.choice("?", []),
        lambda: ab.choice("?", ["only"]),
        lambda: ab.choice("?", ["a", "a"]),
        lambda: ab.choice("?", [f"o{i}" for i in range(256)]),
        lambda: to_spec("s", ab.score("?", [str(i) for i in range(11)])),
        lambda: to_spec("s", ab.score("?", ["same", "same"])),
        lambda: to_spec("c", Choice(instructions="?", criteria={"one": None})),
        lambda: to_spec("c", Choice(instructions="?", criteria={" ": None, "b": None})),
        lambda: validate_questions({}),
        lambda: validate_questions({"": ab.yes_no("?")}),
        lambda: validate_questions(ab.yes_no("?")),
        lambda: validate_questions({"x": {"type": "box", "instructions": "?"}}),
        lambda: validate_questions({"x": {"type": "choice", "instructions": "?"}}),
        lambda: validate_questions({f"q{i}": ab.yes_no("?") for i in range(65)}),
    ],
)
def test_bad_questions_raise_clear_errors(make):
    with pytest.raises(ab.InvalidQuestionError) as err:
        make()
    assert len(str(err.value)) > 20  # says what was wrong


def test_error_messages_name_the_fix():
    with pytest.raises(ab.InvalidQuestionError, match="at least 2 options"):
        ab.choice("?", ["only"])
    with pytest.raises(ab.InvalidQuestionError, match="at most 10 levels"):
        to_spec("s", ab.score("?", [str(i) for i in range(11)]))
    with pytest.raises(ab.InvalidQuestionError, match="repeated"):
        ab.choice("?", ["a", "b", "a"])
