"""What ``Earned(store=...)`` was given, as an ``EvidenceStore`` (``as_store``)."""

from __future__ import annotations

import os
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.policy.earned._jsonl_store import JsonlEvidenceStore
from agentbranch.policy.earned._langgraph_store import LangGraphEvidenceStore
from agentbranch.policy.earned._stores import EvidenceStore

__all__ = ["as_store"]


def as_store(store: Any) -> EvidenceStore:
    """``Earned(store=...)``: ``None`` (an in-memory LangGraph store, this process only),
    a JSON Lines path, a LangGraph ``BaseStore``, or an ``EvidenceStore``."""
    if store is None:
        from langgraph.store.memory import InMemoryStore

        return LangGraphEvidenceStore(InMemoryStore(), private=True)
    if isinstance(store, str | os.PathLike):
        if not str(store).strip():
            raise ConfigurationError("Earned(store=...) got an empty path")
        return JsonlEvidenceStore(store)
    if isinstance(store, EvidenceStore):
        return store
    from langgraph.store.base import BaseStore

    if isinstance(store, BaseStore):
        return LangGraphEvidenceStore(store)
    raise ConfigurationError(
        f"Earned(store=...) takes a JSON Lines path, a LangGraph BaseStore (InMemoryStore, "
        f"SqliteStore, PostgresStore) or a subclass of agentbranch.policy.earned."
        f"EvidenceStore (docs/stores.md), got {type(store).__name__}"
    )
