"""Hostile inputs for the property, validation and remote-reader tests: hypothesis
settings for a fuzz of many examples, a state nested deeper than any limit, and JSON
as a broken server writes it (NaN and Infinity literals, repeated keys)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, settings


def fuzz_settings(max_examples: int) -> Any:
    """Hypothesis settings for a fuzz of ``max_examples`` examples: no deadline, no
    example database, slow or large generated data allowed."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def deep(n: int) -> list:
    """A list nested ``n`` levels deep."""
    state: list = []
    for _ in range(n):
        state = [state]
    return state


class Pairs(list):
    """A JSON object written from (key, value) pairs: keys may repeat."""


def dump(value: Any) -> str:
    """JSON text (NaN/Infinity literals, as a broken server writes them); a ``Pairs``
    object may repeat a key."""
    if isinstance(value, dict | Pairs):
        items = value.items() if isinstance(value, dict) else value
        return "{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump(v) for v in value) + "]"
    return json.dumps(value)
