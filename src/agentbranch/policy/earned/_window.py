"""One question's trust fed label by label in replay order, late labels included, at a
cost that does not grow with the evidence.

``QuestionWindow`` keeps the question's live ``TrustState`` and its recent labels in
chunks, so a late label re-runs only the labels after it (how, and when the caller must
rebuild from the store: its docstring); ``Label`` is the light copy of a record it
keeps. Each label counts once.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from agentbranch.policy.earned._digests import DigestSet, digest
from agentbranch.policy.earned._state import Event, Settings, TrustState, step

#: Labels per chunk (a late label re-runs at most its chunk and the ones after it) ...
CHUNK = 32
#: ... and chunks kept: a label may arrive up to CHUNK × (CHUNKS - 1) labels late.
CHUNKS = 16

COUNTED, DUPLICATE, REBUILD = "counted", "duplicate", "rebuild"


class Label:
    """The fields of an evidence record the state machine reads (a window keeps these,
    about 250 bytes, instead of the record)."""

    __slots__ = (
        "band",
        "confidence",
        "floor",
        "bet_alpha",
        "correct",
        "decision",
        "id",
        "order",
        "question_id",
        "rate",
        "take_at",
        "time",
    )

    def __init__(self, rec: Any, decision: int | None) -> None:
        self.id, self.time, self.order = rec.id, rec.time, rec.order
        self.question_id, self.band = rec.question_id, rec.band
        self.confidence, self.correct, self.rate = rec.confidence, rec.correct, rec.rate
        self.take_at = getattr(rec, "take_at", None)
        self.floor = getattr(rec, "floor", None)  # (learn=True: eprocess bets)
        self.bet_alpha = getattr(rec, "bet_alpha", None)  # (... and the bar they cross)
        self.decision = decision  # digest of (key, decision), or None

    _FIELDS = ("id", "time", "question_id", "band", "confidence", "correct", "rate", "take_at")

    def to_list(self) -> list[Any]:
        """The fields as a JSON-safe list (``from_list`` inverts)."""
        return [*(getattr(self, name) for name in self._FIELDS), self.decision]

    @classmethod
    def from_list(cls, fields: list[Any]) -> Label:
        rec = cls.__new__(cls)
        *values, rec.decision = fields
        for name, value in zip(cls._FIELDS, values, strict=True):
            setattr(rec, name, value)
        rec.order = (rec.time, rec.id)
        return rec


class _Chunk:
    __slots__ = ("start", "labels", "counted")

    def __init__(self, start: TrustState) -> None:
        self.start = start  # the state before this chunk's first label (never mutated)
        self.labels: list[Label] = []
        self.counted: list[bool] = []


class QuestionWindow:
    """One question's live ``TrustState`` and the recent labels that let a late one be
    inserted. Not thread-safe: the caller serializes ``add``.

    Thresholds are a function of the records in replay order (time, id): looks fall at
    label counts and the drift test is sequential, so a label that arrives after others it
    sorts behind (eight callers labelling at once, a replica's clock, a future-dated
    record) changes what comes after it, and only that. ``QuestionWindow`` keeps the last
    ``CHUNKS × CHUNK`` labels (light copies, not the records) in chunks, each with a
    snapshot of the state before it. A label in order is one ``step``; a late one is
    inserted into its chunk and the state is re-run from that chunk's snapshot: at most
    the labels after it in the window, never the question's whole history. A label older
    than the whole window answers ``REBUILD``: the caller replays the question from its
    store (the store is the full history; this is rare and logged).

    Each label counts once: a record whose ``id`` was seen (in the window or, once folded
    out of it, in the shared ``DigestSet``) is dropped, and of records carrying the same
    ``decision`` identity only the first in replay order counts.
    """

    def __init__(
        self,
        key: str,
        cfg: Settings,
        fresh: Callable[[], TrustState],
        extra: tuple[float, ...] = (),
    ) -> None:
        self.key, self.cfg = key, cfg
        #: ids (and counted decisions) folded out of the window: 8 bytes each
        self.seen = DigestSet()
        start = fresh()
        start.extra = extra
        self.live: TrustState = start.copy()
        self._chunks = [_Chunk(start)]
        self._ids: set[str] = set()
        self._decisions: set[int] = set()  # counted decision digests in the window
        self._folded = False
        self._announced: set[tuple[str, str]] = set()
        self._checked = 0  # events of ``live`` already looked at for new withdrawals

    def to_dict(self, keep: int) -> dict[str, Any]:
        """The live state and the last ``keep`` chunks as JSON-safe values (for a
        checkpoint): the ids and counted decisions of older chunks fold into ``seen``."""
        import base64

        import numpy as np  # here: `import agentbranch` loads no numpy

        dropped = self._chunks[:-keep]
        extra = [x.id for c in dropped for x in c.labels]
        extra_dec = [
            x.decision
            for c in dropped
            for x, k in zip(c.labels, c.counted)
            if k and x.decision is not None
        ]
        folded = np.union1d(
            self.seen.to_array(),
            np.array([digest("id:" + i) for i in extra] + extra_dec, dtype=np.uint64),
        )
        return {
            "live": self.live.to_dict(),
            "chunks": [
                {
                    "start": c.start.to_dict(),
                    "labels": [x.to_list() for x in c.labels],
                    "counted": c.counted,
                }
                for c in self._chunks[-keep:]
            ],
            "seen": base64.b64encode(folded.astype("<u8").tobytes()).decode("ascii"),
            "folded": self._folded or bool(dropped),
            "announced": sorted(list(a) for a in self._announced),
        }

    @classmethod
    def from_dict(
        cls, key: str, cfg: Settings, fresh: Callable[[], TrustState], raw: dict[str, Any]
    ) -> QuestionWindow:
        """The window ``to_dict`` wrote (``KeyError``/``ValueError`` when it does not fit)."""
        import base64

        import numpy as np  # here: `import agentbranch` loads no numpy

        w = cls(key, cfg, fresh)
        chunks = []
        for c in raw["chunks"]:
            chunk = _Chunk(TrustState.from_dict(c["start"]))
            chunk.labels = [Label.from_list(fields) for fields in c["labels"]]
            chunk.counted = list(c["counted"])
            chunks.append(chunk)
        w._chunks = chunks
        w.live = TrustState.from_dict(raw["live"])
        w._ids = {x.id for c in chunks for x in c.labels}
        w._decisions = {
            x.decision
            for c in chunks
            for x, k in zip(c.labels, c.counted)
            if k and x.decision is not None
        }
        w.seen = DigestSet.from_array(np.frombuffer(base64.b64decode(raw["seen"]), dtype="<u8"))
        w._folded = raw["folded"]
        w._announced = {tuple(a) for a in raw["announced"]}
        w._checked = len(w.live.events)
        return w

    def announced_as(self, other: QuestionWindow | None) -> None:
        """Take over the withdrawals ``other`` (the window this one replaces) announced."""
        self._announced = set(other._announced) if other is not None else set()

    @property
    def extra(self) -> tuple[float, ...]:
        return self._chunks[0].start.extra

    def add(self, rec: Any) -> str:
        """Feed one record: ``COUNTED`` (or not counted as a repeat of a decision),
        ``DUPLICATE`` (its id was seen) or ``REBUILD`` (older than the window). Raises
        ``OffGrid`` when its threshold in force needs a new cell boundary."""
        if rec.id in self._ids:
            return DUPLICATE
        last = self._chunks[-1]
        newest = (
            last.labels[-1].order
            if last.labels
            else (self._chunks[-2].labels[-1].order if len(self._chunks) > 1 else None)
        )
        in_order = newest is None or rec.order > newest
        # A copy of a folded record sorts where it did, before the window: only a record
        # that is not in order can be one.
        if not in_order and digest("id:" + rec.id) in self.seen:
            return DUPLICATE
        decision = getattr(rec, "decision", None)
        dd = None if decision is None else digest(f"decision:{self.key}:{decision}")
        label = Label(rec, dd)
        if in_order:
            counted = dd is None or (dd not in self._decisions and dd not in self.seen)
            if counted:
                step(self.live, label, self.cfg)
                if dd is not None:
                    self._decisions.add(dd)
            self._ids.add(label.id)
            last.labels.append(label)
            last.counted.append(counted)
            if len(last.labels) >= CHUNK:
                self._chunks.append(_Chunk(self.live.copy()))
                self._fold()
            return COUNTED
        first = self._chunks[0].labels[0].order
        if self._folded and label.order < first:
            return REBUILD
        j = max(
            0, bisect_right([c.labels[0].order for c in self._chunks if c.labels], label.order) - 1
        )
        chunk = self._chunks[j]
        at = bisect_right([x.order for x in chunk.labels], label.order)
        chunk.labels.insert(at, label)
        chunk.counted.insert(at, False)
        self._ids.add(label.id)
        self._rerun(j)
        return COUNTED

    def _rerun(self, j: int) -> None:
        """Re-run the state from chunk ``j``'s snapshot over every label after it."""
        tail = self._chunks[j:]
        for c in tail:
            for x, counted in zip(c.labels, c.counted):
                if counted and x.decision is not None:
                    self._decisions.discard(x.decision)
        start = tail[0].start
        state = start.copy()
        self._checked = min(self._checked, len(start.events))
        chunks, cur = self._chunks[:j], _Chunk(start)
        for c in tail:
            for x in c.labels:
                dd = x.decision
                counted = dd is None or (dd not in self._decisions and dd not in self.seen)
                if counted:
                    step(state, x, self.cfg)
                    if dd is not None:
                        self._decisions.add(dd)
                cur.labels.append(x)
                cur.counted.append(counted)
                if len(cur.labels) >= CHUNK:
                    chunks.append(cur)
                    cur = _Chunk(state.copy())
        chunks.append(cur)
        self._chunks = chunks
        self.live = state
        self._fold()

    def _fold(self) -> None:
        """Drop the oldest chunks beyond ``CHUNKS``; their ids and counted decisions go
        to the digest set."""
        while len(self._chunks) > CHUNKS:
            old = self._chunks.pop(0)
            for x, counted in zip(old.labels, old.counted):
                self.seen.add(digest("id:" + x.id))
                self._ids.discard(x.id)
                if counted and x.decision is not None:
                    self.seen.add(x.decision)
                    self._decisions.discard(x.decision)
            self._folded = True

    def new_withdrawals(self) -> list[Event]:
        """Withdrawals in ``live`` not reported yet (each reported once)."""
        out = []
        for ev in self.live.events[self._checked :]:
            if ev.kind == "withdrawn" and (ev.time, ev.reason) not in self._announced:
                self._announced.add((ev.time, ev.reason))
                out.append(ev)
        self._checked = len(self.live.events)
        return out

    def labels(self) -> int:
        """Labels held in the window."""
        return sum(len(c.labels) for c in self._chunks)


__all__ = ["CHUNK", "CHUNKS", "COUNTED", "DUPLICATE", "REBUILD", "Label", "QuestionWindow"]
