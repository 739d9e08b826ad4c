"""Where audit records go: a JSON Lines file, a LangGraph store, or a callback.

A sink is anything with ``write(record)``; ``as_sinks`` turns what a user passes to
``Audit(sink=...)`` into a list of them: a path (``str``/``Path``) is a ``JsonlSink``, a
LangGraph ``BaseStore`` a ``StoreSink``, a plain callable a ``CallbackSink``, a list any
mix of those. Sinks run on the audit worker's thread, never on the run's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.files import PRIVATE_MODE, append_regular, check_mode, kind

AuditRecord = dict[str, Any]


class Sink(Protocol):
    def write(self, record: AuditRecord) -> None: ...


class JsonlSink:
    """Appends one JSON object per line to ``path`` (created with its folder).

    A new file is created with permissions ``mode``: owner-only (``0o600``) by default,
    since records may hold user text (the question, ``Audit(include_state=True)``'s
    states, the teacher's reply); ``JsonlSink(path, mode=0o640)`` lets a group read it.
    An existing file with wider permissions is tightened to ``mode`` where this process
    owns it, with a WARNING either way (``core.files.keep_private``)."""

    def __init__(self, path: str | Path, *, mode: int = PRIVATE_MODE) -> None:
        self.path = Path(path)
        self.mode = check_mode(mode, "JsonlSink")
        self._lock = threading.Lock()

    def write(self, record: AuditRecord) -> None:
        # allow_nan=False: NaN is not JSON, and a line the loader refuses is worse than a
        # failed write (logged and counted by Audit.write).
        line = json.dumps(record, ensure_ascii=False, default=str, allow_nan=False) + "\n"
        data = line.encode("utf-8")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_regular(
                self.path,
                data,
                lambda mode: ConfigurationError(
                    f"audit sink {self.path} is {kind(mode)}, not a regular file; give a "
                    ".jsonl file path"
                ),
                mode=self.mode,
                private="audit file",
            )

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"


class StoreSink:
    """Puts each record into a LangGraph store under ``namespace``, keyed by its id;
    read them back with ``[item.value for item in store.search(namespace, limit=...)]``."""

    def __init__(self, store: Any, namespace: tuple[str, ...] = ("agentbranch", "audits")) -> None:
        self.store = store
        self.namespace = tuple(namespace)

    def write(self, record: AuditRecord) -> None:
        self.store.put(self.namespace, record["id"], record)


class CallbackSink:
    """Calls ``fn(record)`` for each record."""

    def __init__(self, fn: Callable[[AuditRecord], Any]) -> None:
        self.fn = fn

    def write(self, record: AuditRecord) -> None:
        self.fn(record)


def _is_store(obj: Any) -> bool:
    try:
        from langgraph.store.base import BaseStore
    except ImportError:  # pragma: no cover - langgraph is a dependency
        return False
    return isinstance(obj, BaseStore)


def as_sinks(sink: Any) -> list[Sink]:
    """The sinks named by ``Audit(sink=...)`` (see the module doc)."""
    if sink is None:
        return []
    if isinstance(sink, str | Path):
        return [JsonlSink(sink)]
    if _is_store(sink):
        return [StoreSink(sink)]
    if hasattr(sink, "write") and callable(sink.write):
        return [sink]
    if callable(sink):
        return [CallbackSink(sink)]
    if isinstance(sink, Sequence):
        return [s for item in sink for s in as_sinks(item)]
    raise ConfigurationError(
        f"Audit(sink=...) got {type(sink).__name__}; give a file path (JSON Lines), a "
        "LangGraph store, a callable taking a record, or a list of them"
    )


__all__ = [
    "AuditRecord",
    "CallbackSink",
    "JsonlSink",
    "Sink",
    "StoreSink",
    "as_sinks",
]
