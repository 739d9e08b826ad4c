"""The request bodies ``RemoteReader`` posts to vLLM: one JSON body per ``ReadRequest``
(how our questions map onto the server's: docs/vllm.md, "Remote")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.examples import instructions_with_examples
from agentbranch.core.reads import QuestionSpec, ReadRequest

__all__ = [
    "DEFAULT_MAX_OPTIONS",
    "build_decisions_payload",
    "build_payload",
    "criteria",
    "question_keys",
    "systemone_questions",
]

#: vLLM labels a choice's options A..Z, so one read takes at most 26 options.
DEFAULT_MAX_OPTIONS = 26


def question_keys(questions: Sequence[QuestionSpec]) -> list[str]:
    """Wire ids for a request's question reads. The engine may read one question
    several times (option chunks, permutations); repeats get a ``~n`` suffix so every
    wire id is unique. The id is not part of the model's prompt."""
    seen: dict[str, int] = {}
    taken: set[str] = set()
    keys = []
    for q in questions:
        n = seen[q.id] = seen.get(q.id, 0) + 1
        key = q.id if n == 1 else f"{q.id}~{n - 1}"
        while key in taken:  # a user id that itself ends in "~n"
            key += "~"
        taken.add(key)
        keys.append(key)
    return keys


def criteria(q: QuestionSpec) -> Any:
    """The System One ``criteria`` of a question read."""
    if q.type == "noul":
        sides = {
            key: desc for key, desc in zip(("true", "false"), q.descriptions) if desc is not None
        }
        return sides or None
    if q.type == "choice":
        return dict(zip(q.options, q.descriptions))
    if q.type == "score":
        return list(q.options)
    raise ConfigurationError(
        f"question {q.id!r} has type {q.type!r}; a /v1/systemone server answers choice, "
        "noul and score questions"
    )


def systemone_questions(request: ReadRequest, lead: str | None = None) -> dict[str, Any]:
    """The ``questions`` object of a ``/v1/systemone`` body; ``lead`` goes first in every
    question's instructions, then a blank line."""
    questions: dict[str, Any] = {}
    for key, q in zip(question_keys(request.questions), request.questions):
        # Examples (if any) go as few-shot lines, as canvas reads.
        text = instructions_with_examples(q.instructions, q.options, q.examples)
        if lead:
            text = f"{lead}\n\n{text}" if text else lead
        spec: dict[str, Any] = {"type": q.type, "instructions": text}
        given = criteria(q)
        if given is not None:
            spec["criteria"] = given
        questions[key] = spec
    return questions


def build_payload(
    request: ReadRequest, *, model: str | None = None, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``/v1/systemone`` JSON body for one ``ReadRequest`` (vLLM ≥ 0.32)::

        {"model", "state", "instructions", "questions": {id: {"type", "instructions", "criteria"}}}

    ``draws`` and ``joint`` are never sent."""
    body: dict[str, Any] = {"state": request.state, "questions": systemone_questions(request)}
    if model:
        body["model"] = model
    if request.instructions:
        body["instructions"] = request.instructions
    return {**body, **(extra or {})}


def _decision_question(key: str, q: QuestionSpec) -> dict[str, Any]:
    """One question of a ``/v1/decisions`` request (vLLM 0.33's ``DecisionQuestion``)."""
    if q.type == "noul":
        # vLLM reads a predicate as the choice [false, true]; as that choice it keeps
        # the descriptions and its answer carries a confidence (the label mass).
        yes, no = q.descriptions
        values: list[tuple[Any, str | None]] = [(False, no), (True, yes)]
        field, key_name = "choices", "value"
    elif q.type == "choice":
        values = list(zip(q.options, q.descriptions))
        field, key_name = "choices", "value"
    elif q.type == "score":
        values = list(zip(q.options, q.descriptions))
        field, key_name = "levels", "label"
    else:
        raise ConfigurationError(
            f"question {q.id!r} has type {q.type!r}; a /v1/decisions server answers "
            "choice, noul and score questions"
        )
    items = [{key_name: v, **({"description": d} if d else {})} for v, d in values]
    kind = "score" if q.type == "score" else "choice"
    text = instructions_with_examples(q.instructions, q.options, q.examples)
    return {"type": kind, "name": key, "instructions": text, field: items}


def build_decisions_payload(
    request: ReadRequest, *, model: str | None = None, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``/v1/decisions`` JSON body for one ``ReadRequest`` (vLLM 0.33)::

        {"model", "input", "questions": [{"type": "choice"|"score", "name", "instructions",
         "choices": [{"value", "description"}] | "levels": [{"label", "description"}]}],
         "joint"}

    A score's options go out as ``levels``, a yes/no as the choice ``false``/``true``;
    the request's instructions go first in ``input``, as a user message before the
    state (the API has no instructions field)."""
    if not model:
        raise ConfigurationError("a /v1/decisions request names its model; pass model=...")
    if request.instructions:
        # No system field: the instructions go first in the user turn.
        input_: Any = [
            {"role": "user", "content": request.instructions},
            {"role": "user", "content": request.state},
        ]
    else:
        input_ = request.state
    body: dict[str, Any] = {
        "model": model,
        "input": input_,
        "questions": [
            _decision_question(key, q)
            for key, q in zip(question_keys(request.questions), request.questions)
        ],
    }
    if request.joint:
        body["joint"] = True
    return {**body, **(extra or {})}
