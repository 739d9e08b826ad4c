"""One exception hierarchy for agentbranch, and the checks of numbers that settings and
file formats in several layers share (each returns the value it was given or raises one
error saying what was wrong and what is allowed). Engine failures are errors, never
low-confidence answers, unless the caller chose fail-open/fail-closed.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "AgentBranchError",
    "ConfigurationError",
    "FallbackError",
    "InvalidFileError",
    "InvalidQuestionError",
    "InvalidReadError",
    "InvalidStateError",
    "LabelTokenError",
    "ReaderError",
    "ReaderTimeoutError",
    "SpecialTokenError",
    "StateTooLongError",
    "finite",
    "surrogate_at",
    "temperature",
    "timeout_seconds",
    "unit",
]


class AgentBranchError(Exception):
    """Base class of every error agentbranch raises on purpose."""


class InvalidQuestionError(AgentBranchError, ValueError):
    """A question is malformed: empty, duplicate or too many options, bad id or type."""


class LabelTokenError(AgentBranchError, ValueError):
    """A label is not one distinct token at the reply position for this tokenizer."""


class InvalidStateError(AgentBranchError, ValueError):
    """The state cannot be rendered for the model."""


class StateTooLongError(InvalidStateError):
    """The rendered prompt plus the answer canvas exceeds the model's context."""


class SpecialTokenError(InvalidStateError):
    """User content (state or question text) contains the model's special tokens."""


class ReaderError(AgentBranchError, RuntimeError):
    """A reader failed: the model, the engine or the server returned no usable read."""


class InvalidReadError(ReaderError):
    """A reader answered, but not with a valid read: a NaN, infinite or positive
    log-probability, a probability outside [0, 1], or the wrong number of options or
    questions. The decision it answers is not made (``on_error`` applies to it)."""


class ReaderTimeoutError(ReaderError, TimeoutError):
    """A reader did not answer within the configured timeout."""


class ConfigurationError(AgentBranchError, ValueError):
    """The engine, reader or integration was configured inconsistently."""


class InvalidFileError(ConfigurationError):
    """A file agentbranch loads (a calibration) is missing, unreadable, of another
    format version, or malformed; the message names the file and, where it can, the line
    and field."""


class FallbackError(AgentBranchError, RuntimeError):
    """An uncertain decision could not be resolved: the fallback model's answer named no
    allowed option, a reviewer's answer was invalid, or every fallback failed."""


def surrogate_at(text: str) -> int:
    """Index of the first unpaired surrogate in ``text`` (not valid Unicode), else -1."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return -1


def finite(x: float) -> float:
    """A field check (pydantic ``AfterValidator``): ``x`` is a finite number."""
    if not math.isfinite(x):
        raise ValueError(f"must be a finite number, got {x!r}")
    return x


def unit(x: float) -> float:
    """A field check: ``x`` is a number in [0, 1] (a confidence, a probability)."""
    if not (math.isfinite(x) and 0.0 <= x <= 1.0):
        raise ValueError(f"must be a number in [0, 1], got {x!r}")
    return x


def temperature(x: float) -> float:
    """A field check: ``x`` is a calibration temperature, finite and > 0."""
    # 1/T must be finite too: a subnormal T (1e-320) is "positive" but meaningless.
    if not (math.isfinite(x) and x > 0 and math.isfinite(1.0 / x)):
        raise ValueError(f"must be a temperature: a finite number > 0, got {x!r}")
    return x


def timeout_seconds(value: Any, setting: str) -> float | None:
    """``value`` of the timeout ``setting`` (named in the error, e.g.
    ``"Audit(timeout=...)"``) as seconds: a finite number > 0, or ``None`` for none."""
    if value is None:
        return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value <= 0:
        raise ConfigurationError(
            f"{setting} must be a number of seconds > 0 (or None to wait for ever), got {value!r}"
        )
    return float(value)
