"""Where evidence is kept: the contract every store fulfils (``EvidenceStore``; docs/stores.md,
``agentbranch.testing.check_store`` checks it) and what the stores share. A store holding
something that is not evidence is an ``InvalidFileError``, never a reset.
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
from agentbranch.core.files import PRIVATE_MODE, newer_release
from agentbranch.policy.earned._evidence import Evidence, check_time

__all__ = ["EvidenceStore", "parse_record", "present"]

log = logging.getLogger("agentbranch")


class EvidenceStore(ABC):
    """What ``Earned(store=...)`` calls: subclass it and write ``append``, ``load`` and
    ``keys``; every other method has a default a backend may override."""

    #: The file the evidence is in (``None``: it is not kept in a file of its own).
    path: Path | None = None
    #: Permissions of the files kept beside ``path`` (a checkpoint): owner-only.
    mode: int = PRIVATE_MODE
    #: Nobody else writes this store (``Earned(store=None)``): nothing is read back.
    private: bool = False
    #: ``read_new`` can restart at a saved place: ``Earned`` keeps a checkpoint beside it.
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
        """Records this reader has not returned yet (by any process; each once, any
        order), a batch per call: ``Earned`` calls it until it returns none. The default
        re-reads every key and keeps an 8-byte digest of each id returned."""
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
        """Another reader of the same evidence, with its own ``read_new`` place (a learned
        version's copy of ``Earned`` reads every record too); appends go to this store."""
        return _View(self)

    def records(self) -> Iterator[Evidence]:
        """Every record, key by key (a report over the whole store)."""
        for key in self.keys():
            yield from self.load(key)

    def keep_only(self, keys: Iterable[str]) -> None:
        """A hint: from now on this reader's ``read_new`` need only return the records
        of these keys (the others may be skipped unparsed). The default returns all."""

    def pop_lost(self) -> str | None:
        """Why the store was lost (moved, deleted or replaced while serving) since the last
        call, once; ``None``: it was not. ``Earned`` then learns again from nothing."""
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
    newer = newer_release(raw)
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
