"""Checks of numbers that settings and file formats in several layers share: each
returns the value it was given (a timeout as a float) or raises one error saying what
was wrong and what is allowed."""

from __future__ import annotations

import math
from typing import Any

from agentbranch.core.errors import ConfigurationError

__all__ = ["finite", "temperature", "timeout_seconds", "unit"]


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
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(
            f"{setting} must be a number of seconds > 0 (or None to wait for ever), "
            f"got {value!r}"
        )
    return float(value)
