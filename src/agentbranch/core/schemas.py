"""The record schemas agentbranch writes, by name and version, and the one message for a
record a newer release wrote (``newer_release``): every reader of a store (``Earned``,
``agentbranch audit report``, the audit loader) says the same thing, "upgrade", never
"invalid" or "can be deleted"."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["EVIDENCE_SCHEMA", "EVIDENCE_VERSION", "is_evidence_schema", "newer_release"]

#: An evidence record's ``schema`` (``Earned(store=...)``), and its version number.
EVIDENCE_SCHEMA = "agentbranch.earned/1"
EVIDENCE_VERSION = 1

_EARNED = re.compile(r"agentbranch\.earned/(\d+)")


def is_evidence_schema(value: Any) -> bool:
    """Whether ``value`` names an evidence schema, of this release or another."""
    return isinstance(value, str) and _EARNED.fullmatch(value) is not None


def newer_release(raw: Any) -> str | None:
    """Why ``raw`` (a stored record) cannot be read when a newer release of agentbranch
    wrote it (its ``schema`` names a later version), else ``None``."""
    schema = raw.get("schema") if isinstance(raw, dict) else None
    found = _EARNED.fullmatch(schema) if isinstance(schema, str) else None
    if found is None or int(found.group(1)) <= EVIDENCE_VERSION:
        return None
    return (
        f"written by a newer release of agentbranch (schema {schema}; this release reads "
        f"{EVIDENCE_SCHEMA}); upgrade agentbranch to read this store"
    )
