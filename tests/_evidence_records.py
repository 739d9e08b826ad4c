"""Evidence records for the tests of earned trust, its stores and reports: ``evidence()``
is a valid record (``new_evidence``) of a yes/no question whose fallback agreed with the
engine's "yes" at confidence 0.9; a test names only the fields it is about."""

from __future__ import annotations

from typing import Any

from agentbranch.policy.earned._evidence import Evidence, new_evidence

DEFAULTS: dict[str, Any] = dict(
    key="k" * 32,
    question_id="urgent",
    source="fallback",
    band="fallback",
    confidence=0.9,
    options=["yes", "no"],
    engine_label="yes",
    teacher_label="yes",
    rate=1.0,
)


def evidence(**over: Any) -> Evidence:
    """A fresh evidence record: ``DEFAULTS`` with ``over`` in their place (and any other
    field of ``Evidence``); ``id`` and ``time`` are filled in unless given."""
    return new_evidence(**(DEFAULTS | over))
