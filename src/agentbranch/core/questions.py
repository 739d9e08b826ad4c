"""Typed questions: ``langchain_core.decisions`` questions keyed by id, plus short
constructors, and their validation into the engine's ``QuestionSpec``.

>>> import agentbranch as ab
>>> questions = {
...     "team": ab.choice("Which team should handle this ticket?",
...                       {"billing": "Invoices and payments", "outage": "Service down"}),
...     "urgent": ab.yes_no("Does this need a response within the hour?"),
...     "frustration": ab.score("How frustrated is the customer?", ["calm", "annoyed", "angry"]),
... }
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from langchain_core.decisions import Choice, Noul, NoulCriteria, Score
from pydantic import ValidationError

from agentbranch.core.errors import InvalidQuestionError
from agentbranch.core.examples import WITH_EXAMPLES, attach_examples, spec_examples
from agentbranch.core.heads import question_head
from agentbranch.core.question_types import QUESTION_TYPES
from agentbranch.core.reads import QuestionSpec

__all__ = [
    "MAX_QUESTIONS",
    "Question",
    "Questions",
    "choice",
    "coerce_question",
    "instructions_text",
    "score",
    "to_spec",
    "validate_questions",
    "yes_no",
]

Question: TypeAlias = Choice | Noul | Score
Questions: TypeAlias = Mapping[str, "Question | Mapping[str, Any]"]

#: At most this many questions in one decision (vLLM's decisions endpoint allows 64).
MAX_QUESTIONS = 64


def choice(
    instructions: str,
    options: Mapping[str, str | None] | Sequence[str],
    *,
    examples: Mapping[str, Sequence[str]] | None = None,
) -> Choice:
    """Pick one of ``options``: a mapping of option name → description (or None), or a
    list of option names. 2–255 distinct, non-empty names. ``examples`` maps options to
    example states that should get them (see ``agentbranch.core.examples``)."""
    _check_instructions("choice", instructions)
    names, descriptions = _choice_options(options)
    _check_options("choice()", "choice", names, descriptions)
    criteria = dict(zip(names, descriptions))
    question = _build(Choice, "choice", instructions=instructions, criteria=criteria)
    return attach_examples(question, names, examples)


def yes_no(
    instructions: str,
    *,
    yes: str | None = None,
    no: str | None = None,
    examples: Mapping[str, Sequence[str]] | None = None,
) -> Noul:
    """A yes/no question; ``yes``/``no`` optionally describe what each answer means;
    ``examples={"yes": [...], "no": [...]}`` give example states for each answer."""
    _check_instructions("yes_no", instructions)
    for side, text in (("yes", yes), ("no", no)):
        if text is not None:
            _check_str(f"yes_no(): the {side}= description", text, empty_ok=True)
    criteria = NoulCriteria(true=yes, false=no) if (yes or no) else None
    question = _build(Noul, "yes_no", instructions=instructions, criteria=criteria)
    return attach_examples(question, ["yes", "no"], examples)


def score(
    instructions: str,
    levels: Sequence[str],
    *,
    examples: Mapping[str, Sequence[str]] | None = None,
) -> Score:
    """Rate on an ordered scale of 2–10 distinct ``levels``, lowest first;
    ``examples`` maps levels to example states at that level."""
    _check_instructions("score", instructions)
    if isinstance(levels, str | bytes) or not isinstance(levels, Sequence):
        raise InvalidQuestionError(
            "score levels must be a list of level names, lowest first, e.g. "
            f"['calm', 'annoyed', 'angry']; got {type(levels).__name__}"
        )
    _check_options("score()", "score", list(levels), [None] * len(levels))
    question = _build(Score, "score", instructions=instructions, criteria=list(levels))
    return attach_examples(question, list(levels), examples)


# -- builder checks: the same rules ``to_spec`` applies when ``decide`` runs ------------


def _check_str(what: str, value: Any, *, empty_ok: bool = False) -> None:
    """``value`` is text the model can read: a str, valid Unicode, non-blank."""
    if not isinstance(value, str):
        raise InvalidQuestionError(f"{what} must be a string, got {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise InvalidQuestionError(f"{what} must not be empty; say what is being decided")
    _check_unicode(what, value)


def _check_unicode(what: str, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidQuestionError(
            f"{what} contains an unpaired surrogate ({text[e.start]!r} at index {e.start}), "
            "which is not valid Unicode; decode the text with errors='replace' first"
        ) from None


def _check_instructions(kind: str, instructions: Any) -> None:
    _check_str(f"{kind}(): the instructions", instructions)


def _choice_options(options: Any) -> tuple[list[Any], list[Any]]:
    """A choice's option names and descriptions, checked to be text."""
    if isinstance(options, str | bytes) or not isinstance(options, Mapping | Sequence):
        raise InvalidQuestionError(
            "choice options must be a list of names or a mapping name -> description, "
            f"got {type(options).__name__}"
        )
    if isinstance(options, Mapping):
        names, descriptions = list(options), list(options.values())
    else:
        names, descriptions = list(options), [None] * len(options)
    for name, description in zip(names, descriptions):
        _check_str("choice(): an option name", name)
        if description is not None:
            _check_str(f"choice(): the description of option {name!r}", description, empty_ok=True)
    return names, descriptions


def _build(model: type[Question], kind: str, **fields: Any) -> Any:
    try:
        return model(**fields)
    except ValidationError as e:  # a rule above should have caught it first
        raise InvalidQuestionError(f"{kind}(): invalid question: {e}") from None


def _check_options(
    where: str, kind: str, options: Sequence[Any], descriptions: Sequence[Any]
) -> None:
    """Option names non-empty, valid Unicode and distinct; their number in range."""
    for o in options:
        if not isinstance(o, str):
            raise InvalidQuestionError(
                f"{where}: option and level names must be strings, got {o!r}"
            )
        if not o.strip():
            raise InvalidQuestionError(f"{where}: option names must be non-empty")
        _check_unicode(f"{where}: option {o!r}", o)
    for d in descriptions:
        if d is not None:
            _check_unicode(f"{where}: a description", str(d))
    duplicates = sorted(o for o, n in Counter(options).items() if n > 1)
    if duplicates:
        raise InvalidQuestionError(
            f"{where}: options must be distinct; repeated: {duplicates}. "
            "Give each option a unique name."
        )
    try:
        _check_option_count(kind, len(options))
    except InvalidQuestionError as e:
        raise InvalidQuestionError(f"{where}: {e}") from None


def _check_option_count(kind: str, n: int) -> None:
    qtype = QUESTION_TYPES[kind]
    if n < qtype.min_options:
        raise InvalidQuestionError(
            f"a {kind} question needs at least {qtype.min_options} options, got {n}. "
            "A decision with one possible answer is not a decision; add the alternative "
            "(e.g. 'other')."
        )
    if n > qtype.max_options:
        what = "levels" if kind == "score" else "options"
        raise InvalidQuestionError(
            f"a {kind} question allows at most {qtype.max_options} {what}, got {n}. "
            + (
                "Use fewer, coarser levels (single-digit labels 0-9 answer a score)."
                if kind == "score"
                else "Group related options under fewer names, or ask two questions."
            )
        )


def _text(value: Any) -> str:
    """Instructions and descriptions may be JSON; the model reads them as text."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def instructions_text(question: Question) -> str:
    """A question's instructions as the model reads them (JSON instructions as text)."""
    return _text(question.instructions)


def coerce_question(qid: str, question: Any) -> Question:
    """A ``Choice``/``Noul``/``Score`` from a question object or its wire dict."""
    if isinstance(question, Choice | Noul | Score):
        return question
    if isinstance(question, Mapping):
        kind = question.get("type")
        model = {"choice": Choice, "noul": Noul, "score": Score}.get(str(kind))
        if model is not None and question.get("examples") is not None:
            model = WITH_EXAMPLES[str(kind)]
        elif "examples" in question:  # "examples": null is no examples
            question = {k: v for k, v in question.items() if k != "examples"}
        if model is None:
            raise InvalidQuestionError(
                f"question {qid!r}: unknown type {kind!r}; use 'choice', 'noul' or 'score'"
            )
        try:
            return model.model_validate(question)
        except ValidationError as e:  # one sentence per field, not pydantic's dump
            from agentbranch.core.question_errors import describe_question_error

            raise InvalidQuestionError(describe_question_error(qid, str(kind), e)) from None
    raise InvalidQuestionError(
        f"question {qid!r}: expected a Choice, Noul or Score (see agentbranch.choice/"
        f"yes_no/score), got {type(question).__name__}"
    )


def validate_questions(questions: Any) -> dict[str, Question]:
    """Questions keyed by id, checked: non-empty ids, at most ``MAX_QUESTIONS``."""
    if isinstance(questions, Choice | Noul | Score):
        raise InvalidQuestionError(
            "questions must be keyed by id, e.g. {'route': agentbranch.choice(...)}"
        )
    if not isinstance(questions, Mapping) or not questions:
        raise InvalidQuestionError(
            "questions must be a non-empty mapping of id -> question, e.g. "
            "{'route': agentbranch.choice('Which team?', ['billing', 'outage'])}"
        )
    if len(questions) > MAX_QUESTIONS:
        raise InvalidQuestionError(
            f"at most {MAX_QUESTIONS} questions per decision, got {len(questions)}; "
            "split them across several decide() calls"
        )
    out: dict[str, Question] = {}
    for question_id, question in questions.items():
        if not isinstance(question_id, str) or not question_id.strip():
            raise InvalidQuestionError(
                f"question ids must be non-empty strings, got {question_id!r}"
            )
        _check_unicode(f"question id {question_id!r}", question_id)
        out[question_id] = coerce_question(question_id, question)
    return out


def to_spec(qid: str, question: Question) -> QuestionSpec:
    """The engine's view of one question, with its full option list and labels for the
    first options of its type's label set (the engine chunks choices above it)."""
    if isinstance(question, Noul):
        criteria = question.criteria
        options: list[str] = ["yes", "no"]
        descriptions: list[str | None] = [
            _text(criteria.true) or None if criteria else None,
            _text(criteria.false) or None if criteria else None,
        ]
    elif isinstance(question, Choice):
        options = [str(name) for name in question.criteria]
        descriptions = [_text(d) or None for d in question.criteria.values()]
    else:
        options = [_text(level) for level in question.criteria]
        descriptions = [None] * len(options)
    kind = question.type
    where = f"question {qid!r}"
    instructions = _text(question.instructions)
    if not instructions.strip():
        raise InvalidQuestionError(f"{where}: the instructions must not be empty")
    _check_unicode(f"{where}: the instructions", instructions)
    _check_options(where, kind, options, descriptions)
    label_set = QUESTION_TYPES[kind].label_set
    # Above the label set the engine splits the question into chunks with their own
    # labels (engine/plan.py); the whole question carries none.
    labels = label_set[: len(options)] if len(options) <= len(label_set) else ()
    return QuestionSpec(
        id=qid,
        type=kind,
        instructions=_text(question.instructions),
        options=tuple(options),
        descriptions=tuple(descriptions),
        labels=tuple(labels),
        examples=spec_examples(qid, question, options),
        head=question_head(question),
    )
