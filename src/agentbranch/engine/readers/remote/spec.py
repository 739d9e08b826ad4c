"""The published System One spec's dialect (``RemoteReader(dialect="spec")``, the spec
jevcompat 0.1 tests against): its request body, and its answers read as the server's own
distribution with the label mass unknown (``None``, never guessed). How it differs from
vLLM's: docs/vllm.md, "Servers that speak the published System One spec".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from agentbranch.core.errors import ConfigurationError, InvalidReadError
from agentbranch.core.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.engine.readers.remote.answers import FAULTY, SpecAnswer, short, validated
from agentbranch.engine.readers.remote.parse import answered, answers_of
from agentbranch.engine.readers.remote.wire import question_keys, systemone_questions

__all__ = ["SPEC_MAX_OPTIONS", "build_spec_payload", "parse_spec_answers"]

#: The spec's limit (MUST): a choice of up to 255 options is answered in one read.
SPEC_MAX_OPTIONS = 255


def build_spec_payload(
    request: ReadRequest, *, model: str | None = None, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The spec's ``/v1/systemone`` body for one ``ReadRequest``::

        {"model", "state", "questions": {id: {"type", "instructions", "criteria"}}}

    The request's instructions go first in every question's, then a blank line: the
    spec's request has no field of its own for them."""
    if not model:
        raise ConfigurationError(
            "a System One spec request names its model; pass model=... (or set "
            "AGENTBRANCH_REMOTE_MODEL)"
        )
    questions = systemone_questions(request, request.instructions)
    return {"model": model, "state": request.state, "questions": questions, **(extra or {})}


def _rounding(values: Sequence[float]) -> float:
    """Half a unit of the coarsest rounding (2 to 6 decimals) every value is exact at,
    0 for unrounded values: the spec's tolerance for numbers a server rounded."""
    for d in range(2, 7):
        if all(abs(v - round(v, d)) < 1e-7 for v in values):
            return 0.5 / 10**d
    return 0.0


def _distribution(key: str, probs: Mapping[str, float], expected: Sequence[str]) -> list[float]:
    """One probability per option of ``expected``, in that order, summing to 1 within
    the spec's tolerance."""
    if probs.keys() != set(expected):
        missing = [k for k in expected if k not in probs]
        extra = sorted(set(probs) - set(expected))
        raise InvalidReadError(
            f"the server's answer to question {key!r} gives probabilities for "
            f"{short(sorted(probs))}, the question has {short(list(expected))} (missing "
            f"{short(missing)}, not asked {short(extra)}); {FAULTY}"
        )
    values = [probs[k] for k in expected]
    total = math.fsum(values)
    if abs(total - 1.0) > 0.05:  # the spec's EPS_SUM, for rounding
        raise InvalidReadError(
            f"the server's probabilities for question {key!r} sum to {total:.4f}, not 1; "
            f"the spec's answers are distributions. {FAULTY}"
        )
    return values


def _probabilities(key: str, q: QuestionSpec, answer: SpecAnswer) -> list[float]:
    if q.type == "noul":
        if answer.noul is None:
            raise InvalidReadError(f"the server's answer to question {key!r} lacks 'noul'")
        return [answer.noul, 1.0 - answer.noul]
    if answer.probabilities is None:
        raise InvalidReadError(f"the server's answer to question {key!r} lacks its 'probabilities'")
    if q.type == "choice":
        values = _distribution(key, answer.probabilities, q.options)
        if answer.choice is not None:
            top = max(values)
            if answer.choice not in q.options or (
                top - answer.probabilities[answer.choice] > 0.005  # the spec's tolerance
            ):
                raise InvalidReadError(
                    f"the server's answer to question {key!r} says choice "
                    f"{short(answer.choice)}, but its probabilities put {top!r} on "
                    f"{q.options[values.index(top)]!r}; {FAULTY}"
                )
        return values
    levels = [str(i) for i in range(len(q.options))]
    values = _distribution(key, answer.probabilities, levels)
    if answer.legend is not None and (
        set(answer.legend) != set(levels)
        or any(
            isinstance(answer.legend[k], str) and answer.legend[k] != level
            for k, level in zip(levels, q.options)
        )
    ):
        raise InvalidReadError(
            f"the server's answer to question {key!r} has the legend "
            f"{short(answer.legend)}, not the levels asked {short(dict(zip(levels, q.options)))}"
            f"; {FAULTY}"
        )
    if answer.score is not None:
        n = len(values)
        expected = math.fsum(i * p for i, p in enumerate(values))
        tolerance = 0.02 + _rounding(values) * (1 + n * (n - 1) / 2)
        if abs(answer.score - expected) > tolerance:
            raise InvalidReadError(
                f"the server's answer to question {key!r} says score {answer.score!r}, "
                f"but its probabilities give {expected:.4f} (the spec's score is their "
                f"expectation); {FAULTY}"
            )
    return values


def parse_spec_answers(request: ReadRequest, response: Mapping[str, Any]) -> list[LabelRead]:
    """The ``LabelRead`` of each question read, from a spec server's response: the
    server's probabilities as they are (``logprobs = log p``), label mass unknown."""
    answers = answers_of(response, "/v1/systemone")
    keys = question_keys(request.questions)
    unasked = sorted(set(answers) - set(keys))
    if unasked:
        raise InvalidReadError(
            f"the server answered questions nobody asked: {short(unasked)}; {FAULTY}"
        )
    reads = []
    for key, q in zip(keys, request.questions):
        raw = answered(answers, key)
        answer = validated(SpecAnswer, raw, key)
        if answer.type is not None and answer.type != q.type:
            raise InvalidReadError(
                f"the server answered question {key!r} as a {short(answer.type)} question; "
                f"it is a {q.type!r} question. {FAULTY}"
            )
        probs = _probabilities(key, q, answer)
        reads.append(
            LabelRead(
                logprobs=tuple(math.log(p) if p > 0 else -math.inf for p in probs),
                label_mass=None,  # the spec's answers do not say: unknown, not guessed
                extras={"answer": dict(raw)},
            )
        )
    return reads
