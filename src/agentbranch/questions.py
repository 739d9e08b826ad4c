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
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from langchain_core.decisions import Choice, Noul, NoulCriteria, Score
from pydantic import ValidationError

from agentbranch.engine.question_types import QUESTION_TYPES
from agentbranch.engine.reads import QuestionSpec
from agentbranch.errors import InvalidQuestionError
from agentbranch.question_examples import WITH_EXAMPLES, attach_examples, spec_examples

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
    example states that should get them (see ``agentbranch.question_examples``)."""
    if isinstance(options, str) or not isinstance(options, Mapping | Sequence):
        raise InvalidQuestionError(
            "choice options must be a list of names or a mapping name -> description, "
            f"got {type(options).__name__}"
        )
    if not isinstance(options, Mapping):
        names = [str(o) for o in options]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InvalidQuestionError(
                f"choice options must be distinct; repeated: {duplicates}. "
                "Give each option a unique name."
            )
        options = dict.fromkeys(names)
    _check_option_count("choice", len(options))
    question = Choice(instructions=instructions, criteria=dict(options))
    return attach_examples(question, [str(o) for o in options], examples)


def yes_no(
    instructions: str,
    *,
    yes: str | None = None,
    no: str | None = None,
    examples: Mapping[str, Sequence[str]] | None = None,
) -> Noul:
    """A yes/no question; ``yes``/``no`` optionally describe what each answer means;
    ``examples={"yes": [...], "no": [...]}`` give example states for each answer."""
    criteria = NoulCriteria(true=yes, false=no) if (yes or no) else None
    question = Noul(instructions=instructions, criteria=criteria)
    return attach_examples(question, ["yes", "no"], examples)


def score(
    instructions: str,
    levels: Sequence[str],
    *,
    examples: Mapping[str, Sequence[str]] | None = None,
) -> Score:
    """Rate on an ordered scale of 2–10 distinct ``levels``, lowest first;
    ``examples`` maps levels to example states at that level."""
    if isinstance(levels, str):
        raise InvalidQuestionError("score levels must be a list of level names, lowest first")
    question = Score(instructions=instructions, criteria=list(levels))
    return attach_examples(question, [_text(level) for level in levels], examples)


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
        except ValidationError as e:
            raise InvalidQuestionError(f"question {qid!r} is malformed: {e}") from e
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
    for qid, question in questions.items():
        if not isinstance(qid, str) or not qid.strip():
            raise InvalidQuestionError(f"question ids must be non-empty strings, got {qid!r}")
        out[qid] = coerce_question(qid, question)
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
    if any(not o.strip() for o in options):
        raise InvalidQuestionError(f"question {qid!r}: option names must be non-empty")
    duplicates = sorted({o for o in options if options.count(o) > 1})
    if duplicates:
        raise InvalidQuestionError(
            f"question {qid!r}: options must be distinct; repeated: {duplicates}"
        )
    _check_option_count_for(qid, kind, len(options))
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
    )


def _check_option_count_for(qid: str, kind: str, n: int) -> None:
    try:
        _check_option_count(kind, n)
    except InvalidQuestionError as e:
        raise InvalidQuestionError(f"question {qid!r}: {e}") from None
