"""The server's answers as strict pydantic models (nothing coerced); ``validated`` turns
a broken one into an ``InvalidReadError`` naming the question, the field and the value."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
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

from agentbranch.core.errors import InvalidReadError
from agentbranch.core.files import short_repr

__all__ = [
    "FAULTY",
    "ROUNDING",
    "DecisionsAnswer",
    "Probability",
    "SpecAnswer",
    "SystemOneAnswer",
    "SystemOneDiagnostics",
    "short",
    "validated",
]

#: How far outside [0, 1] a server probability may sit from float rounding.
ROUNDING = 1e-6

#: Said in the messages about answers no valid server sends.
FAULTY = "the server or a proxy in between is faulty"


#: A server probability: a finite JSON number in [0, 1], clamped within ``ROUNDING``.
Probability = Annotated[
    float,
    Field(strict=True, allow_inf_nan=False, ge=-ROUNDING, le=1 + ROUNDING),
    AfterValidator(lambda value: min(1.0, max(0.0, value))),
]


class _Wire(BaseModel):
    """Strict: no coercion (``"0.5"``, ``true``, ``1.9`` for an int are errors); unknown
    fields ignored. A field given a default of ``None`` is optional, but its type is not:
    present, it must be valid. A ``null`` is a faulty server, not "unknown" (read as
    unknown it would give label mass 1, the most trusting value)."""

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


#: A finite JSON number (a spec score: the expectation of the levels, not a probability).
_Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class SpecAnswer(_Wire):
    """One answer of a server that speaks the published System One spec (§4);
    ``confidence`` is the spec's (§4.5), not vLLM's: only its range is read."""

    type: StrictStr = Field(default=None)  # type: ignore[assignment]
    noul: Probability = Field(default=None)  # type: ignore[assignment]
    choice: StrictStr = Field(default=None)  # type: ignore[assignment]
    score: _Finite = Field(default=None)  # type: ignore[assignment]
    legend: dict[str, Any] = Field(default=None)  # type: ignore[assignment]
    probabilities: dict[str, Probability] = Field(default=None)  # type: ignore[assignment]
    confidence: Probability = Field(default=None)  # type: ignore[assignment]


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


#: ``repr(value)``, cut to 200 characters (a server may send anything).
short = partial(short_repr, limit=200)


def validated(model: type[_Wire], data: Any, key: str, what: str = "answer") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise InvalidReadError(
            f"the server's {what} for question {key!r} is invalid: "
            + "; ".join(_describe(error) for error in e.errors(include_url=False))
            + f". {FAULTY}"
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
    return f"the server answered {name} {short(error['input'])}{where} ({error['msg']})"
