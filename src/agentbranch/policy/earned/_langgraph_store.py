"""Evidence in a LangGraph ``BaseStore`` (``InMemoryStore``, ``SqliteStore``,
``PostgresStore``): several processes or replicas share one body of evidence and converge
on the same thresholds; each reads incrementally what the others committed.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from agentbranch.core.errors import InvalidFileError
from agentbranch.core.files import PRIVATE_MODE, keep_private
from agentbranch.policy.earned._evidence import Evidence
from agentbranch.policy.earned._stores import parse_record, present

__all__ = ["MARGIN", "NAMESPACE", "LangGraphEvidenceStore"]

log = logging.getLogger("agentbranch")

#: How late a writer sharing a LangGraph store may commit and still be read
#: incrementally (``LangGraphEvidenceStore.read_new``).
MARGIN = timedelta(seconds=30)

#: Namespace prefix of evidence items in a LangGraph store.
NAMESPACE: tuple[str, ...] = ("agentbranch", "earned")


class LangGraphEvidenceStore:
    """Evidence in a LangGraph ``BaseStore``: one item per record, namespace
    ``(*namespace, key)``, item key the record id. Any store LangGraph offers works
    (``InMemoryStore``, ``SqliteStore``, ``PostgresStore``); processes sharing one
    database share the evidence."""

    def __init__(
        self, store: Any, namespace: Sequence[str] = NAMESPACE, *, private: bool = False
    ) -> None:
        self.store = store
        self.namespace = tuple(namespace)
        #: Nobody else writes this store (``Earned(store=None)``): nothing to read back.
        self.private = private
        self._mark: Any = None  # newest ``updated_at`` read
        self._recent: set[str] = set()  # ids read with ``updated_at`` near the mark
        self._counts: dict[tuple[str, ...], int] = {}  # InMemoryStore: items read per namespace
        self._kept_private = False  # a SQLite file's permissions checked (first append)

    def __repr__(self) -> str:
        return f"LangGraphEvidenceStore({type(self.store).__name__}, {self.namespace})"

    def append(self, records: Sequence[Evidence]) -> None:
        from langgraph.store.base import PutOp

        ops = [PutOp((*self.namespace, r.key), r.id, r.to_json(), index=False) for r in records]
        if ops:
            if not self._kept_private:
                self._kept_private = True
                self._keep_private()
            self.store.batch(ops)

    def _keep_private(self) -> None:
        """A ``SqliteStore``'s database file (and its journal files) holds evidence as a
        JSON Lines store does: wider than owner-only, it is tightened where this process
        owns it, with a WARNING either way (``core.files.keep_private``). The database
        was created by the application, so its permissions are not ours to choose before
        that; other stores (a server's database, memory) have no file here."""
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
        """Records written since the last call (by any process sharing the store).

        SQLite and PostgreSQL stores list items newest first (``updated_at``): pages are
        read until items older than the newest seen last time, less ``MARGIN`` (for
        writers whose transactions commit late), ids read near that mark are skipped.
        An ``InMemoryStore`` lists items in insertion order: each namespace is read from
        the number of items already read there."""
        if self.private:
            return []
        from langgraph.store.memory import InMemoryStore

        if isinstance(self.store, InMemoryStore):
            return self._read_in_order()
        return self._read_newest_first()

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
        newest, near, offset, page = self._mark, {}, 0, 1000
        done = False
        while not done:
            items = self.store.search(self.namespace, limit=page, offset=offset)
            for item in items:
                when = item.updated_at
                if cutoff is not None and when < cutoff:
                    done = True
                    break
                if item.key not in self._recent and len(item.namespace) == len(self.namespace) + 1:
                    out += present([self._checked(item)])
                near[item.key] = when
                newest = when if newest is None or when > newest else newest
            offset += len(items)
            done = done or len(items) < page
        self._mark = newest
        if newest is not None:
            self._recent = {k for k, when in near.items() if when >= newest - MARGIN}
        out.reverse()  # oldest first
        return out

    def load(self, key: str) -> list[Evidence]:
        ns, out, offset, page = (*self.namespace, key), [], 0, 1000
        while True:
            items = self.store.search(ns, limit=page, offset=offset)
            out += present(self._checked(item) for item in items)
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
