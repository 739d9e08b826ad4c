"""Every question's trust, fed from the evidence store: what ``Earned`` reads thresholds
from.

``Ledger`` holds one ``QuestionWindow`` per evidence key and feeds it the records the
store returns (``read_new``: only what was appended since the last read, by any process)
and the ones this process makes. A label costs O(1) (a late one re-runs part of its
question's recent window); a label older than the window, or one whose threshold in
force needs a new cell boundary, replays that question from the store (rare; logged at
INFO). Callers serialize ``feed``/``catch_up`` (``Earned`` holds its feed lock).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from agentbranch.policy.earned._state import Settings, TrustState, fresh_state
from agentbranch.policy.earned._statistics import OffGrid
from agentbranch.policy.earned._window import DUPLICATE, REBUILD, QuestionWindow


class Source(Settings, Protocol):
    """What the ledger reads: the state machine's settings and the evidence store."""

    evidence: Any


log = logging.getLogger("agentbranch")


class Ledger:
    """The windows of every question the store (or this process) holds evidence of."""

    def __init__(self, earned: Source) -> None:
        self.earned = earned
        self.windows: dict[str, QuestionWindow] = {}
        #: After the store was lost while serving, every question restarts as learning
        #: (nothing taken), even with ``start_at``.
        self.learning_only = False
        self.duplicates = 0  #: records dropped because their id was already counted

    def fresh(self) -> TrustState:
        """A new question's state (learning only, once the store was lost)."""
        if self.learning_only:
            return TrustState(take_at=None, trust="learning")
        return fresh_state(self.earned)

    def window(self, key: str) -> QuestionWindow:
        w = self.windows.get(key)
        if w is None:
            w = self.windows[key] = QuestionWindow(key, self.earned, self.fresh)
        return w

    def feed(self, records: Iterable[Any], *, announce: bool = True) -> None:
        """Count ``records`` (any order; each id once)."""
        for rec in records:
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
            if result == DUPLICATE:
                self.duplicates += 1
            elif result == REBUILD:
                self.rebuild(rec.key, w.extra, why="a label arrived older than its recent window")
                continue
            news = w.new_withdrawals()
            if announce:
                for ev in news:
                    log.warning(
                        "agentbranch.earned: trust in question %r withdrawn: %s",
                        w.live.question_id,
                        ev.reason,
                    )

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
        w.announced_as(old)
        for ev in w.new_withdrawals():
            if old is not None:  # withdrawals this process had not announced yet
                log.warning(
                    "agentbranch.earned: trust in question %r withdrawn: %s",
                    w.live.question_id,
                    ev.reason,
                )
        self.windows[key] = w

    def reset(self) -> None:
        """Forget every question (the store was lost): all learn again from nothing."""
        self.windows = {}
        self.learning_only = True


__all__ = ["Ledger", "Source"]
