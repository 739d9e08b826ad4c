"""Where evidence is kept: a JSON Lines file (one process) or a LangGraph ``BaseStore``
(``InMemoryStore``, ``SqliteStore``, ``PostgresStore``: several processes or replicas
share one body of evidence and converge on the same thresholds).

The interface (``EvidenceStore``) is three calls: ``append(records)``,
``load(key) -> list[Evidence]`` (every record of one evidence key, in replay order) and
``keys()`` (every key held).
Writes are append-only: one item per record, keyed by its unique id, never rewritten;
thresholds are recomputed from the records. A store holding something that is not
evidence is an ``InvalidFileError`` naming the file and line (or namespace and item),
never a silent reset.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.core.files import append_regular, kind, open_regular
from agentbranch.policy.evidence import Evidence, newer_schema

#: Namespace prefix of evidence items in a LangGraph store.
NAMESPACE: tuple[str, ...] = ("agentbranch", "earned")


@runtime_checkable
class EvidenceStore(Protocol):
    """What ``Earned(store=...)`` needs from a store."""

    def append(self, records: Sequence[Evidence]) -> None:
        """Add records (append-only; each record's ``id`` is unique)."""

    def load(self, key: str) -> list[Evidence]:
        """Every record of evidence key ``key``, in replay order (time, id)."""

    def keys(self) -> list[str]:
        """Every evidence key the store holds records of."""


def _parse(raw: Any, where: str) -> Evidence:
    newer = newer_schema(raw)
    if newer is not None:
        raise InvalidFileError(f"{where} was {newer}; nothing was reset")
    try:
        return Evidence.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or "record"
        raise InvalidFileError(
            f"{where} is not an agentbranch evidence record ({field}: {first.get('msg')}); "
            "the store holds something else or was edited. Point Earned(store=...) at a "
            "file or store of its own; nothing was reset"
        ) from None


class JsonlEvidenceStore:
    """Evidence in one JSON Lines file, appended under a ``filelock`` lock (``path +
    '.lock'``), so writers in several threads or processes on one machine never
    interleave. Every line is validated when read; a line that is not an evidence record
    is an ``InvalidFileError`` naming the file and line. Reads are incremental (only the
    bytes appended since the last read are parsed)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from filelock import FileLock

        self.path = Path(path)
        self._check_kind()
        self._lock = FileLock(str(self.path) + ".lock")
        self._mutex = threading.Lock()
        self._offset = 0
        self._line = 0
        self._by_key: dict[str, list[Evidence]] = {}

    def __repr__(self) -> str:
        return f"JsonlEvidenceStore({str(self.path)!r})"

    def _check_kind(self) -> None:
        if self.path.is_symlink():
            raise ConfigurationError(
                f"evidence store {self.path} is a symlink; give the real file's path"
            )
        if self.path.exists() and not stat.S_ISREG(mode := self.path.stat().st_mode):
            raise self._not_regular(mode)

    def _not_regular(self, mode: int) -> ConfigurationError:
        return ConfigurationError(
            f"evidence store {self.path} is {kind(mode)}, not a regular file; give a .jsonl "
            "file path"
        )

    def append(self, records: Sequence[Evidence]) -> None:
        if not records:
            return
        data = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._check_kind()
            append_regular(self.path, data.encode("utf-8"), self._not_regular, fsync=True)

    def load(self, key: str) -> list[Evidence]:
        with self._mutex:
            self._read_new()
            return sorted(self._by_key.get(key, ()), key=lambda r: r.order)

    def keys(self) -> list[str]:
        with self._mutex:
            self._read_new()
            return sorted(self._by_key)

    def _read_new(self) -> None:
        if not self.path.exists():
            if self._offset:
                raise InvalidFileError(f"evidence store {self.path} disappeared after being read")
            return
        self._check_kind()
        size = self.path.stat().st_size
        if size < self._offset:
            raise InvalidFileError(
                f"evidence store {self.path} shrank ({size} < {self._offset} bytes read); it "
                "is append-only: it was truncated or rewritten by something else"
            )
        with open_regular(self.path, self._not_regular) as f:
            f.seek(self._offset)
            chunk = f.read(size - self._offset)
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next read
        for raw in chunk[:end].splitlines():
            self._line += 1
            where = f"evidence store {self.path}, line {self._line}"
            try:
                obj = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise InvalidFileError(f"{where} is not UTF-8 text") from None
            except json.JSONDecodeError as e:
                raise InvalidFileError(f"{where} is not JSON ({e.msg})") from None
            rec = _parse(obj, where)
            self._by_key.setdefault(rec.key, []).append(rec)
        self._offset += end


class LangGraphEvidenceStore:
    """Evidence in a LangGraph ``BaseStore``: one item per record, namespace
    ``(*namespace, key)``, item key the record id. Any store LangGraph offers works
    (``InMemoryStore``, ``SqliteStore``, ``PostgresStore``); processes sharing one
    database share the evidence."""

    def __init__(self, store: Any, namespace: Sequence[str] = NAMESPACE) -> None:
        self.store = store
        self.namespace = tuple(namespace)

    def __repr__(self) -> str:
        return f"LangGraphEvidenceStore({type(self.store).__name__}, {self.namespace})"

    def append(self, records: Sequence[Evidence]) -> None:
        from langgraph.store.base import PutOp

        ops = [PutOp((*self.namespace, r.key), r.id, r.to_json(), index=False) for r in records]
        if ops:
            self.store.batch(ops)

    def load(self, key: str) -> list[Evidence]:
        ns, out, offset, page = (*self.namespace, key), [], 0, 1000
        while True:
            items = self.store.search(ns, limit=page, offset=offset)
            for item in items:
                where = f"evidence store {type(self.store).__name__}, item {item.key!r} in {ns}"
                rec = _parse(item.value, where)
                if rec.key != key or rec.id != item.key:
                    raise InvalidFileError(
                        f"{where} holds a record of key {rec.key!r} id {rec.id!r}: written by "
                        "something else; nothing was reset"
                    )
                out.append(rec)
            if len(items) < page:
                break
            offset += page
        return sorted(out, key=lambda r: r.order)

    def keys(self) -> list[str]:
        out, offset, page = [], 0, 1000
        n = len(self.namespace)
        while True:
            spaces = self.store.list_namespaces(
                prefix=self.namespace, max_depth=n + 1, limit=page, offset=offset
            )
            out += [ns[n] for ns in spaces if len(ns) > n]
            if len(spaces) < page:
                return sorted(set(out))
            offset += page


def as_store(store: Any) -> EvidenceStore:
    """``Earned(store=...)``: ``None`` (an in-memory LangGraph store, this process only),
    a JSON Lines path, a LangGraph ``BaseStore``, or an ``EvidenceStore``."""
    if store is None:
        from langgraph.store.memory import InMemoryStore

        return LangGraphEvidenceStore(InMemoryStore())
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
