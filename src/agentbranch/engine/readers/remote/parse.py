"""How vLLM's answers (``/v1/systemone``, ``/v1/decisions``) become ``LabelRead``s,
validated as strictly as a local read: a broken rule is an ``InvalidReadError`` naming
the question, the field and the value (the rules: docs/vllm.md, "Remote")."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from agentbranch.core.errors import InvalidReadError, ReaderError
from agentbranch.core.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.engine.readers.remote.answers import (
    FAULTY,
    ROUNDING,
    DecisionsAnswer,
    SystemOneAnswer,
    SystemOneDiagnostics,
    short,
    validated,
)
from agentbranch.engine.readers.remote.wire import question_keys

__all__ = [
    "answered",
    "answers_of",
    "label_read",
    "parse_answers",
    "parse_decisions_answers",
]

#: Probabilities summing to within this of 1 are renormalised shares (rounded); a sum
#: lower than that is the label mass the numbers imply.
NORMALISED = 1e-3
#: Probabilities summing to no more than this gave the labels no probability: no signal.
NO_SIGNAL = 1e-6


def label_read(
    key: str,
    probs: Sequence[float],
    *,
    confidence: float | None = None,
    label_mass: float | None = None,
    argmax_is_label: bool = True,
    answer: Any = None,
) -> LabelRead:
    """The read of one answer (``probs``: validated, one per option):
    ``logprobs[i] = log(share_i × label_mass)``, as a model reader reports it. A sum of
    ``probs`` at most ``NO_SIGNAL`` or above 1 + ``NORMALISED`` is invalid; below
    1 − ``NORMALISED`` it is the label mass they imply. ``label_mass`` is the least of
    that, the server's ``label_mass`` and ``confidence / top share``; 1 when nothing says
    less."""
    total = math.fsum(probs)
    if total > 1 + NORMALISED:
        raise InvalidReadError(
            f"the server's probabilities for question {key!r}, {list(probs)}, sum to "
            f"{total:.4f}, more than 1; {FAULTY}"
        )
    if total <= NO_SIGNAL:
        raise InvalidReadError(
            f"the server's probabilities for question {key!r}, {list(probs)}, sum to "
            f"{total:.3g}: the labels got no probability, so the answer carries no signal "
            "and no decision is made (the model looked elsewhere, or the server is faulty)"
        )
    if total >= 1 - NORMALISED:
        implied, shares = 1.0, list(probs)
    else:  # unnormalised: the numbers are the labels' full-vocabulary probabilities
        implied, shares = total, [p / total for p in probs]
    mass = implied if label_mass is None else min(implied, label_mass)
    if confidence is not None:
        implied_by_confidence = confidence / max(shares)
        if implied_by_confidence > 1 + ROUNDING:
            raise InvalidReadError(
                f"the server's confidence {confidence!r} for question {key!r} is above its "
                f"top probability {max(shares)!r} (vLLM's confidence is p_top × label "
                f"mass, at most p_top); {FAULTY}. A server that speaks the published "
                "System One spec defines confidence otherwise: read it with "
                "RemoteReader(..., dialect='spec')"
            )
        if label_mass is None:  # the diagnostics' own mass wins over this estimate
            mass = min(mass, implied_by_confidence)
    # log p + log mass, not log(p × mass): two tiny factors underflow to 0 in a product.
    log_scale = math.log(mass) if mass > 0 else 0.0
    return LabelRead(
        logprobs=tuple([math.log(p) + log_scale if p > 0 else -math.inf for p in shares]),
        label_mass=mass,
        argmax_is_label=argmax_is_label,
        extras={"answer": answer},
    )


def _per_option(key: str, probs: Mapping[str, float], expected: Sequence[str]) -> list[float]:
    """One probability per option of ``expected``, in that order: none missing, none
    extra."""
    if probs.keys() != set(expected):
        extra = sorted(set(probs) - set(expected))
        missing = [k for k in expected if k not in probs]
        raise InvalidReadError(
            f"the server's answer to question {key!r} lacks the label probabilities of {missing}"
            if not extra
            else f"the server answered probabilities for options question {key!r} does not "
            f"have: {extra} (expected {list(expected)})"
        )
    return [probs[k] for k in expected]


def _systemone_probabilities(key: str, q: QuestionSpec, answer: SystemOneAnswer) -> list[float]:
    probs = answer.probabilities
    if q.type == "noul":
        if probs is not None and {"yes", "no"} <= probs.keys():
            out = _per_option(key, probs, ("yes", "no"))
            total = out[0] + out[1]
            if answer.noul is not None and total > 0 and abs(answer.noul - out[0] / total) > 1e-3:
                raise InvalidReadError(
                    f"the server's answer to question {key!r} says noul {answer.noul!r} but "
                    f"its probabilities say P(yes) = {out[0] / total:.4g}; {FAULTY}"
                )
            return out
        if answer.noul is None:
            raise InvalidReadError(
                f"the server's answer to question {key!r} lacks the label probabilities "
                "(neither 'noul' nor 'probabilities' with 'yes' and 'no')"
            )
        return [answer.noul, 1.0 - answer.noul]
    if probs is None:
        raise InvalidReadError(
            f"the server's answer to question {key!r} lacks the label probabilities "
            "('probabilities')"
        )
    if q.type == "score":
        return _per_option(key, probs, [str(i) for i in range(len(q.options))])
    return _per_option(key, probs, q.options)


def answers_of(response: Mapping[str, Any], api: str) -> Any:
    """The response's ``answers``: an object (``/v1/systemone``) or a list
    (``/v1/decisions``); a ``ReaderError`` when it has none (not that endpoint)."""
    answers = response.get("answers")
    if api == "/v1/systemone" and not isinstance(answers, Mapping):
        what, endpoint = "object", "System One"
    elif api == "/v1/decisions" and not isinstance(answers, list):
        what, endpoint = "list", "vLLM Decisions"
    else:
        return answers
    raise ReaderError(
        f"the {api} response has no 'answers' {what}; is the URL a {endpoint} endpoint? "
        f"Got keys {sorted(response)}"
    )


def answered(answers: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The ``/v1/systemone`` answer to question ``key``, which must be an object."""
    raw = answers.get(key)
    if not isinstance(raw, Mapping):
        raise InvalidReadError(f"the server returned no answer for question {key!r}")
    return raw


def parse_answers(request: ReadRequest, response: Mapping[str, Any]) -> list[LabelRead]:
    """The ``LabelRead`` of each question read, from a ``/v1/systemone`` response."""
    answers = answers_of(response, "/v1/systemone")
    diagnostics = response.get("diagnostics", {})
    if not isinstance(diagnostics, Mapping):
        raise InvalidReadError(
            f"the server's 'diagnostics' is {type(diagnostics).__name__}, not an object; {FAULTY}"
        )
    reads = []
    for key, q in zip(question_keys(request.questions), request.questions):
        raw = answered(answers, key)
        answer = validated(SystemOneAnswer, raw, key)
        # None given: the defaults (label mass unknown, the argmax a label).
        diag = validated(SystemOneDiagnostics, diagnostics.get(key, {}), key, "diagnostics")
        reads.append(
            label_read(
                key,
                _systemone_probabilities(key, q, answer),
                confidence=answer.confidence,
                label_mass=diag.label_mass,
                argmax_is_label=diag.argmax_is_label,
                answer=dict(raw),
            )
        )
    return reads


def _decision_probabilities(key: str, q: QuestionSpec, answer: DecisionsAnswer) -> list[float]:
    if answer.type == "predicate":
        if answer.probability is None:
            raise InvalidReadError(
                f"the server's predicate answer to question {key!r} lacks its 'probability'"
            )
        return [answer.probability, 1.0 - answer.probability]
    if answer.probabilities is None:
        raise InvalidReadError(
            f"the server's answer to question {key!r} lacks the label probabilities "
            "('probabilities')"
        )
    # The values each option is answered under, typed: True is not 1, "1" is not 1.
    wanted: list[Any]
    if q.type == "noul":
        wanted = [True, False]
    elif q.type == "score":
        wanted = list(range(len(q.options)))
    else:
        wanted = list(q.options)
    by_value: dict[tuple[type, Any], float] = {}
    for entry in answer.probabilities:
        typed = (type(entry.value), entry.value)
        if typed in by_value:
            raise InvalidReadError(
                f"the server's answer to question {key!r} gives value {entry.value!r} twice; "
                f"{FAULTY}"
            )
        by_value[typed] = entry.probability
    want = {(type(v), v) for v in wanted}
    if by_value.keys() != want:
        got = sorted((repr(v) for _, v in by_value), key=str)
        raise InvalidReadError(
            f"the server's answer to question {key!r} lacks the label probabilities: it "
            f"answers the values {got}, the question has {[v for v in wanted]}"
        )
    return [by_value[(type(v), v)] for v in wanted]


def parse_decisions_answers(request: ReadRequest, response: Mapping[str, Any]) -> list[LabelRead]:
    """The ``LabelRead`` of each question read, from a ``/v1/decisions`` response
    (answers in question order)."""
    answers = answers_of(response, "/v1/decisions")
    keys = question_keys(request.questions)
    if len(answers) != len(keys):
        raise InvalidReadError(
            f"the server returned {len(answers)} answers for {len(keys)} questions"
        )
    reads = []
    for key, q, raw in zip(keys, request.questions, answers):
        if not isinstance(raw, Mapping) or raw.get("name") not in (None, key):
            raise InvalidReadError(f"the server's answer for question {key!r} is {short(raw)}")
        answer = validated(DecisionsAnswer, raw, key)
        reads.append(
            label_read(
                key,
                _decision_probabilities(key, q, answer),
                confidence=answer.confidence,
                answer=dict(raw),
            )
        )
    return reads
