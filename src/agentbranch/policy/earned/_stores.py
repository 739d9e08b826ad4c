"""Where evidence is kept: the interface every store offers and what they share.

``EvidenceStore`` is three calls: ``append(records)``, ``load(key) -> list[Evidence]``
(every record of one evidence key, in replay order) and ``keys()``. The stores
(``_jsonl_store``: a JSON Lines file; ``_langgraph_store``: a LangGraph ``BaseStore``)
also offer ``read_new()`` (what was written since the last call, by any process) and
``pop_lost()`` (the store was moved or deleted while serving); a store without them is
re-read whole. Writes are append-only; a store holding something that is not evidence
is an ``InvalidFileError`` naming where, never a silent reset.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from agentbranch.core.errors import InvalidFileError
from agentbranch.policy.earned._evidence import Evidence, check_time, newer_schema

__all__ = ["EvidenceStore", "StoreLost", "parse_record", "present"]

log = logging.getLogger("agentbranch")


@runtime_checkable
class EvidenceStore(Protocol):
    """What ``Earned(store=...)`` needs from a store."""

    def append(self, records: Sequence[Evidence]) -> None:
        """Add records (append-only; each record's ``id`` is unique)."""

    def load(self, key: str) -> list[Evidence]:
        """Every record of evidence key ``key``, in replay order (time, id)."""

    def keys(self) -> list[str]:
        """Every evidence key the store holds records of."""


def parse_record(raw: Any, where: str) -> Evidence | None:
    """The record, or ``None`` for a record dated in the future (skipped, WARNING)."""
    newer = newer_schema(raw)
    if newer is not None:
        raise InvalidFileError(f"{where} was {newer}; nothing was reset")
    try:
        rec = Evidence.model_validate(raw, context={"stored": True})
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or "record"
        raise InvalidFileError(
            f"{where} is not an agentbranch evidence record ({field}: {first.get('msg')}); "
            "the store holds something else or was edited. Point Earned(store=...) at a "
            "file or store of its own; nothing was reset"
        ) from None
    try:
        check_time(rec.time)
    except ValueError as e:
        # A writer whose clock runs fast (or an edited line): the record is not counted
        # (failing closed: less evidence), and serving goes on for every other record.
        log.warning("agentbranch.earned: %s skipped: %s", where, e)
        return None
    return rec


def present(records: Iterable[Evidence | None]) -> list[Evidence]:
    return [r for r in records if r is not None]


class StoreLost(Exception):  # noqa: N818 - reported by the store, handled by Earned
    """The store being read was moved, deleted, truncated or replaced while serving."""
