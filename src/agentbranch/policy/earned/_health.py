"""Audit health: audits that were due and never came count against earned trust.

``AuditHealth`` counts, per question, reader and model, each due audit as arrived or
missing and suspends the band while more than half of the last ``health_window`` due
audits are missing (the rule and why: its docstring); ``HealthStatus`` is one
question's snapshot.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

from agentbranch.policy.earned._drift import takes_to_withdraw

log = logging.getLogger("agentbranch")

#: The fall below the target precision whose withdrawal sets the window.
REFERENCE_DROP = 0.2
#: The smallest window (a very low target or level gives a tiny one).
MIN_WINDOW = 8
#: The largest window (bounds memory per question).
MAX_WINDOW = 10_000

Who = tuple[str, str | None, str | None]  # question id, reader, model


def health_window(precision: float, level: float) -> int:
    """Due audits the health is judged on (see ``AuditHealth``)."""
    fallen_to = max(precision - REFERENCE_DROP, precision / 2)
    return min(MAX_WINDOW, max(MIN_WINDOW, takes_to_withdraw(precision, fallen_to, level)))


@dataclass(frozen=True)
class HealthStatus:
    """One question's audit health (a snapshot): of the last ``window`` due audits,
    ``seen`` counted so far and ``missing`` of them; ``suspended`` whether its band is
    closed for it; ``arrived_total`` / ``missing_total`` over the process's life."""

    window: int
    seen: int
    missing: int
    suspended: bool
    arrived_total: int
    missing_total: int


class _Ring:
    __slots__ = ("outcomes", "missing", "suspended", "arrived_total", "missing_total")

    def __init__(self, window: int) -> None:
        self.outcomes: deque[bool] = deque(maxlen=window)  # True: missing
        self.missing = 0
        self.suspended = False
        self.arrived_total = 0
        self.missing_total = 0


class AuditHealth:
    """Per question (id, reader, model): whether its due audits arrive.

    An ``Earned`` band is watched by its audits: the drift test withdraws it after about
    ``takes_to_withdraw(precision, fallen_to, level)`` audited takes. A teacher that hangs
    or fails, or an audit queue that overflows, silently stretches that: with a share
    ``m`` of the due audits missing, drift is seen only after ``1/(1 - m)`` times as many
    taken decisions. So every audit that was due (sampled) is counted per question, reader
    and model as *arrived* (the teacher's answer was used) or *missing* (dropped on a full
    queue, timed out, raised, or answered outside the options), and the band is
    **suspended** — nothing taken, every decision to the fallbacks, trust ``"learning"`` —
    while the last ``window`` due audits hold more than half missing:

    * ``window`` is ``takes_to_withdraw(precision, fallen_to, level)`` for a fall of
      ``REFERENCE_DROP`` (0.2) below the target (``fallen_to`` at least half the target),
      at least ``MIN_WINDOW``: at 0.9 and level 0.95, 25 due audits (a fall to 0.7).
    * More than half of them missing means drift would be seen after more than twice the
      audited takes the drift test promises (the same factor of two within which the
      simulations withdraw in 95 % of streams): the band is suspended once more than
      ``window / 2`` of the last ``window`` due audits went missing (at 0.9/0.95: after
      13 missing audits, fewer than the 25 a working teacher needs to see a fall to 0.7).
    * It is open again once no more than a quarter of the last ``window`` are missing
      (hysteresis: a teacher failing about half the time does not flap). While suspended,
      nothing is taken, so the decisions the band would take are still sent to the
      teacher at the audit rate as *probes*: their answers only count here, and are
      neither evidence nor audit records (those decisions are labelled by the fallback).

    Each outcome and each check is O(1) (a ring of the last ``window`` outcomes and a count
    of the missing ones); ``Earned.threshold`` asks ``suspended`` for every decision. The
    health is this process's: it knows which of its own audits went missing (replicas
    sharing a store each watch their own). Suspending is logged (WARNING, once per
    suspension) and so is reopening (INFO).
    """

    def __init__(self, precision: float, level: float) -> None:
        self.precision = precision
        self.level = level
        self._window: int | None = None
        self._rings: dict[Who, _Ring] = {}
        self._suspended: set[Who] = set()
        self._lock = threading.Lock()

    @property
    def window(self) -> int:
        if self._window is None:
            self._window = health_window(self.precision, self.level)
        return self._window

    def suspended(self, question_id: str, reader: str | None, model: str | None) -> bool:
        """Whether this question's band is suspended (O(1); the decision path asks)."""
        return bool(self._suspended) and (question_id, reader, model) in self._suspended

    def arrived(self, question_id: str, reader: str | None, model: str | None) -> None:
        """A due audit's answer came and was used."""
        self._record((question_id, reader, model), False, "")

    def missing(
        self, question_id: str, reader: str | None, model: str | None, why: str = ""
    ) -> None:
        """A due audit never came (``why``: dropped, timed out, failed)."""
        self._record((question_id, reader, model), True, why)

    def status(self, question_id: str, reader: str | None, model: str | None) -> HealthStatus:
        """A snapshot of this question's audit health."""
        with self._lock:
            ring = self._rings.get((question_id, reader, model))
            if ring is None:
                return HealthStatus(self.window, 0, 0, False, 0, 0)
            return HealthStatus(
                self.window,
                len(ring.outcomes),
                ring.missing,
                ring.suspended,
                ring.arrived_total,
                ring.missing_total,
            )

    def _record(self, who: Who, missing: bool, why: str) -> None:
        window = self.window
        with self._lock:
            ring = self._rings.get(who)
            if ring is None:
                ring = self._rings[who] = _Ring(window)
            if len(ring.outcomes) == window:
                ring.missing -= ring.outcomes[0]
            ring.outcomes.append(missing)
            ring.missing += missing
            if missing:
                ring.missing_total += 1
            else:
                ring.arrived_total += 1
            if not ring.suspended and 2 * ring.missing > window:
                ring.suspended = True
                self._suspended.add(who)
                changed = "suspended"
            elif ring.suspended and 4 * ring.missing <= window:
                ring.suspended = False
                self._suspended.discard(who)
                changed = "reopened"
            else:
                return
            seen, lost = len(ring.outcomes), ring.missing
        if changed == "suspended":
            log.warning(
                "agentbranch.earned: trust in question %r suspended: %d of the last %d due "
                "audits never came (%s), so drift could no longer be seen within the "
                "audited takes the drift test promises; nothing is taken (every decision "
                "goes to the fallbacks) until audits arrive again",
                who[0],
                lost,
                seen,
                why or "dropped or failed",
            )
        else:
            log.info(
                "agentbranch.earned: audits of question %r arrive again (%d of the last %d "
                "missing): the band it earned is open again",
                who[0],
                lost,
                seen,
            )


__all__ = [
    "AuditHealth",
    "HealthStatus",
    "MAX_WINDOW",
    "MIN_WINDOW",
    "REFERENCE_DROP",
    "Who",
    "health_window",
]
