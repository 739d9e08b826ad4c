"""One question's trust as a state machine, and every question's trust fed from the
evidence store: records in, the threshold in force out.

``step`` feeds one record, ``replay`` many (a state has a fixed size however many labels
it saw). ``QuestionWindow`` keeps a question's recent labels so a late one re-runs only
what follows it; ``Ledger`` holds a window per evidence key (callers serialize ``feed``).
Each label counts once: ``DigestSet`` keeps an 8-byte digest of every id and decision
counted (a collision, about ``n² / 2⁶⁵``, errs toward fewer labels). Over 500 lines: the
machine, its window, the ledger and the digests are one piece of bookkeeping.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import logging
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from agentbranch.policy.earned._evidence import Evidence
from agentbranch.policy.earned._statistics import (
    Cells,
    DriftState,
    OffGrid,
    learn_then_test_cells,
    predicted_entry_cells,
)
from agentbranch.policy.trust import Threshold, Trust

log = logging.getLogger("agentbranch")


class Settings(Protocol):
    """What the state machine, the ledger and its checkpoint read of their configuration
    and evidence store (``Earned`` has all of it)."""

    precision: float
    level: float
    min_evidence: int
    start_at: float | None
    candidates: Sequence[float]
    looks: Any  # a ``Looks`` schedule
    second_walk_from: int | None
    anytime: tuple[tuple[float, ...], float] | None  # a learned version's bets (``_bet``)
    evidence: Any

    @property
    def alpha(self) -> float: ...

    @property
    def drift_alpha(self) -> float: ...


EventKind = Literal["look", "earned", "lowered", "withdrawn"]


@dataclass(frozen=True)
class Event:
    """Something that changed (or was checked) in a question's trust: ``index`` and
    ``time`` of the record that caused it, the threshold after it, the epoch's labels
    then, and the ``reason`` in words for a person."""

    kind: EventKind
    index: int
    time: str
    take_at: float | None
    labels: int
    reason: str


@dataclass
class TrustState:
    """One question's trust, recomputed from its evidence (see ``replay``)."""

    take_at: float | None
    trust: Trust
    labels: int = 0  #: labels in this epoch (since learning (re)started)
    looks: int = 0  #: looks done in this epoch
    audit_right: int = 0  #: audited takes that agreed with the teacher, since the band opened
    audit_wrong: int = 0
    records: int = 0  #: records replayed (all epochs)
    question_id: str | None = None  #: the question of the last record replayed
    events: list[Event] = field(default_factory=list)
    last: tuple[str, str] | None = None  #: order of the last record replayed
    #: this epoch's labels as counts per confidence cell (created at the first label)
    _cells: Cells | None = field(default=None, repr=False)
    #: boundaries beyond the grid: thresholds in force another configuration recorded
    _extra: tuple[float, ...] = field(default=(), repr=False)
    _drift: DriftState | None = field(default=None, repr=False)  #: since the band opened
    #: a learned version's anytime-valid test (``learn.eprocess.Walks``; not checkpointed)
    _bets: Any = field(default=None, repr=False)

    def band_share(self) -> float | None:
        """The share of the decisions the band ``confidence >= take_at`` holds, as this
        epoch's labels estimate it (each weighted ``1 / rate``); ``None`` while nothing is
        taken or counted, or when the estimate is not finite."""
        if self.take_at is None or self._cells is None:
            return None
        return self._cells.weighted_share(self.take_at)

    @property
    def threshold(self) -> Threshold:
        # Deciding threads read this without a lock while a label may be changing the
        # state: the pair published last is read in one step, never half of a change.
        pair = self._pair
        return pair if pair is not None else Threshold(self.take_at, self.trust)

    @property
    def drift_evalue(self) -> float:
        """The drift test's current e-value (withdrawal at ``1/alpha``)."""
        return 1.0 if self._drift is None else self._drift.evalue

    _pair: Threshold | None = field(default=None, repr=False, compare=False)

    def copy(self) -> TrustState:
        """An independent copy (a snapshot to resume from)."""
        return replace(
            self,
            events=list(self.events),
            _cells=None if self._cells is None else self._cells.copy(),
            _drift=None if self._drift is None else self._drift.copy(),
            _bets=None if self._bets is None else self._bets.copy(),
        )

    def to_dict(self) -> dict[str, Any]:
        """The whole state as JSON-safe values (for a checkpoint; ``from_dict`` inverts)."""
        c, d = self._cells, self._drift
        return {
            **{name: getattr(self, name) for name in _PLAIN},
            "last": None if self.last is None else list(self.last),
            "events": [dataclasses.asdict(e) for e in self.events],
            "extra": list(self._extra),
            "cells": None if c is None else c.to_dict(),
            "drift": None if d is None else dataclasses.asdict(d),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrustState:
        """The state ``to_dict`` wrote (``KeyError``/``ValueError`` when it does not fit)."""
        st = cls(**{name: raw[name] for name in _PLAIN})
        st.last = None if raw["last"] is None else tuple(raw["last"])
        st.events = [Event(**e) for e in raw["events"]]
        st._extra = tuple(raw["extra"])
        st._pair = Threshold(st.take_at, st.trust)
        if raw["cells"] is not None:
            st._cells = Cells.from_dict(raw["cells"])
        if raw["drift"] is not None:
            st._drift = DriftState(**raw["drift"])
        return st

    @property
    def nbytes(self) -> int:
        """Approximate memory of this state (fixed per question, whatever its labels)."""
        size = sys.getsizeof(self) + sys.getsizeof(self.events) + 200 * len(self.events)
        if self._cells is not None:
            c = self._cells
            size += sum(sys.getsizeof(x) for x in (c.n, c.right, c.weight, c.conf, c.in_force))
            size += 8 * len(c.boundaries)
        return size


#: The fields of a ``TrustState`` that are JSON values as they are (``to_dict``).
_PLAIN = tuple("take_at trust labels looks audit_right audit_wrong records question_id".split())


def fresh_state(cfg: Settings, learning: bool = False) -> TrustState:
    """A question's state before its first record: ``start_at`` in force (unless
    ``learning``), or learning."""
    if cfg.start_at is not None and not learning:
        return TrustState(take_at=cfg.start_at, trust="fixed")
    return TrustState(take_at=None, trust="learning")


def step(st: TrustState, rec: Any, cfg: Settings) -> None:
    """Replay one record into ``st`` (the whole state machine). Raises ``OffGrid``
    (with ``st`` unchanged) when the record's threshold in force is not a cell boundary
    of ``st``: replay the question with it in ``_extra``."""
    if st._cells is None:  # cell boundaries: the grid, ``start_at`` and ``_extra``
        start = () if cfg.start_at is None else (cfg.start_at,)
        st._cells = Cells(sorted({*cfg.candidates, *start, *st._extra}))
    # The threshold the deciding process had in force (what decided how it was labelled).
    st._cells.add(rec.confidence, rec.correct, 1.0 / rec.rate, rec.take_at, rec.band == "review")
    index = st.records
    st.records += 1
    st.last = rec.order
    st.question_id = rec.question_id
    st.labels += 1
    if rec.band == "take" and st.take_at is not None:
        st.audit_right += 1 if rec.correct else 0
        st.audit_wrong += 0 if rec.correct else 1
        if st._drift is None:
            st._drift = DriftState(cfg.precision)
        st._drift.add(rec.correct)
        if st._drift.drifted(cfg.drift_alpha):
            _withdraw(st, cfg, index, rec.time)
            return
    if _bet(st, rec, cfg, index):
        return
    if st.labels < cfg.looks.at(st.looks):
        return
    alpha = cfg.looks.alpha(cfg.alpha, st.looks)
    st.looks += 1
    found, what = _look(st, cfg, alpha)
    lower = found is not None and (st.take_at is None or st.trust == "fixed" or found < st.take_at)
    if not lower:
        if found is not None:
            shown = f"shown down to {found:g} only"
        elif st.trust == "earned":
            shown = f"nothing shown below {st.take_at:g}"
        else:
            shown = "nothing shown"
        st.events.append(Event("look", index, rec.time, st.take_at, st.labels, f"{what}: {shown}"))
        return
    _earn(st, found, index, rec.time, f"{what}: precision >= {cfg.precision:g} shown down to")


def _earn(st: TrustState, found: float, index: int, when: str, shown: str, how: str = "") -> None:
    """Put ``found`` in force (the event's reason: ``shown``, the threshold, ``how``)."""
    kind: EventKind = "earned" if st.trust != "earned" else "lowered"
    was = st.take_at
    st._pair = Threshold(found, "earned")
    st.take_at, st.trust = found, "earned"
    reason = f"{shown} {found:g}{how}" + ("" if was is None else f" (was {was:g})")
    st.events.append(Event(kind, index, when, found, st.labels, reason))


def _bet(st: TrustState, rec: Any, cfg: Settings, index: int) -> bool:
    """A learned version's anytime-valid test (``cfg.anytime``, ``learn.eprocess``): bet
    on a label in proportion to ``floor / rate``, checked at the label's ``bet_alpha``
    (never below the version's own); whether it opened or lowered the band."""
    anytime = cfg.anytime
    if anytime is None or st.trust == "fixed":
        return False
    floor = rec.floor
    if floor is None or not 0.0 < floor <= rec.rate:
        return False  # how its labels were sampled is not known: no bet
    if st._bets is None:
        from agentbranch.policy.earned.learn.eprocess import Walks

        st._bets = Walks(cfg.candidates, anytime[0], cfg.precision, anytime[1])
    bar = rec.bet_alpha
    boost = bar / anytime[1] if bar is not None and bar > anytime[1] else 1.0
    st._bets.add(rec.confidence, rec.correct, floor / rec.rate, boost)
    found = st._bets.shown()
    if found is None or (st.take_at is not None and found >= st.take_at):
        return False  # (a bet never raises a threshold: the drift test withdraws)
    shown = (
        f"anytime-valid test at {st._bets.labels} labels bet on (alpha {anytime[1] * boost:.3g}): "
        f"precision >= {cfg.precision:g} shown down to"
    )
    walks = ", ".join(f"{e:g}" for e in anytime[0])
    _earn(st, found, index, rec.time, shown, f" (walks from {walks})")
    return True


def _look(st: TrustState, cfg: Settings, alpha: float) -> tuple[float | None, str]:
    """One look's test at error ``alpha``: the threshold it shows (``None``: none) and
    its description. It resumes below an earned threshold; one that has shown nothing
    walks from the top and, from the ``second_walk_from``-th look, also from the
    predicted entry, each at ``alpha / 2`` (the lower threshold shown counts)."""
    shown = st.take_at if st.trust == "earned" else None
    assert st._cells is not None  # a look follows a label
    view = st._cells.view()
    data = {"precision": cfg.precision, "candidates": cfg.candidates}
    what = f"look {st.looks} at {st.labels} labels (alpha {alpha:.3g})"
    half, entry = alpha / 2, None
    if shown is None and cfg.second_walk_from is not None and st.looks > cfg.second_walk_from:
        # Chosen from the confidences only: whether there is a second walk spends nothing.
        entry = predicted_entry_cells(view, alpha=half, **data)
    if entry is None:
        return learn_then_test_cells(view, alpha=alpha, shown=shown, **data), what
    top = learn_then_test_cells(view, alpha=half, **data)
    entered = learn_then_test_cells(view, alpha=half, entry=entry, **data)
    found = [t for t in (top, entered) if t is not None]
    what += f", walks from the top and from {entry:g} at {half:.3g} each"
    return (min(found) if found else None), what


def _withdraw(st: TrustState, cfg: Settings, index: int, when: str) -> None:
    n = st.audit_right + st.audit_wrong
    reason = (
        f"{st.audit_right} of {n} audited takes agreed with the teacher since the band "
        f"opened (take_at={st.take_at:g}): the drift test shows precision below "
        f"{cfg.precision:g} at level {1 - cfg.drift_alpha:g} (e-value {st.drift_evalue:.3g} >= "
        f"{1 / cfg.drift_alpha:.3g}); nothing is taken until trust is earned again"
    )
    st._pair = Threshold(None, "withdrawn")
    st.take_at, st.trust = None, "withdrawn"
    st.labels = st.looks = st.audit_right = st.audit_wrong = 0
    st._cells = st._drift = st._bets = None
    st.events.append(Event("withdrawn", index, when, None, 0, reason))


def replay(records: Sequence[Evidence], earned: Settings) -> TrustState:
    """The state ``earned`` computes from ``records``: sorted into replay order (time,
    id), each ``id`` counted once, and of records carrying the same ``decision`` (an
    identity of the decision they label) only the first."""
    st = fresh_state(earned)
    st._extra = tuple(sorted({r.take_at for r in records} - {None}))
    ids: set[str] = set()
    decisions: set[str] = set()
    for rec in sorted(records, key=lambda r: r.order):
        if rec.id not in ids and (rec.decision is None or rec.decision not in decisions):
            step(st, rec, earned)
            if rec.decision is not None:
                decisions.add(rec.decision)
        ids.add(rec.id)
    return st


#: Digests kept in the Python set before they are merged into the arrays.
RECENT = 4096


def digest(text: str) -> int:
    """The 8-byte digest of ``text`` (BLAKE2b) as an unsigned integer."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class DigestSet:
    """A set of digests (``digest``) in about 8 bytes each (see the module doc)."""

    __slots__ = ("_big", "_small", "_recent")

    def __init__(self) -> None:
        import numpy as np  # here: `import agentbranch` loads no numpy

        self._big = np.empty(0, dtype=np.uint64)
        self._small = np.empty(0, dtype=np.uint64)
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._big) + len(self._small) + len(self._recent)

    def __contains__(self, d: int) -> bool:
        if d in self._recent:
            return True
        for arr in (self._small, self._big):
            key = arr.dtype.type(d)  # (a uint64)
            i = int(arr.searchsorted(key))
            if i < len(arr) and arr[i] == key:
                return True
        return False

    def add(self, d: int) -> None:
        import numpy as np  # here: `import agentbranch` loads no numpy

        self._recent.add(d)
        if len(self._recent) >= RECENT:
            fresh = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
            self._small = np.union1d(self._small, fresh)
            self._recent = set()
            if len(self._small) * 8 >= max(len(self._big), RECENT * 8):
                self._big = np.union1d(self._big, self._small)
                self._small = np.empty(0, dtype=np.uint64)

    @property
    def nbytes(self) -> int:
        """Memory held (arrays and the recent set, approximately)."""
        return int(self._big.nbytes + self._small.nbytes) + 72 * len(self._recent)

    def encode(self, more: Iterable[int] = ()) -> str:
        """Every digest and ``more``, sorted, as base64 text (for a checkpoint)."""
        import numpy as np  # here: `import agentbranch` loads no numpy

        fresh = np.fromiter([*self._recent, *more], dtype=np.uint64)
        every = np.union1d(np.union1d(self._big, self._small), fresh)
        return base64.b64encode(every.astype("<u8").tobytes()).decode("ascii")

    @classmethod
    def decode(cls, text: str) -> DigestSet:
        """The set ``encode`` wrote."""
        import numpy as np  # here: `import agentbranch` loads no numpy

        new = cls()
        new._big = np.unique(np.frombuffer(base64.b64decode(text), dtype="<u8").astype(np.uint64))
        return new


#: Labels per chunk (a late label re-runs at most its chunk and the ones after it) ...
CHUNK = 32
#: ... and chunks kept: a label may arrive up to CHUNK × (CHUNKS - 1) labels late.
CHUNKS = 16

COUNTED, DUPLICATE, REBUILD = "counted", "duplicate", "rebuild"


@dataclass(slots=True, eq=False)
class Label:
    """The fields of an evidence record the state machine reads (a window keeps these,
    about 250 bytes, instead of the record); a checkpoint keeps the first nine."""

    id: str
    time: str
    question_id: str
    band: str
    confidence: float
    correct: bool
    rate: float
    take_at: float | None
    decision: int | None  # digest of (key, decision), or None
    floor: float | None = None  # (learn=True: eprocess bets ...)
    bet_alpha: float | None = None  # (... and the bar they cross)

    @classmethod
    def of(cls, rec: Any, decision: int | None) -> Label:
        """The fields of evidence record ``rec``, counted under ``decision``."""
        return cls(**{name: getattr(rec, name) for name in _READ}, decision=decision)

    @property
    def order(self) -> tuple[str, str]:
        return (self.time, self.id)

    def to_list(self) -> list[Any]:
        """The checkpointed fields as a JSON-safe list (``Label(*fields)`` inverts)."""
        return [getattr(self, f.name) for f in dataclasses.fields(self)[:9]]


#: The fields ``Label.of`` reads of a record (all but the decision's digest).
_READ = tuple(f.name for f in dataclasses.fields(Label) if f.name != "decision")


@dataclass(slots=True, eq=False)
class _Chunk:
    start: TrustState  # the state before this chunk's first label (never mutated)
    labels: list[Label] = field(default_factory=list)
    counted: list[bool] = field(default_factory=list)  # per label: whether it counted

    def decisions(self) -> list[int]:
        """The decision digests this chunk counted."""
        return [
            x.decision for x, k in zip(self.labels, self.counted) if k and x.decision is not None
        ]


class QuestionWindow:
    """One question's live ``TrustState`` and its last ``CHUNKS × CHUNK`` labels in
    chunks, each with a snapshot of the state before it (not thread-safe).

    Thresholds follow the records in replay order (time, id), so a late label is inserted
    into its chunk and the state re-run from that chunk's snapshot; one older than the
    whole window answers ``REBUILD`` (the caller replays the question from its store). A
    record whose ``id`` was seen is dropped, and of records with the same ``decision``
    only the first in replay order counts.
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
        start._extra = tuple(extra)
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
        dropped = self._chunks[:-keep]
        folded = [digest("id:" + x.id) for c in dropped for x in c.labels]
        folded += [d for c in dropped for d in c.decisions()]
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
            "seen": self.seen.encode(folded),
            "folded": self._folded or bool(dropped),
            "announced": sorted(list(a) for a in self._announced),
        }

    @classmethod
    def from_dict(
        cls, key: str, cfg: Settings, fresh: Callable[[], TrustState], raw: dict[str, Any]
    ) -> QuestionWindow:
        """The window ``to_dict`` wrote (``KeyError``/``ValueError`` when it does not fit)."""
        w = cls(key, cfg, fresh)
        w._chunks = chunks = [
            _Chunk(
                TrustState.from_dict(c["start"]),
                [Label(*fields) for fields in c["labels"]],
                list(c["counted"]),
            )
            for c in raw["chunks"]
        ]
        w.live = TrustState.from_dict(raw["live"])
        w._ids = {x.id for c in chunks for x in c.labels}
        w._decisions = {d for c in chunks for d in c.decisions()}
        w.seen = DigestSet.decode(raw["seen"])
        w._folded = raw["folded"]
        w._announced = {tuple(a) for a in raw["announced"]}
        w._checked = len(w.live.events)
        return w

    @property
    def extra(self) -> tuple[float, ...]:
        return self._chunks[0].start._extra

    def add(self, rec: Any) -> str:
        """Feed one record: ``COUNTED`` (or a repeat of a decision), ``DUPLICATE`` or
        ``REBUILD`` (older than the window); ``OffGrid`` when it needs a new boundary."""
        if rec.id in self._ids:
            return DUPLICATE
        last = self._chunks[-1]
        newest = next((c.labels[-1].order for c in reversed(self._chunks) if c.labels), None)
        in_order = newest is None or rec.order > newest
        # A copy of a folded record sorts where it did, before the window: only a record
        # that is not in order can be one.
        if not in_order and digest("id:" + rec.id) in self.seen:
            return DUPLICATE
        dd = None if rec.decision is None else digest(f"decision:{self.key}:{rec.decision}")
        label = Label.of(rec, dd)
        if in_order:
            counted = self._step(self.live, label)
            self._ids.add(label.id)
            last.labels.append(label)
            last.counted.append(counted)
            if len(last.labels) >= CHUNK:
                self._chunks.append(_Chunk(self.live.copy()))
                self._fold()
            return COUNTED
        if self._folded and label.order < self._chunks[0].labels[0].order:
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

    def _step(self, state: TrustState, label: Label) -> bool:
        """Step ``state`` with ``label`` unless its decision was counted; whether it was."""
        dd = label.decision
        counted = dd is None or (dd not in self._decisions and dd not in self.seen)
        if counted:
            step(state, label, self.cfg)
            if dd is not None:
                self._decisions.add(dd)
        return counted

    def _rerun(self, j: int) -> None:
        """Re-run the state from chunk ``j``'s snapshot over every label after it."""
        tail = self._chunks[j:]
        for c in tail:
            self._decisions.difference_update(c.decisions())
        start = tail[0].start
        state = start.copy()
        self._checked = min(self._checked, len(start.events))
        chunks, cur = self._chunks[:j], _Chunk(start)
        for c in tail:
            for x in c.labels:
                cur.labels.append(x)
                cur.counted.append(self._step(state, x))
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
            for x in old.labels:
                self.seen.add(digest("id:" + x.id))
                self._ids.discard(x.id)
            for d in old.decisions():
                self.seen.add(d)
                self._decisions.discard(d)
            self._folded = True

    def announce(self, loud: bool) -> None:
        """Mark the withdrawals in ``live`` not reported yet reported (each once), each
        logged (WARNING) when ``loud``."""
        for ev in self.live.events[self._checked :]:
            if ev.kind == "withdrawn" and (ev.time, ev.reason) not in self._announced:
                self._announced.add((ev.time, ev.reason))
                if loud:
                    log.warning(
                        "agentbranch.earned: trust in question %r withdrawn: %s",
                        self.live.question_id,
                        ev.reason,
                    )
        self._checked = len(self.live.events)


class Ledger:
    """The windows of every question the store (or this process) holds evidence of."""

    def __init__(self, earned: Settings) -> None:
        self.earned = earned
        self.windows: dict[str, QuestionWindow] = {}
        #: After the store was lost, every question restarts as learning, even with start_at.
        self.learning_only = False
        #: The evidence keys kept (``None``: every key; a learned version's copy: its own).
        self.only: set[str] | None = None

    def fresh(self) -> TrustState:
        """A new question's state (learning only, once the store was lost)."""
        return fresh_state(self.earned, self.learning_only)

    def window(self, key: str) -> QuestionWindow:
        w = self.windows.get(key)
        if w is None:
            w = self.windows[key] = QuestionWindow(key, self.earned, self.fresh)
        return w

    def feed(self, records: Iterable[Any], *, announce: bool = True) -> None:
        """Count ``records`` (any order; each id once)."""
        for rec in records:
            if self.only is not None and rec.key not in self.only:
                continue
            w = self.window(rec.key)
            try:
                result = w.add(rec)
            except OffGrid as e:
                self.rebuild(
                    rec.key,
                    (*w.extra, e.value),
                    why=f"threshold in force {e.value:g} is not on this Earned's grid",
                )
                continue
            if result == REBUILD:
                self.rebuild(rec.key, w.extra, why="a label arrived older than its recent window")
                continue
            w.announce(announce)

    def rebuild(self, key: str, extra: tuple[float, ...], *, why: str) -> None:
        """Replay question ``key`` from every record the store holds of it."""
        old = self.windows.get(key)
        records = self.earned.evidence.load(key)
        log.info(
            "agentbranch.earned: question %s replayed from its %d stored records (%s)",
            key,
            len(records),
            why,
        )
        while True:
            w = QuestionWindow(key, self.earned, self.fresh, extra=tuple(sorted(set(extra))))
            try:
                for rec in records:
                    if w.add(rec) == REBUILD:  # pragma: no cover - sorted input is never late
                        raise AssertionError("sorted replay went back in time")
                break
            except OffGrid as e:
                extra = (*extra, e.value)
        w._announced = set(old._announced) if old is not None else set()
        w.announce(old is not None)  # withdrawals this process had not announced yet
        self.windows[key] = w

    def reset(self) -> None:
        """Forget every question (the store was lost): all learn again from nothing."""
        self.windows = {}
        self.learning_only = True


__all__ = [
    "Event",
    "Settings",
    "TrustState",
    "fresh_state",
    "replay",
    "step",
    "DigestSet",
    "digest",
    "CHUNK",
    "CHUNKS",
    "QuestionWindow",
    "Ledger",
]
