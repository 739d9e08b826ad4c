"""What a learning policy reads back from its evidence store (``StoreLabels``): the
labelled states every replica gathered, by the written question they were learned for,
and each version's probability fit, so replicas sharing a store learn together. Each
label counts once; a claimed question's states are handed over as read, not kept here.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from agentbranch.policy.earned._state import DigestSet, digest
from agentbranch.policy.earned.learn.probability import Map, ProbabilityFit

Labelled = tuple[Any, str, str]  #: (record order, state, teacher's label)
#: (record order, state, teacher's label, decision identity or None)
Labelled4 = tuple[Any, str, str, str | None]


class StoreLabels:
    """The labelled states and probability fits read from ``earned``'s store."""

    def __init__(self, earned: Any) -> None:
        self.earned = earned
        #: labelled states not claimed yet, by the written question's key
        #: (``Evidence.written``), then by record order
        self.by_written: dict[str, dict[Any, Labelled4]] = {}
        #: labelled states of records that name no written question (stored before
        #: records did) not claimed yet, by their evidence key, then by record order
        self.by_key: dict[str, dict[Any, Labelled4]] = {}
        self._claimed: set[str] = set()  #: written keys whose states go to the learner
        #: per version's evidence key: its labelled reads and probability map
        self.fits: dict[str, ProbabilityFit] = {}
        #: the labels counted in fits, as 8-byte digests of (key, decision or record id)
        self._counted = DigestSet()
        self._view: Any = None
        self._lock = threading.Lock()
        self._read_at: float | None = None

    def read(self, *, force: bool = False) -> dict[str, list[Labelled4]] | None:
        """The labelled states the store gained since the last read, by written key, at
        most every ``refresh_s`` unless ``force``; ``None`` when it did not read."""
        earned = self.earned
        if not force and (
            earned.frozen
            or (self._read_at is not None and time.monotonic() - self._read_at < earned.refresh_s)
        ):
            return None
        if not self._lock.acquire(blocking=force):
            return None
        try:
            if self._view is None:
                self._view = earned.evidence.view()
            new: dict[str, list[Labelled4]] = {}
            while batch := self._view.read_new():
                for rec in batch:
                    self._count(rec)
                    if rec.state is None:
                        continue
                    labelled = (rec.order, rec.state, rec.teacher_label, rec.decision)
                    if rec.written is None:
                        self.by_key.setdefault(rec.key, {}).setdefault(rec.order, labelled)
                    elif rec.written in self._claimed:
                        new.setdefault(rec.written, []).append(labelled)
                    else:
                        by = self.by_written.setdefault(rec.written, {})
                        by.setdefault(rec.order, labelled)
            self._read_at = time.monotonic()
            return new
        finally:
            self._lock.release()

    def claim(self, written: str) -> list[Labelled4]:
        """The labelled states read so far learned for the written question ``written``;
        from now on its new ones are only returned by ``read`` (not kept here)."""
        with self._lock:
            self._claimed.add(written)
            return sorted(self.by_written.pop(written, {}).values(), key=lambda s: s[0])

    def claim_key(self, key: str) -> list[Labelled4]:
        """The labelled states read so far under ``key`` that name no written question."""
        with self._lock:
            return sorted(self.by_key.pop(key, {}).values(), key=lambda s: s[0])

    def count(self, rec: Any) -> None:
        """This process's record in its version's probability fit now (read back, once)."""
        with self._lock:
            self._count(rec)

    def probability_map(self, key: str) -> Map | None:
        """The probability map in force for the version whose evidence key is ``key``."""
        fitted = self.fits.get(key)
        return None if fitted is None else fitted.in_force

    def _count(self, rec: Any) -> None:
        if rec.probability is None:
            return
        label = digest(f"{rec.key}:{rec.decision or rec.id}")
        if label in self._counted:
            return
        self._counted.add(label)
        fitted = self.fits.setdefault(rec.key, ProbabilityFit())
        fitted.add(rec.confidence, rec.probability, rec.correct, 1.0 / rec.rate)


def settled(order: tuple[str, str], settle_s: float) -> bool:
    """Whether the label of record order ``order`` (time, id) is ``settle_s`` old."""
    made = datetime.fromisoformat(order[0])
    return (datetime.now(UTC) - made).total_seconds() >= settle_s


__all__ = [
    "Labelled",
    "StoreLabels",
    "settled",
]
