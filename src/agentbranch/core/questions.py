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

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from langchain_core.decisions import Choice, Noul, NoulCriteria, Score
from pydantic import ValidationError

from agentbranch.core.any_of import OPTION, AnyOf
from agentbranch.core.errors import InvalidQuestionError, surrogate_at
from agentbranch.core.examples import Examples, check_examples
from agentbranch.core.question_types import QUESTION_TYPES
from agentbranch.core.reads import QuestionSpec

__all__ = [
    "MAX_QUESTIONS",
    "AnyOf",
    "CompiledQuestion",
    "FewShotPool",
    "LearnedHead",
    "Question",
    "Questions",
    "any_of",
    "as_compiled",
    "choice",
    "coerce_question",
    "instructions_text",
    "option_names",
    "score",
    "to_spec",
    "validate_questions",
    "yes_no",
]

Written: TypeAlias = Choice | Noul | Score  #: a question as ``langchain_core`` writes it


class LearnedHead(Protocol):
    """Per-option weights the embedded reader reads a question by
    (``agentbranch.core.heads.LinearHead``): its digest is in the wire dict."""

    digest: str


class FewShotPool(Protocol):
    """Labelled states a canvas version picks its few-shot lines from, per state read
    (``agentbranch.policy.earned.learn.nearest.Pool``)."""

    digest: str

    def wire(self) -> dict[str, Any]:
        """Its digest and selection rule: what a version's wire dict carries."""
        ...

    def pick(self, states: Sequence[str]) -> list[Examples]:
        """For each state, the lines per option it shows."""
        ...


@dataclass(frozen=True, eq=False)
class CompiledQuestion:
    """A question with what it carries besides its text: ``examples`` per option, a
    learned ``head`` the embedded reader reads by, a few-shot ``pool`` canvas readers
    pick lines from per state (``ab.choice(..., examples=...)``, ``with_head``,
    ``with_pool``). It reads like its question (``type``, ``instructions``,
    ``criteria``); its wire dict (``model_dump``, what its evidence key is made of) is the
    question's plus ``"examples"``, ``"learned_head"`` or ``"learned_pool"``. It equals
    any question with the same wire dict."""

    question: Written
    examples: Examples | None = None
    head: LearnedHead | None = None
    pool: FewShotPool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.question, Choice | Noul | Score):
            raise TypeError(
                "CompiledQuestion holds a langchain_core Choice, Noul or Score, got "
                f"{type(self.question).__name__}"
            )
        if self.examples is not None:  # (a frozen field set once, checked)
            checked = check_examples("", option_names(self.question), self.examples)
            object.__setattr__(self, "examples", checked)

    @property
    def type(self) -> str:
        return self.question.type

    @property
    def instructions(self) -> Any:
        return self.question.instructions

    @property
    def criteria(self) -> Any:
        return self.question.criteria

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """The wire dict (``kwargs`` as pydantic's ``model_dump`` takes them)."""
        out = self.question.model_dump(**kwargs)
        if self.examples is not None or self.head is not None or self.pool is not None:
            out["examples"] = (
                None if self.examples is None else {o: list(v) for o, v in self.examples.items()}
            )
        if self.head is not None:
            out["learned_head"] = self.head.digest
        if self.pool is not None:
            out["learned_pool"] = self.pool.wire()
        return out

    def replace(self, **changes: Any) -> CompiledQuestion:
        """A new question (so a new evidence key) with ``changes``."""
        return dataclasses.replace(self, **changes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompiledQuestion | Choice | Noul | Score):
            return NotImplemented
        return self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]  # (questions are not hashable)


Question: TypeAlias = Choice | Noul | Score | CompiledQuestion | AnyOf
Questions: TypeAlias = Mapping[str, "Question | Mapping[str, Any]"]


def as_compiled(question: Question) -> CompiledQuestion:
    """``question`` as a ``CompiledQuestion`` (a plain one carries nothing more)."""
    return question if isinstance(question, CompiledQuestion) else CompiledQuestion(question)


def _with_examples(question: Written, qid: str, examples: Any) -> Question:
    """``question`` itself without examples, else compiled with them, checked."""
    if examples is None:
        return question
    checked = check_examples(qid, option_names(question), examples)
    return CompiledQuestion(question, examples=checked)


#: At most this many questions in one decision (vLLM's decisions endpoint allows 64).
MAX_QUESTIONS = 64


def choice(
    instructions: str,
    options: Mapping[str, str | None] | Sequence[str],
    *,
    examples: Mapping[str, Sequence[str]] | None = None,
) -> Choice | CompiledQuestion:
    """Pick one of ``options``: a mapping of option name → description (or None), or a
    list of option names. 2–255 distinct, non-empty names. ``examples`` maps options to
    example states that should get them (see ``agentbranch.core.examples``); a question
    with examples is a ``CompiledQuestion`` carrying them."""
    _check_str("choice(): the instructions", instructions)
    names, descriptions = _choice_options(options)
    _check_options("choice()", "choice", names, descriptions)
    criteria = dict(zip(names, descriptions))
    question = Choice(instructions=instructions, criteria=criteria)
    return _with_examples(question, "", examples)


def yes_no(
    instructions: str,
    *,
    yes: str | None = None,
    no: str | None = None,
    examples: Mapping[str, Sequence[str]] | None = None,
) -> Noul | CompiledQuestion:
    """A yes/no question; ``yes``/``no`` optionally describe what each answer means;
    ``examples={"yes": [...], "no": [...]}`` give example states for each answer."""
    _check_str("yes_no(): the instructions", instructions)
    for side, text in (("yes", yes), ("no", no)):
        if text is not None:
            _check_str(f"yes_no(): the {side}= description", text, empty_ok=True)
    criteria = NoulCriteria(true=yes, false=no) if (yes or no) else None
    question = Noul(instructions=instructions, criteria=criteria)
    return _with_examples(question, "", examples)


def score(
    instructions: str,
    levels: Sequence[str],
    *,
    examples: Mapping[str, Sequence[str]] | None = None,
) -> Score | CompiledQuestion:
    """Rate on an ordered scale of 2–10 distinct ``levels``, lowest first;
    ``examples`` maps levels to example states at that level."""
    _check_str("score(): the instructions", instructions)
    if isinstance(levels, str | bytes) or not isinstance(levels, Sequence):
        raise InvalidQuestionError(
            "score levels must be a list of level names, lowest first, e.g. "
            f"['calm', 'annoyed', 'angry']; got {type(levels).__name__}"
        )
    _check_options("score()", "score", list(levels), [None] * len(levels))
    question = Score(instructions=instructions, criteria=list(levels))
    return _with_examples(question, "", examples)


def any_of(instructions: str, options: Mapping[str, str | None] | Sequence[str]) -> AnyOf:
    """Which of ``options`` apply (any number of them): one yes/no question per option,
    ``instructions`` naming it with ``{option}`` (``"Does the request need {option}?"``);
    ``options`` a list of names or a mapping name -> description (or None). 1-64
    distinct, non-empty names. Its answer is a set: ask it through a ``Policy`` (a decide
    node, a ``Resolver``, the LangChain tool), which resolves each option's read."""
    _check_str("any_of(): the instructions", instructions)
    if OPTION not in instructions:
        raise InvalidQuestionError(
            "any_of(): the instructions are asked of each option and must name it with "
            "{option}, e.g. 'Does the request need the tool {option}?'"
        )
    names, descriptions = _choice_options(options, "any_of")
    _check_options("any_of()", "any_of", names, descriptions)
    return AnyOf(instructions, dict(zip(names, descriptions)))


# -- builder checks: the same rules ``to_spec`` applies when ``decide`` runs (they are
# stricter than langchain_core's models, which therefore never refuse a checked question)


def _check_str(what: str, value: Any, *, empty_ok: bool = False) -> None:
    """``value`` is text the model can read: a str, valid Unicode, non-blank."""
    if not isinstance(value, str):
        raise InvalidQuestionError(f"{what} must be a string, got {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise InvalidQuestionError(f"{what} must not be empty; say what is being decided")
    _check_unicode(what, value)


def _check_unicode(what: str, text: str) -> None:
    if (at := surrogate_at(text)) >= 0:
        raise InvalidQuestionError(
            f"{what} contains an unpaired surrogate ({text[at]!r} at index {at}), "
            "which is not valid Unicode; decode the text with errors='replace' first"
        )


def _choice_options(options: Any, kind: str = "choice") -> tuple[list[Any], list[Any]]:
    """A choice's (or any_of's) option names and descriptions, checked to be text."""
    if isinstance(options, str | bytes) or not isinstance(options, Mapping | Sequence):
        raise InvalidQuestionError(
            f"{kind} options must be a list of names or a mapping name -> description, "
            f"got {type(options).__name__}"
        )
    if isinstance(options, Mapping):
        names, descriptions = list(options), list(options.values())
    else:
        names, descriptions = list(options), [None] * len(options)
    for name, description in zip(names, descriptions):
        _check_str(f"{kind}(): an option name", name)
        if description is not None:
            _check_str(f"{kind}(): the description of option {name!r}", description, empty_ok=True)
    return names, descriptions


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
    n = len(options)
    if kind == "any_of":  # one yes/no question per option, all in one read
        if not 1 <= n <= MAX_QUESTIONS:
            raise InvalidQuestionError(
                f"{where}: an any_of question takes 1 to {MAX_QUESTIONS} options (one "
                f"question each in one read), got {n}; split them across several questions"
            )
        return
    qtype = QUESTION_TYPES[kind]
    if n < qtype.min_options:
        raise InvalidQuestionError(
            f"{where}: a {kind} question needs at least {qtype.min_options} options, got {n}. "
            "A decision with one possible answer is not a decision; add the alternative "
            "(e.g. 'other')."
        )
    if n > qtype.max_options:
        what = "levels" if kind == "score" else "options"
        raise InvalidQuestionError(
            f"{where}: a {kind} question allows at most {qtype.max_options} {what}, got {n}. "
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
    """A ``Choice``/``Noul``/``Score`` (or one compiled with examples) from a question
    object or its wire dict."""
    if isinstance(question, Choice | Noul | Score | CompiledQuestion | AnyOf):
        return question
    if isinstance(question, Mapping):
        kind = question.get("type")
        if kind == AnyOf.type:
            unknown = sorted(set(question) - {"type", "instructions", "options"})
            if unknown:
                raise InvalidQuestionError(
                    f"question {qid!r}: an any_of question has instructions and options only; "
                    f"unknown fields {unknown}"
                )
            try:
                return any_of(question.get("instructions"), question.get("options"))
            except InvalidQuestionError as e:
                raise InvalidQuestionError(f"question {qid!r}: {e}") from None
        model = {"choice": Choice, "noul": Noul, "score": Score}.get(str(kind))
        if model is None:
            raise InvalidQuestionError(
                f"question {qid!r}: unknown type {kind!r}; use 'choice', 'noul', 'score' or "
                "'any_of'"
            )
        fields = {k: v for k, v in question.items() if k != "examples"}
        try:
            written = model.model_validate(fields)
        except ValidationError as e:  # one sentence per field, not pydantic's dump
            from agentbranch.core.question_errors import describe_question_error

            raise InvalidQuestionError(describe_question_error(qid, str(kind), e)) from None
        # "examples": null is no examples
        return _with_examples(written, qid, question.get("examples"))
    raise InvalidQuestionError(
        f"question {qid!r}: expected a Choice, Noul or Score (see agentbranch.choice/"
        f"yes_no/score), got {type(question).__name__}"
    )


def validate_questions(questions: Any) -> dict[str, Question]:
    """Questions keyed by id, checked: non-empty ids, at most ``MAX_QUESTIONS``."""
    if isinstance(questions, Choice | Noul | Score | CompiledQuestion | AnyOf):
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


def option_names(question: Question) -> list[str]:
    """A question's options in order: a choice's names, ``yes``/``no``, a score's levels."""
    written = as_compiled(question).question
    if isinstance(written, Noul):
        return ["yes", "no"]
    if isinstance(written, Choice):
        return [str(name) for name in written.criteria]
    return [_text(level) for level in written.criteria]


def to_spec(qid: str, question: Question) -> QuestionSpec:
    """The engine's view of one question, with its full option list and labels for the
    first options of its type's label set (the engine chunks choices above it), and
    what it carries (examples in option order, its learned head)."""
    if isinstance(question, AnyOf):
        raise InvalidQuestionError(
            f"question {qid!r} is an any_of question: its answer is a set, read as one "
            f"yes/no question per option ({', '.join(question.members(qid))}); ask it "
            "through a Policy (a decide node, a Resolver, the LangChain tool), or ask "
            f"its members with engine.decide(state, question.members({qid!r})). It "
            "cannot route a graph to one node."
        )
    compiled = as_compiled(question)
    written = compiled.question
    options = option_names(written)
    if isinstance(written, Noul):
        criteria = written.criteria
        written_descriptions = [criteria.true, criteria.false] if criteria else [None, None]
    elif isinstance(written, Choice):
        written_descriptions = list(written.criteria.values())
    else:
        written_descriptions = [None] * len(options)
    descriptions = [_text(d) or None for d in written_descriptions]
    kind = written.type
    where = f"question {qid!r}"
    instructions = _text(written.instructions)
    if not instructions.strip():
        raise InvalidQuestionError(f"{where}: the instructions must not be empty")
    _check_unicode(f"{where}: the instructions", instructions)
    _check_options(where, kind, options, descriptions)
    label_set = QUESTION_TYPES[kind].label_set
    # Above the label set the engine splits the question into chunks with their own
    # labels (engine/plan.py); the whole question carries none.
    labels = label_set[: len(options)] if len(options) <= len(label_set) else ()
    examples = compiled.examples or {}
    return QuestionSpec(
        id=qid,
        type=kind,
        instructions=instructions,
        options=tuple(options),
        descriptions=tuple(descriptions),
        labels=tuple(labels),
        examples=tuple(tuple(examples.get(o, ())) for o in options) if examples else (),
        head=compiled.head,
    )
