"""One question's trust as a state machine: evidence records in, the threshold in force
out (``step`` one record, ``replay`` many). ``Earned`` (``agentbranch.policy.earned``) keeps
a ``TrustState`` per question and feeds it; the statistics each look and the drift test
run are in ``agentbranch.policy.thresholds``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from agentbranch.policy.evidence import Evidence, Trust
from agentbranch.policy.thresholds import Drift, learn_then_test, predicted_entry

if TYPE_CHECKING:
    from agentbranch.policy.earned import Earned

EventKind = Literal["look", "earned", "lowered", "withdrawn"]


@dataclass(frozen=True)
class Threshold:
    """The threshold in force for one question: ``take_at`` (``None``: nothing is taken)
    and ``trust``."""

    take_at: float | None
    trust: Trust


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
    _conf: list[float] = field(default_factory=list, repr=False)
    _ok: list[bool] = field(default_factory=list, repr=False)
    _w: list[float] = field(default_factory=list, repr=False)
    _tau: list[float | None] = field(default_factory=list, repr=False)  #: take_at in force
    _review: list[bool] = field(default_factory=list, repr=False)
    _drift: Drift | None = field(default=None, repr=False)  #: since the band opened

    @property
    def threshold(self) -> Threshold:
        return Threshold(self.take_at, self.trust)

    @property
    def drift_evalue(self) -> float:
        """The drift test's current e-value (withdrawal at ``1/alpha``)."""
        return self._evalue

    _evalue: float = 1.0


def step(st: TrustState, rec: Evidence, cfg: Earned) -> None:
    """Replay one record into ``st`` (the whole state machine)."""
    index = st.records
    st.records += 1
    st.last = rec.order
    st.question_id = rec.question_id
    st._conf.append(rec.confidence)
    st._ok.append(rec.correct)
    st._w.append(1.0 / rec.rate)
    # The threshold the deciding process had in force (what decided how it was labelled).
    st._tau.append(getattr(rec, "take_at", st.take_at))
    st._review.append(rec.band == "review")
    st.labels += 1
    if rec.band == "take" and st.take_at is not None:
        if rec.correct:
            st.audit_right += 1
        else:
            st.audit_wrong += 1
        if st._drift is None:
            st._drift = Drift(cfg.precision)
        st._evalue = st._drift.add(rec.correct)
        if st._drift.drifted(cfg.alpha):
            _withdraw(st, cfg, index, rec.time)
            return
    if not cfg.looks.due(st.labels, st.looks):
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
    st.take_at, st.trust = found, "earned"
    reason = f"{what}: precision >= {cfg.precision:g} shown down to {found:g}"
    if was is not None:
        reason += f" (was {was:g})"
    st.events.append(Event(kind, index, rec.time, found, st.labels, reason))


def _look(st: TrustState, cfg: Earned, alpha: float) -> tuple[float | None, str]:
    """One look's test at error ``alpha``: the threshold it shows (``None``: none) and
    how the event describes it. A look that resumes below an earned threshold walks on
    from there; one that has shown nothing yet walks from the top, and from the
    ``second_walk_from``-th look also from the predicted entry, each at ``alpha / 2``
    (the two walks' errors add up to ``alpha``; the lower threshold shown counts)."""
    shown = st.take_at if cfg.resume and st.trust == "earned" else None
    data = {
        "weights": st._w,
        "in_force": st._tau,
        "review": st._review,
        "precision": cfg.precision,
        "candidates": cfg.candidates,
    }
    what = f"look {st.looks} at {st.labels} labels (alpha {alpha:.3g})"
    half, entry = alpha / 2, None
    if shown is None and cfg.second_walk_from is not None and st.looks > cfg.second_walk_from:
        # Chosen from the confidences only: whether there is a second walk spends nothing.
        entry = predicted_entry(st._conf, alpha=half, **data)
    if entry is None:
        return learn_then_test(st._conf, st._ok, alpha=alpha, shown=shown, **data), what
    found = [
        t
        for t in (
            learn_then_test(st._conf, st._ok, alpha=half, **data),
            learn_then_test(st._conf, st._ok, alpha=half, entry=entry, **data),
        )
        if t is not None
    ]
    what += f", walks from the top and from {entry:g} at {half:.3g} each"
    return (min(found) if found else None), what


def _withdraw(st: TrustState, cfg: Earned, index: int, when: str) -> None:
    n = st.audit_right + st.audit_wrong
    reason = (
        f"{st.audit_right} of {n} audited takes agreed with the teacher since the band "
        f"opened (take_at={st.take_at:g}): the drift test shows precision below "
        f"{cfg.precision:g} at level {cfg.level:g} (e-value {st._evalue:.3g} >= "
        f"{1 / cfg.alpha:.3g}); nothing is taken until trust is earned again"
    )
    st.take_at, st.trust = None, "withdrawn"
    st.labels = st.looks = st.audit_right = st.audit_wrong = 0
    st._conf.clear()
    st._ok.clear()
    st._w.clear()
    st._tau.clear()
    st._review.clear()
    st._evalue = 1.0
    st._drift = None
    st.events.append(Event("withdrawn", index, when, None, 0, reason))


def replay(records: Sequence[Evidence], earned: Earned) -> TrustState:
    """The state ``earned`` computes from ``records`` (sorted into replay order)."""
    st = earned._fresh()
    for rec in sorted(records, key=lambda r: r.order):
        step(st, rec, earned)
    return st
