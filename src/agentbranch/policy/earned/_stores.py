"""Where evidence is kept: the contract every store fulfils (``EvidenceStore``) and what
the stores share.

A store subclasses ``EvidenceStore`` and writes three methods: ``append(records)``,
``load(key)`` (every record of one evidence key, in replay order) and ``keys()``. The
rest of what ``Earned`` calls is declared here with a default that is correct for any
store (``read_new`` re-reads the store and returns what this reader has not returned
yet); a backend overrides a default where it can do better (the JSON Lines store reads
only the bytes appended since; the LangGraph adapter only the newest items).
``agentbranch.testing.check_store`` checks a store against this contract (docs/stores.md).
Writes are append-only; a store holding something that is not evidence is an
``InvalidFileError`` naming where, never a silent reset.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentbranch.core.errors import InvalidFileError
from agentbranch.core.files import PRIVATE_MODE
from agentbranch.policy.earned._evidence import Evidence, check_time, newer_schema

__all__ = ["EvidenceStore", "StoreLost", "parse_record", "present"]

log = logging.getLogger("agentbranch")


class EvidenceStore(ABC):
    """What ``Earned(store=...)`` calls: subclass it and write ``append``, ``load`` and
    ``keys``; every other method has a default a backend may override."""

    #: The file the evidence is in (``None``: it is not kept in a file of its own).
    path: Path | None = None
    #: Permissions of the files kept beside ``path`` (a checkpoint): owner-only.
    mode: int = PRIVATE_MODE
    #: Nobody else writes this store (``Earned(store=None)``): nothing is read back,
    #: and a learned version's labels need not wait for other writers to settle.
    private: bool = False
    #: ``read_new`` can restart at a saved place (``position``/``resume``): ``Earned``
    #: then keeps a checkpoint of its states at ``path + '.state'``.
    resumable: bool = False

    _returned: Any = None  # the default ``read_new``'s record ids returned so far

    @abstractmethod
    def append(self, records: Sequence[Evidence]) -> None:
        """Add records (append-only; each record's ``id`` is unique). Raises ``OSError``
        when they cannot be kept (``Earned`` counts them as lost labels)."""

    @abstractmethod
    def load(self, key: str) -> list[Evidence]:
        """Every record of evidence key ``key`` (each id once), in replay order
        (``Evidence.order``: time, then id), whichever process appended it."""

    @abstractmethod
    def keys(self) -> list[str]:
        """Every evidence key the store holds records of, sorted."""

    def read_new(self) -> list[Evidence]:
        """Records this reader has not returned yet (appended by any process; each once,
        in any order), at most a batch per call: ``Earned`` calls it until it returns
        none.

        The default re-reads every key (``keys``, ``load``) and keeps an 8-byte digest
        of each id returned; a backend that can tell what it gained overrides it (and
        ``view``, so that each reader keeps its own place)."""
        from agentbranch.policy.earned._state import DigestSet, digest

        with _DEFAULT_READ:
            if self._returned is None:
                self._returned = DigestSet()
            seen, out = self._returned, []
            for key in self.keys():
                for rec in self.load(key):
                    d = digest(rec.id)
                    if d not in seen:
                        seen.add(d)
                        out.append(rec)
            return out

    def view(self) -> EvidenceStore:
        """Another reader of the same evidence, with its own ``read_new`` place: two
        ``Earned`` objects on one store (a learned version's copy) each read every
        record. Appends through it go to this store."""
        return _View(self)

    def records(self) -> Iterator[Evidence]:
        """Every record, key by key (a report over the whole store)."""
        for key in self.keys():
            yield from self.load(key)

    def keep_only(self, keys: Iterable[str]) -> None:
        """A hint: from now on this reader's ``read_new`` need only return the records
        of these keys (the others may be skipped unparsed). The default returns all."""

    def pop_lost(self) -> str | None:
        """Why the store being read was lost since the last call (moved, deleted or
        replaced while serving: ``Earned`` then learns again from nothing); ``None``:
        it was not. Reported once."""
        return None

    def sync(self) -> None:
        """Make what was appended durable now (a store that is durable when ``append``
        returns has nothing to do)."""

    @property
    def offset(self) -> int:
        """How far ``read_new`` has read, in bytes (a checkpoint is written each
        ``CHECKPOINT_BYTES``); 0 for a store that does not count bytes."""
        return 0

    def position(self) -> dict[str, Any]:
        """Where ``read_new`` stands, as ``resume`` takes it back (``resumable`` stores)."""
        raise NotImplementedError(f"{type(self).__name__} is not resumable")

    def resume(self, offset: int, line: int, sha256: str | None, keys: Sequence[str] = ()) -> bool:
        """Continue ``read_new`` at a ``position`` (``resumable`` stores); whether it
        could (``False``: it reads from the start)."""
        return False


_DEFAULT_READ = threading.Lock()


class _View(EvidenceStore):
    """``EvidenceStore.view``: the same store read from its own place."""

    def __init__(self, store: EvidenceStore) -> None:
        self.store = store
        self.private = store.private

    def __repr__(self) -> str:
        return repr(self.store)  # the same store (lost labels are counted by its name)

    def append(self, records: Sequence[Evidence]) -> None:
        self.store.append(records)

    def load(self, key: str) -> list[Evidence]:
        return self.store.load(key)

    def keys(self) -> list[str]:
        return self.store.keys()

    def records(self) -> Iterator[Evidence]:
        return self.store.records()

    def sync(self) -> None:
        self.store.sync()


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
