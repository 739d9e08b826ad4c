"""What ``Earned(store=...)`` was given, as a store (``as_store``), and another reader of
the same evidence (``store_view``)."""

from __future__ import annotations

import os
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.policy.earned._jsonl_store import JsonlEvidenceStore
from agentbranch.policy.earned._langgraph_store import LangGraphEvidenceStore
from agentbranch.policy.earned._stores import EvidenceStore

__all__ = ["as_store", "store_view"]


def store_view(store: EvidenceStore) -> EvidenceStore:
    """Another reader of the same evidence: its own read position, so two ``Earned``
    objects on one store (the learned versions' copies) each read every record."""
    if isinstance(store, JsonlEvidenceStore):
        return JsonlEvidenceStore(store.path, mode=store.mode)
    if isinstance(store, LangGraphEvidenceStore):
        return LangGraphEvidenceStore(store.store, store.namespace, private=store.private)
    return store


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
    try:
        from langgraph.store.base import BaseStore
    except ImportError:  # pragma: no cover - langgraph is a dependency
        BaseStore = ()  # type: ignore[assignment,misc]
    if isinstance(store, BaseStore):
        return LangGraphEvidenceStore(store)
    if isinstance(store, JsonlEvidenceStore | LangGraphEvidenceStore) or (
        callable(getattr(store, "append", None)) and callable(getattr(store, "load", None))
    ):
        return store
    raise ConfigurationError(
        f"Earned(store=...) takes a JSON Lines path or a LangGraph BaseStore "
        f"(InMemoryStore, SqliteStore, PostgresStore), got {type(store).__name__}"
    )
