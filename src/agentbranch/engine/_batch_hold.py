"""When the coalescer closes a batch that is not full: the hold rule of ``BatchingReader``.

A lone caller is read at once (unless it is a fresh pool's first thread); a burst is held
until no request arrived for the quiet gap, until every recent caller waits ("all in"),
until nobody who could still call is running ("settled"), or until the bound (half the
last read's time). docs/design.md gives the rule in full and why.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from agentbranch.engine.callers import pool_is_starting

__all__ = ["BUSY_SHARE", "HOLD_SHARE", "POOL_PEEK_S", "HoldRule"]

#: A burst's batch is held at most this share of the last read's time.
HOLD_SHARE = 0.5
#: How long a fresh pool's first caller waits for the pool's next thread to start.
POOL_PEEK_S = 0.0002
#: A quiet gap during which the process ran at least this share of one CPU was not
#: quiet: its threads were busy, and may be callers on their way.
BUSY_SHARE = 0.5

# The process's CPU clock (all its threads), next to the coalescer's wall clock.
_cpu_clock = time.process_time


class HoldRule:
    """The hold rule, mixed into ``BatchingReader`` (whose queue, lock and caller
    bookkeeping it reads). Each rule is one method, so a variant can leave one out."""

    inner: Any
    max_batch: int
    max_wait_s: float
    _auto_wait: bool
    _queue: Any
    _reading: Any
    _callers: Any
    _loops: Any
    _filled: Any
    _closed: bool
    _crowded: bool
    _holding: bool
    _starter: Any
    _last_arrival: float
    _last_arrival_cpu: float
    _last_read_s: float
    _last_read_size: int
    _last_callers: int

    def _hold(self) -> str:
        """Wait (holding ``_cond``) until the queued batch should close; say why (the
        rule is in the module docstring)."""
        if self._ready():
            return "full"
        if not self._auto_wait:  # an explicit window: always waited
            deadline = time.monotonic() + self.max_wait_s
            while not self._ready():
                left = deadline - time.monotonic()
                if left <= 0:
                    return "window"
                self._filled.wait(left)
            return "full"
        if self.max_wait_s <= 0 or not (self._crowded or self._pool_starting()):
            return "alone"
        # A caller ready to queue may wait one GIL switch interval (5 ms) for its turn,
        # so a shorter pause does not show that the burst is over.
        gap = max(self.max_wait_s, sys.getswitchinterval())
        start = time.monotonic()
        self._holding = True
        self._loops.look_again()  # a task busy when its loop last looked may wait now
        try:
            while not self._ready():
                if why := self._nobody_left():
                    return why
                at, why = self._close_at(start + self._hold_bound_s(gap), gap)
                left = at - time.monotonic()
                if left <= 0:
                    if why == "quiet" and self._busy():
                        self._quiet_from_now()  # not quiet: the gap starts again
                        continue
                    return why
                # wakes when full, when every caller is in, at exit, or at the time: an
                # arrival meanwhile moved the quiet gap later, so the loop computes the
                # next close time
                self._filled.wait(left)
        finally:
            self._holding = False
        return "full"

    def _pool_starting(self) -> bool:
        """Whether a lone caller is the first of a fresh pool's threads (``graph.batch``
        starting its runs): after ``POOL_PEEK_S`` for the pool to start its next
        thread, another call arrived or another thread of its pool is alive. A caller
        that is no pool's new thread is read at once, without the peek."""
        starter, self._starter = self._starter, None
        if starter is None:
            return False
        arrived = self._last_arrival
        self._filled.wait(POOL_PEEK_S)  # (releases the lock: callers may queue)
        return self._last_arrival != arrived or pool_is_starting(starter)

    def _hold_bound_s(self, gap: float) -> float:
        """How long a burst's batch may be held: ``HOLD_SHARE`` of the last read's
        time, or of what reading the requests queued now should take at the last read's
        time per request if that is longer (a burst larger than the last batch, say
        after lone reads, is not cut by a bound set for one request), never less than
        the quiet gap."""
        per_request = self._last_read_s / max(1, self._last_read_size)
        longest = max(self._last_read_s, per_request * len(self._queue))
        return max(gap, HOLD_SHARE * longest)

    def _company(self) -> bool:
        """Whether a caller arriving now is part of a burst: other callers' requests
        are queued or being read, or the last batch served
        several callers and a thread of theirs that came back before is expected back
        soon (a pool of threads cycling through its inputs: its first thread back would
        otherwise be read alone, and the rest of the pool would follow in a batch of
        their own, 1 + 5, 1 + 5 ...)."""
        if self._queue or any(item.wanted() for batch in self._reading for item in batch.items):
            return True
        return self._last_callers >= 2 and self._expected_back(self._since()) > time.monotonic()

    def _since(self) -> float:
        """Callers seen since then are "recent": three reads' time, at least 0.1 s."""
        return time.monotonic() - max(0.1, 3 * self._last_read_s)

    def _nobody_left(self) -> str | None:
        """Why nobody is left to arrive, so that waiting for a quiet gap would only cost
        time (``agentbranch.engine.callers``): ``"all in"`` (every thread that called
        lately waits for answers now, a pool that cycles), ``"settled"`` (nobody who
        could still call is running), else ``None``."""
        since = self._since()
        if self._all_in(since):
            return "all in"
        if self._settled(since):
            return "settled"
        return None

    def _loop_settled(self) -> None:
        """An event loop of our async callers settled (``LoopWatch``): a held batch may
        close now."""
        if self._holding and self._nobody_left():
            self._filled.notify_all()

    def _quiet_from_now(self) -> None:
        """A request arrived (or a quiet gap was busy): the quiet gap runs from now."""
        self._last_arrival = time.monotonic()
        self._last_arrival_cpu = _cpu_clock()

    def _busy(self) -> bool:
        """Whether the process ran at least ``BUSY_SHARE`` of a CPU since the quiet gap
        began: its threads were working, not waiting (starting their runs, taking turns
        on the GIL, collecting garbage), so no arrival does not mean none is coming."""
        wall = time.monotonic() - self._last_arrival
        return wall > 0 and _cpu_clock() - self._last_arrival_cpu >= BUSY_SHARE * wall

    def _ready(self) -> bool:
        return len(self._queue) >= self._limit() or self._closed

    def _limit(self) -> int:
        """Most requests in the next read: ``max_batch``, or the reader's
        ``pipelined_batch`` when smaller."""
        part = self._pipelined_part()
        return min(self.max_batch, part) if part else self.max_batch

    def _close_at(self, bound: float, gap: float) -> tuple[float, str]:
        """When a held burst's batch closes unless more arrives (and why): the quiet gap
        after the last arrival (or once the threads that
        are out should be back, if later), or the bound, whichever comes first."""
        quiet = self._last_arrival + gap
        quiet = max(quiet, self._expected_back(self._since()))
        return (quiet, "quiet") if quiet <= bound else (bound, "bound")

    # -- the rules, one method each ------------------------------------------------

    def _all_in(self, since: float) -> bool:
        """Every thread that called since ``since`` waits for answers now."""
        return self._callers.all_in(since)

    def _settled(self, since: float) -> bool:
        """Nobody who could still call is running (``agentbranch.engine.callers``)."""
        return self._callers.settled(since)

    def _expected_back(self, since: float) -> float:
        """When the threads that called since ``since`` and are out should be back."""
        return self._callers.back_by(since)

    def _pipelined_part(self) -> int | None:
        """The reader's ``pipelined_batch``: at most that many requests at once."""
        return self.inner.pipelined_batch
