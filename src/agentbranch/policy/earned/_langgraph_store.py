"""Evidence in a LangGraph ``BaseStore``: processes or replicas share one body of
evidence and converge on the same thresholds, each reading what the others committed.
"""

from __future__ import annotations

import importlib
import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import timedelta
from typing import Any

from agentbranch.core.errors import InvalidFileError
from agentbranch.core.files import PRIVATE_MODE, keep_private
from agentbranch.policy.earned._evidence import Evidence
from agentbranch.policy.earned._stores import EvidenceStore, parse_record, present

__all__ = ["MARGIN", "LangGraphEvidenceStore"]

log = logging.getLogger("agentbranch")

#: How late a writer sharing a LangGraph store may commit and still be read (``read_new``).
MARGIN = timedelta(seconds=30)

#: Items asked at first by ``load``/``keys`` and by ``read_new`` (newest first); a
#: listing that fills it is asked again for four times as many (``_listing``).
PAGE = 1000
FIRST_PAGE = 128

#: Namespace prefix of evidence items in a LangGraph store.
NAMESPACE: tuple[str, ...] = ("agentbranch", "earned")


class LangGraphEvidenceStore(EvidenceStore):
    """Evidence in a LangGraph ``BaseStore`` (``InMemoryStore``, ``SqliteStore``,
    ``PostgresStore`` or any other): one item per record, namespace ``(*namespace, key)``,
    item key the record id."""

    def __init__(
        self, store: Any, namespace: Sequence[str] = NAMESPACE, *, private: bool = False
    ) -> None:
        self.store = store
        self.namespace = tuple(namespace)
        self.private = private
        self._mark: Any = None  # newest ``updated_at`` read
        self._recent: set[str] = set()  # ids read with ``updated_at`` near the mark
        self._counts: dict[tuple[str, ...], int] = {}  # InMemoryStore: items read per namespace
        self._seen: Any = None  # any other store: digests of the items read (``DigestSet``)
        self._kept_private = False  # a SQLite file's permissions checked (first append)

    def __repr__(self) -> str:
        return f"LangGraphEvidenceStore({type(self.store).__name__}, {self.namespace})"

    def view(self) -> LangGraphEvidenceStore:
        """Another reader of the same store, reading it from its first item."""
        return LangGraphEvidenceStore(self.store, self.namespace, private=self.private)

    def append(self, records: Sequence[Evidence]) -> None:
        from langgraph.store.base import PutOp

        ops = [PutOp((*self.namespace, r.key), r.id, r.to_json(), index=False) for r in records]
        if ops:
            if not self._kept_private:
                self._kept_private = True
                self._keep_private()
            self.store.batch(ops)

    def _keep_private(self) -> None:
        """A ``SqliteStore``'s database and journal files hold evidence: wider than
        owner-only, they are tightened where this process owns them, with a WARNING
        either way (``core.files.keep_private``). Other stores have no file here."""
        try:
            from langgraph.store.sqlite import SqliteStore
        except ImportError:  # the SQLite store is not installed: this is no SQLite store
            return
        if not isinstance(self.store, SqliteStore):
            return
        try:
            with self.store.lock:  # the store's own: its connection is shared by threads
                rows = self.store.conn.execute("PRAGMA database_list").fetchall()
        except sqlite3.Error:
            return
        main = next((row[2] for row in rows if row[1] == "main"), "")
        for path in [main, main + "-wal", main + "-shm", main + "-journal"] if main else []:
            try:
                st = os.stat(path)
            except OSError:
                continue
            keep_private(path, st, PRIVATE_MODE, "SQLite evidence store")

    def read_new(self) -> list[Evidence]:
        """Records written since the last call (by any process sharing the store), in
        replay order. ``BaseStore`` promises no order of ``search``: an ``InMemoryStore``
        (insertion order) is read on from the items already read per namespace;
        ``SqliteStore`` and ``PostgresStore`` (newest first) down to the newest item
        seen last time less ``MARGIN`` (late commits); any other store (subclasses
        included) is listed whole and the items not read before are returned."""
        if self.private:
            return []
        kind = type(self.store)
        from langgraph.store.memory import InMemoryStore

        if kind is InMemoryStore:
            out = self._read_in_order()
        elif kind in _listed_newest_first():
            out = self._read_newest_first()
        else:
            out = self._read_unordered()
        return sorted(out, key=lambda r: r.order)

    def _checked(self, item: Any) -> Evidence | None:
        ns = tuple(item.namespace)
        where = f"evidence store {type(self.store).__name__}, item {item.key!r} in {ns}"
        rec = parse_record(item.value, where)
        if rec is None:
            return None
        if ns != (*self.namespace, rec.key) or rec.id != item.key:
            raise InvalidFileError(
                f"{where} holds a record of key {rec.key!r} id {rec.id!r}: written by "
                "something else; nothing was reset"
            )
        return rec

    def _read_in_order(self) -> list[Evidence]:
        out: list[Evidence] = []
        n = len(self.namespace)
        for key in self.keys():
            ns = (*self.namespace, key)
            offset = self._counts.get(ns, 0)
            while True:
                items = self.store.search(ns, limit=1000, offset=offset)
                out += present(
                    self._checked(item) for item in items if len(item.namespace) == n + 1
                )
                offset += len(items)
                if len(items) < 1000:
                    break
            self._counts[ns] = offset
        return out

    def _read_newest_first(self) -> list[Evidence]:
        out: list[Evidence] = []
        cutoff = None if self._mark is None else self._mark - MARGIN
        newest, near = self._mark, {}
        # Every item at or after the cutoff ranks before every older one, so one listing
        # that reaches an older item (or the end) holds them all, in whatever order.
        reached = None if cutoff is None else lambda items: items[-1].updated_at < cutoff
        for item in self._listing(self.namespace, FIRST_PAGE, reached):
            when = item.updated_at
            if cutoff is not None and when < cutoff:
                continue
            if item.key not in self._recent and len(item.namespace) == len(self.namespace) + 1:
                out += present([self._checked(item)])
            near[item.key] = when
            newest = when if newest is None or when > newest else newest
        self._mark = newest
        if newest is not None:
            self._recent = {k for k, when in near.items() if when >= newest - MARGIN}
        return out

    def _read_unordered(self) -> list[Evidence]:
        from agentbranch.policy.earned._state import DigestSet, digest

        if self._seen is None:
            self._seen = DigestSet()
        out: list[Evidence] = []
        for key in self.keys():
            for item in self._listing((*self.namespace, key), PAGE):
                d = digest("\0".join((*item.namespace, item.key)))
                if d not in self._seen:
                    out += present([self._checked(item)])
                    self._seen.add(d)  # (a record dated in the future: skipped once)
        return out

    def _listing(
        self, ns: tuple[str, ...], limit: int, reached: Callable[[list], bool] | None = None
    ) -> list[Any]:
        """What ``search`` lists under ``ns``, in one call from offset 0, its limit grown
        until the listing ends or ``reached`` says it holds enough (pages at growing
        offsets are only whole if the order is the same each call: not promised)."""
        while True:
            items = self.store.search(ns, limit=limit, offset=0)
            if len(items) < limit or (reached is not None and reached(items)):
                return items
            limit *= 4

    def load(self, key: str) -> list[Evidence]:
        items = self._listing((*self.namespace, key), PAGE)
        return sorted(present(self._checked(item) for item in items), key=lambda r: r.order)

    def keys(self) -> list[str]:
        n, limit = len(self.namespace), PAGE
        while True:  # (one listing from offset 0, as ``_listing``)
            spaces = self.store.list_namespaces(
                prefix=self.namespace, max_depth=n + 1, limit=limit, offset=0
            )
            if len(spaces) < limit:
                return sorted({ns[n] for ns in spaces if len(ns) > n})
            limit *= 4


def _listed_newest_first() -> tuple[type, ...]:
    """The LangGraph stores whose ``search`` (without a query) lists newest first."""
    kinds: list[type] = []
    for module, name in (("sqlite", "SqliteStore"), ("postgres", "PostgresStore")):
        with suppress(ImportError):  # not installed: no store of this kind can be given
            kinds.append(getattr(importlib.import_module(f"langgraph.store.{module}"), name))
    return tuple(kinds)
