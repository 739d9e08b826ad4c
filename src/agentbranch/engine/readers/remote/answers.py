"""How a server's answers become ``LabelRead``s, validated as strictly as a local read.

``RemoteReader`` decodes each response with ``decode_json`` (a key repeated in one JSON
object is refused: which of the two values would count is a guess) and hands it to
``parse_answers`` (``/v1/systemone``) or ``parse_decisions_answers`` (``/v1/decisions``).

**Types.** The answer objects are read through strict pydantic models (``_Wire``): a
probability, ``confidence`` or ``label_mass`` is a JSON number (never a string, a bool
or a null), finite, in [0, 1] (up to ``ROUNDING`` outside is float rounding, clamped);
``argmax_is_label`` is a JSON boolean (the string ``"false"`` is an error, not true); a
score level on ``/v1/decisions`` is a JSON integer (``0.2``, ``1.9`` and ``true`` are
errors, not levels 0, 1, 1). A field that is present must be valid: a null is a faulty
server, not "unknown" (read as unknown it would give label mass 1, the most trusting
value). Fields the reader does not use (``type``, ``choice``, ``legend``, ...) are
ignored.

**Options.** One probability per option the question has: none missing, none extra,
none twice; a yes/no answer's ``noul`` agrees with its ``probabilities`` when both
are sent.

**Label mass.** The server's probabilities are usually renormalised over the labels
(they sum to 1, within ``NORMALISED``). When they sum to less, the numbers themselves
say the labels got only that share: their sum is the label mass they imply, and the
read's ``label_mass`` is never above it (nor above the mass the server reports, in its
diagnostics or through ``confidence = p_top × label_mass``). So ``{"yes": 0.001, "no":
0}`` reads "yes" with label mass 0.001, which a policy's ``min_label_mass`` floor sends
to its fallback, exactly as a local read with that mass. An answer whose probabilities
sum to at most ``NO_SIGNAL`` gave the labels nothing: it is an ``InvalidReadError``, not
a decision (``{"yes": 1e-300, "no": 0}`` would otherwise read "yes" at confidence 1).
Probabilities summing to more than 1 + ``NORMALISED`` are invalid.

Any of these is an ``InvalidReadError`` naming the question, the field and the value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
)

from agentbranch.engine.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.errors import InvalidReadError, ReaderError

__all__ = [
    "NORMALISED",
    "NO_SIGNAL",
    "ROUNDING",
    "decode_json",
    "label_read",
    "parse_answers",
    "parse_decisions_answers",
    "question_keys",
]

#: How far outside [0, 1] a server probability may sit from float rounding.
ROUNDING = 1e-6
#: Probabilities summing to within this of 1 are renormalised shares (rounded); a sum
#: lower than that is the label mass the numbers imply.
NORMALISED = 1e-3
#: Probabilities summing to no more than this gave the labels no probability: no signal.
NO_SIGNAL = 1e-6

_FAULTY = "the server or a proxy in between is faulty"


# ----------------------------------------------------------------------------- JSON


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"the key {key!r} appears twice in one object")
            seen.add(key)
    return out


def decode_json(content: bytes) -> Any:
    """The JSON value of a response body. Raises ``ValueError`` for anything that is not
    one JSON document (``DuplicateKeyError`` for a key repeated in one object) and
    ``RecursionError`` for nesting too deep to decode."""
    return json.loads(content, object_pairs_hook=_no_duplicates)


# ------------------------------------------------------------------------ wire models


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


#: A server probability: a finite JSON number in [0, 1], clamped within ``ROUNDING``.
Probability = Annotated[
    float,
    Field(strict=True, allow_inf_nan=False, ge=-ROUNDING, le=1 + ROUNDING),
    AfterValidator(_clamp),
]


class _Wire(BaseModel):
    """Strict: no coercion (``"0.5"``, ``true``, ``1.9`` for an int are errors); unknown
    fields ignored. A field given a default of ``None`` is optional, but its type is not:
    present, it must be valid (``null`` included)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class SystemOneAnswer(_Wire):
    """One answer of a ``/v1/systemone`` response (vLLM: ``{"type", "noul" | "choice" |
    "score", "probabilities", "confidence", ...}``)."""

    probabilities: dict[str, Probability] = Field(default=None)  # type: ignore[assignment]
    noul: Probability = Field(default=None)  # type: ignore[assignment]
    confidence: Probability = Field(default=None)  # type: ignore[assignment]


class SystemOneDiagnostics(_Wire):
    """One question's ``diagnostics`` entry."""

    label_mass: Probability = Field(default=None)  # type: ignore[assignment]
    argmax_is_label: StrictBool = True


def _scalar(value: Any) -> Any:
    # Exact JSON types: a bool is not an int here, and 1.0 is not level 1.
    if type(value) not in (str, bool, int):
        raise ValueError("not a string, a boolean or an integer")
    return value


class DecisionsEntry(_Wire):
    """One entry of a ``/v1/decisions`` answer's ``probabilities`` list: a choice value
    (a string, or a boolean for yes/no) or a score level (an integer)."""

    value: Annotated[Any, AfterValidator(_scalar)]
    probability: Probability


class DecisionsAnswer(_Wire):
    """One answer of a ``/v1/decisions`` response (vLLM 0.33's ``make_answer``)."""

    type: StrictStr = Field(default=None)  # type: ignore[assignment]
    name: StrictStr | None = None  # vLLM sends null for a question without a name
    probabilities: list[DecisionsEntry] = Field(default=None)  # type: ignore[assignment]
    probability: Probability = Field(default=None)  # type: ignore[assignment]
    confidence: Probability = Field(default=None)  # type: ignore[assignment]


def _short(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (a server may send anything)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _validated(model: type[_Wire], data: Any, key: str, what: str = "answer") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise InvalidReadError(
            f"the server's {what} for question {key!r} is invalid: "
            + "; ".join(_describe(error) for error in e.errors(include_url=False))
            + f". {_FAULTY}"
        ) from None


def _describe(error: Mapping[str, Any]) -> str:
    """``probability nan for option 'yes' (Input should be a finite number)``."""
    loc = list(error["loc"])
    where = ""
    if loc and loc[0] == "probabilities" and len(loc) >= 2:
        # a dict entry (systemone) or a list entry's field (decisions)
        where = f" for option {loc[1]!r}" if isinstance(loc[1], str) else f" of entry {loc[1]}"
        loc = ["probability"] if isinstance(loc[1], str) else loc[2:] or ["probabilities"]
    name = ".".join(str(part) for part in loc) or "answer"
    if error["type"] == "missing":
        return f"{name}{where} is missing"
    return f"the server answered {name} {_short(error['input'])}{where} ({error['msg']})"


# --------------------------------------------------------------------------- reads


def question_keys(questions: Sequence[QuestionSpec]) -> list[str]:
    """Wire ids for a request's question reads. The engine may read one question
    several times (option chunks, permutations); repeats get a ``~n`` suffix so every
    wire id is unique. The id is not part of the model's prompt."""
    ids = [q.id for q in questions]
    if len(set(ids)) == len(ids):  # the usual request: no repeats, no suffixes
        return ids
    seen: dict[str, int] = {}
    keys = []
    for q in questions:
        n = seen.get(q.id, 0)
        seen[q.id] = n + 1
        keys.append(q.id if n == 0 else f"{q.id}~{n}")
    taken = set()
    for i, key in enumerate(keys):  # a user id that itself ends in "~n"
        while key in taken:
            key += "~"
        taken.add(key)
        keys[i] = key
    return keys


def label_read(
    key: str,
    probs: Sequence[float],
    *,
    confidence: float | None = None,
    label_mass: float | None = None,
    argmax_is_label: bool = True,
    answer: Any = None,
) -> LabelRead:
    """The read of one answer: ``logprobs[i] = log(share_i × label_mass)``, the label's
    full-vocabulary log probability as a model reader reports it.

    ``probs`` are validated probabilities in [0, 1], one per option. Their sum must be
    above ``NO_SIGNAL`` and at most 1 + ``NORMALISED``; below 1 − ``NORMALISED`` it is the
    label mass the numbers imply, and the shares are the probabilities renormalised.
    ``label_mass`` is the least of the implied mass, the server's ``label_mass`` and
    ``confidence / top share`` (vLLM's confidence is ``p_top × label_mass``); 1 when
    nothing says less."""
    total = math.fsum(probs)
    if total > 1 + NORMALISED:
        raise InvalidReadError(
            f"the server's probabilities for question {key!r}, {list(probs)}, sum to "
            f"{total:.4f}, more than 1; {_FAULTY}"
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
                f"mass, at most p_top); {_FAULTY}"
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
    """One probability per option of ``expected``, in that order."""
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
                    f"its probabilities say P(yes) = {out[0] / total:.4g}; {_FAULTY}"
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


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidReadError(
            f"the server's {what} is {type(value).__name__}, not an object; {_FAULTY}"
        )
    return value


def parse_answers(request: ReadRequest, response: Mapping[str, Any]) -> list[LabelRead]:
    """The ``LabelRead`` of each question read, from a ``/v1/systemone`` response."""
    answers = response.get("answers")
    if not isinstance(answers, Mapping):
        raise ReaderError(
            "the /v1/systemone response has no 'answers' object; is the URL a System One "
            f"endpoint? Got keys {sorted(response)}"
        )
    diagnostics = (
        _object(response["diagnostics"], "'diagnostics'") if "diagnostics" in response else {}
    )
    reads = []
    for key, q in zip(question_keys(request.questions), request.questions):
        raw = answers.get(key)
        if not isinstance(raw, Mapping):
            raise InvalidReadError(f"the server returned no answer for question {key!r}")
        answer = _validated(SystemOneAnswer, raw, key)
        diag = (
            _validated(SystemOneDiagnostics, diagnostics[key], key, "diagnostics")
            if key in diagnostics
            else None
        )
        reads.append(
            label_read(
                key,
                _systemone_probabilities(key, q, answer),
                confidence=answer.confidence,
                label_mass=diag.label_mass if diag is not None else None,
                argmax_is_label=diag.argmax_is_label if diag is not None else True,
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
                f"{_FAULTY}"
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
    answers = response.get("answers")
    if not isinstance(answers, list):
        raise ReaderError(
            "the /v1/decisions response has no 'answers' list; is the URL a vLLM "
            f"Decisions endpoint? Got keys {sorted(response)}"
        )
    keys = question_keys(request.questions)
    if len(answers) != len(keys):
        raise InvalidReadError(
            f"the server returned {len(answers)} answers for {len(keys)} questions"
        )
    reads = []
    for key, q, raw in zip(keys, request.questions, answers):
        if not isinstance(raw, Mapping) or raw.get("name") not in (None, key):
            raise InvalidReadError(f"the server's answer for question {key!r} is {_short(raw)}")
        answer = _validated(DecisionsAnswer, raw, key)
        reads.append(
            label_read(
                key,
                _decision_probabilities(key, q, answer),
                confidence=answer.confidence,
                answer=dict(raw),
            )
        )
    return reads
