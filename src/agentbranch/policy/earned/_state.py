"""One question's trust as a state machine: evidence records in, the threshold in force
out (``step`` one record, ``replay`` many).

The state is compact: the epoch's labels as counts per confidence cell and the drift
test as one running sum per alternative (``_statistics``), so a label costs O(1) and a
question's state has a fixed size however many labels it has seen. ``Settings`` is what
the machine reads of its configuration (``Earned`` is one), so nothing here imports it.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from agentbranch.policy.earned._drift import DriftState
from agentbranch.policy.earned._evidence import Evidence
from agentbranch.policy.earned._statistics import (
    Cells,
    OffGrid,
    learn_then_test_cells,
    predicted_entry_cells,
)
from agentbranch.policy.trust import Threshold, Trust


class Settings(Protocol):
    """What the state machine reads of its configuration (``Earned`` has all of it)."""

    precision: float
    level: float
    start_at: float | None
    candidates: Sequence[float]
    looks: Any  # a ``Looks`` schedule
    resume: bool
    second_walk_from: int | None

    @property
    def alpha(self) -> float: ...

    @property
    def drift_alpha(self) -> float: ...


EventKind = Literal["look", "earned", "lowered", "withdrawn"]


@dataclass(frozen=True)
class Event:
    """Something that changed (or was checked) in a question's trust.

    ``index``: records replayed before it (0-based position of the record that caused
    it); ``time``: that record's time; ``take_at``: the threshold after the event;
    ``labels``: labels in the epoch at that point; ``reason``: words for a person."""

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
    #: boundaries beyond the candidate grid and ``start_at``: thresholds in force
    #: recorded by another configuration (``OffGrid``)
    _extra: tuple[float, ...] = field(default=(), repr=False)
    _drift: DriftState | None = field(default=None, repr=False)  #: since the band opened
    #: a learned version's anytime-valid test (``learn.eprocess.Walks``; not checkpointed:
    #: versions keep no checkpoint, their states are replayed from the store)
    _bets: Any = field(default=None, repr=False)

    def band_share(self) -> float | None:
        """The share of the decisions the band ``confidence >= take_at`` holds, as this
        epoch's labels estimate it (each weighted ``1 / rate``: an audited take stands for
        the takes that were not audited); ``None`` while nothing is taken or nothing is
        counted, or when the estimate is not a finite number."""
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
        return self._evalue

    _evalue: float = 1.0
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

    @property
    def extra(self) -> tuple[float, ...]:
        """Cell boundaries beyond the grid and ``start_at`` (thresholds in force recorded
        by another configuration)."""
        return self._extra

    @extra.setter
    def extra(self, value: tuple[float, ...]) -> None:
        self._extra = tuple(value)

    def to_dict(self) -> dict[str, Any]:
        """The whole state as JSON-safe values (for a checkpoint; ``from_dict`` inverts)."""
        c, d = self._cells, self._drift
        return {
            "take_at": self.take_at,
            "trust": self.trust,
            "labels": self.labels,
            "looks": self.looks,
            "audit_right": self.audit_right,
            "audit_wrong": self.audit_wrong,
            "records": self.records,
            "question_id": self.question_id,
            "last": None if self.last is None else list(self.last),
            "events": [dataclasses.asdict(e) for e in self.events],
            "extra": list(self._extra),
            "evalue": self._evalue,
            "cells": None if c is None else c.to_dict(),
            "drift": None if d is None else d.to_dict(),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> TrustState:
        """The state ``to_dict`` wrote (``KeyError``/``ValueError`` when it does not fit)."""
        st = cls(take_at=raw["take_at"], trust=raw["trust"])
        for name in ("labels", "looks", "audit_right", "audit_wrong", "records", "question_id"):
            setattr(st, name, raw[name])
        st.last = None if raw["last"] is None else tuple(raw["last"])
        st.events = [Event(**e) for e in raw["events"]]
        st._extra, st._evalue = tuple(raw["extra"]), raw["evalue"]
        st._pair = Threshold(st.take_at, st.trust)
        if raw["cells"] is not None:
            st._cells = Cells.from_dict(raw["cells"])
        if raw["drift"] is not None:
            st._drift = DriftState.from_dict(raw["drift"])
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


def fresh_state(cfg: Settings) -> TrustState:
    """A question's state before its first record: ``start_at`` in force, or learning."""
    if cfg.start_at is not None:
        return TrustState(take_at=cfg.start_at, trust="fixed")
    return TrustState(take_at=None, trust="learning")


def boundaries(cfg: Settings, extra: Iterable[float] = ()) -> list[float]:
    """Cell boundaries of a question: the candidate grid, ``start_at`` and ``extra``."""
    values = set(cfg.candidates) | set(extra)
    if cfg.start_at is not None:
        values.add(cfg.start_at)
    return sorted(values)


@functools.lru_cache(maxsize=4096)
def _look_at(looks: Any, k: int) -> int:
    """Labels at which look ``k`` is due (``Looks.at``, remembered)."""
    return looks.at(k)


def step(st: TrustState, rec: Any, cfg: Settings) -> None:
    """Replay one record into ``st`` (the whole state machine). Raises ``OffGrid``
    (with ``st`` unchanged) when the record's threshold in force is not a cell boundary
    of ``st``: replay the question with it in ``_extra``."""
    if st._cells is None:
        st._cells = Cells(boundaries(cfg, st._extra))
    # The threshold the deciding process had in force (what decided how it was labelled).
    tau = getattr(rec, "take_at", st.take_at)
    st._cells.add(rec.confidence, rec.correct, 1.0 / rec.rate, tau, rec.band == "review")
    index = st.records
    st.records += 1
    st.last = rec.order
    st.question_id = rec.question_id
    st.labels += 1
    if rec.band == "take" and st.take_at is not None:
        if rec.correct:
            st.audit_right += 1
        else:
            st.audit_wrong += 1
        if st._drift is None:
            st._drift = DriftState(cfg.precision)
        st._evalue = st._drift.add(rec.correct)
        if st._drift.drifted(cfg.drift_alpha):
            _withdraw(st, cfg, index, rec.time)
            return
    if _bet(st, rec, cfg, index):
        return
    if st.labels < _look_at(cfg.looks, st.looks):
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
    kind: EventKind = "earned" if st.trust != "earned" else "lowered"
    was = st.take_at
    st._pair = Threshold(found, "earned")
    st.take_at, st.trust = found, "earned"
    reason = f"{what}: precision >= {cfg.precision:g} shown down to {found:g}"
    if was is not None:
        reason += f" (was {was:g})"
    st.events.append(Event(kind, index, rec.time, found, st.labels, reason))


def _bet(st: TrustState, rec: Any, cfg: Settings, index: int) -> bool:
    """A learned version's anytime-valid test (``cfg.anytime``: its entries and error,
    ``agentbranch.policy.earned.learn.eprocess``): bet on a label in proportion to
    ``floor / rate`` (``Evidence.floor``), checked at the error the label was made under
    (``Evidence.bet_alpha``, e-LOND: never below the version's own; absent: its own);
    whether it opened or lowered the band."""
    anytime = getattr(cfg, "anytime", None)
    if anytime is None or st.trust == "fixed":
        return False
    floor = getattr(rec, "floor", None)
    if floor is None or not 0.0 < floor <= rec.rate:
        return False  # how its labels were sampled is not known: no bet
    if st._bets is None:
        from agentbranch.policy.earned.learn.eprocess import Walks

        st._bets = Walks(cfg.candidates, anytime[0], cfg.precision, anytime[1])
    bar = getattr(rec, "bet_alpha", None)
    boost = bar / anytime[1] if bar is not None and bar > anytime[1] else 1.0
    st._bets.add(rec.confidence, rec.correct, floor / rec.rate, boost)
    found = st._bets.shown()
    if found is None or (st.take_at is not None and found >= st.take_at):
        return False  # (a bet never raises a threshold: the drift test withdraws)
    was = st.take_at
    kind: EventKind = "earned" if was is None else "lowered"
    st._pair = Threshold(found, "earned")
    st.take_at, st.trust = found, "earned"
    reason = (
        f"anytime-valid test at {st._bets.labels} labels bet on (alpha {anytime[1] * boost:.3g}): "
        f"precision >= {cfg.precision:g} shown down to {found:g} (walks from "
        f"{', '.join(f'{e:g}' for e in anytime[0])})"
    )
    if was is not None:
        reason += f" (was {was:g})"
    st.events.append(Event(kind, index, rec.time, found, st.labels, reason))
    return True


def _look(st: TrustState, cfg: Settings, alpha: float) -> tuple[float | None, str]:
    """One look's test at error ``alpha``: the threshold it shows (``None``: none) and
    how the event describes it. A look that resumes below an earned threshold walks on
    from there; one that has shown nothing yet walks from the top, and from the
    ``second_walk_from``-th look also from the predicted entry, each at ``alpha / 2``
    (the two walks' errors add up to ``alpha``; the lower threshold shown counts)."""
    shown = st.take_at if cfg.resume and st.trust == "earned" else None
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
    found = [
        t
        for t in (
            learn_then_test_cells(view, alpha=half, **data),
            learn_then_test_cells(view, alpha=half, entry=entry, **data),
        )
        if t is not None
    ]
    what += f", walks from the top and from {entry:g} at {half:.3g} each"
    return (min(found) if found else None), what


def _withdraw(st: TrustState, cfg: Settings, index: int, when: str) -> None:
    n = st.audit_right + st.audit_wrong
    reason = (
        f"{st.audit_right} of {n} audited takes agreed with the teacher since the band "
        f"opened (take_at={st.take_at:g}): the drift test shows precision below "
        f"{cfg.precision:g} at level {1 - cfg.drift_alpha:g} (e-value {st._evalue:.3g} >= "
        f"{1 / cfg.drift_alpha:.3g}); nothing is taken until trust is earned again"
    )
    st._pair = Threshold(None, "withdrawn")
    st.take_at, st.trust = None, "withdrawn"
    st.labels = st.looks = st.audit_right = st.audit_wrong = 0
    st._cells = None
    st._evalue = 1.0
    st._drift = None
    st._bets = None
    st.events.append(Event("withdrawn", index, when, None, 0, reason))


def replay(records: Sequence[Evidence], earned: Settings) -> TrustState:
    """The state ``earned`` computes from ``records``: sorted into replay order (time,
    id), each ``id`` counted once, and of records carrying the same ``decision`` (an
    identity of the decision they label) only the first."""
    st = fresh_state(earned)
    st._extra = tuple(
        sorted({t for r in records if (t := getattr(r, "take_at", None)) is not None})
    )
    ids: set[str] = set()
    decisions: set[str] = set()
    for rec in sorted(records, key=lambda r: r.order):
        if rec.id in ids:
            continue
        ids.add(rec.id)
        decision = getattr(rec, "decision", None)
        if decision is not None:
            if decision in decisions:
                continue
            decisions.add(decision)
        step(st, rec, earned)
    return st


__all__ = [
    "Event",
    "OffGrid",
    "Settings",
    "Threshold",
    "TrustState",
    "boundaries",
    "fresh_state",
    "replay",
    "step",
]
