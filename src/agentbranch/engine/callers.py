"""Who calls a coalescer: the threads waiting for answers, the ones that called lately,
and how long each takes to come back after its answer.

``BatchingReader`` asks it two things (under its own lock) while it holds a burst's
batch open:

* **all in**: every thread that called lately waits for answers now, and at least half
  of them came back before (the pool cycles), so nobody is left to arrive: close the
  batch at once instead of waiting for a quiet gap. A pool still starting its threads
  (a fresh ``ThreadPoolExecutor(32)``: one new thread every few milliseconds, the first
  one back for a second input while the rest start) has mostly threads seen once: more
  of them may be on their way, so the quiet gap decides;
* **back by**: when the threads that are out (answered, working on their next input)
  should be back, judged by how long each took to come back before. A pool of threads
  cycling through more inputs than it has threads (``graph.batch`` at LangGraph's
  default concurrency, a web server's workers) comes back in full every round; a
  thread seen only once has no turnaround yet and is never waited for.

And, when a caller finds nobody in flight, whether it may be a fresh pool's first thread
(``is_new``, ``pool_thread``, ``pool_is_starting``): a ``ThreadPoolExecutor`` thread
(named ``<pool>_<n>``) that never called before, with another thread of its pool alive.

Async callers share their event loop's thread, so they cannot be told apart: a recent
async caller turns both answers off (``async_at``).
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Hashable

#: A thread is expected back within this many of its own last turnarounds.
TURNAROUND_MARGIN = 2.0


def pool_thread(thread: threading.Thread) -> bool:
    """Whether ``thread`` is named as a pool's: ``ThreadPoolExecutor`` names its threads
    ``<prefix>_<n>`` (LangGraph's ``graph.batch``, a ``ToolNode``'s tool calls,
    ``executor.map``)."""
    prefix, sep, number = thread.name.rpartition("_")
    return bool(sep and prefix and number.isdigit())


def pool_is_starting(thread: threading.Thread) -> bool:
    """Whether another live thread shares pool thread ``thread``'s pool. A pool of one
    thread (one tool call of a ``ToolNode``) or a thread of no pool is not starting."""
    if not pool_thread(thread):
        return False
    mates = thread.name.rpartition("_")[0] + "_"
    return any(t is not thread and t.name.startswith(mates) for t in threading.enumerate())


class CallerThreads:
    """The sync caller threads of one coalescer (not thread-safe: its lock guards it).

    Threads are keyed by their ``threading.Thread`` object, not their ident: the OS
    reuses idents, and a fresh pool's thread would pass for one that came back."""

    def __init__(self) -> None:
        self.seen: dict[Hashable, float] = {}  # thread -> when it last called
        self.waiting: Counter[Hashable] = Counter()  # thread -> its calls in flight
        self.answered: dict[Hashable, float] = {}  # thread -> when its last call ended
        self.turnaround: dict[Hashable, float] = {}  # thread -> answer-to-next-call seconds
        self.async_at = float("-inf")  # when an async caller last called
        # Every live thread that ever called (weakly: a finished pool's threads go).
        self.known: weakref.WeakSet[Hashable] = weakref.WeakSet()
        self._known_keys: set[Hashable] = set()  # keys that cannot be weakly referenced

    def is_new(self, thread: Hashable | None) -> bool:
        """Whether ``thread`` never called before (a fresh pool's thread, a new
        ``ToolNode`` call's thread); an async caller (``None``) is never new."""
        if thread is None:
            return False
        return thread not in self.known and thread not in self._known_keys

    def arrive(self, thread: Hashable | None, now: float) -> None:
        """A call from ``thread`` (``None``: an async caller)."""
        if thread is None:
            self.async_at = now
            return
        if thread in self.answered and not self.waiting[thread]:
            self.turnaround[thread] = now - self.answered[thread]
        self.seen[thread] = now
        self.waiting[thread] += 1
        try:
            self.known.add(thread)
        except TypeError:
            self._known_keys.add(thread)

    def leave(self, thread: Hashable | None, now: float) -> None:
        """A call of ``thread`` ended (answered, failed or given up)."""
        if thread is None:
            return
        self.waiting[thread] -= 1
        if self.waiting[thread] <= 0:
            del self.waiting[thread]
            self.answered[thread] = now

    def recent(self, since: float) -> list[Hashable]:
        """The threads waiting now or seen since ``since``; older ones are forgotten."""
        for t in [t for t, at in self.seen.items() if at < since and t not in self.waiting]:
            del self.seen[t]
            self.answered.pop(t, None)
            self.turnaround.pop(t, None)
        return list(self.seen)

    def all_in(self, since: float) -> bool:
        """Whether every recent thread (two or more) waits for answers now, and at least
        half of them came back before: a pool that cycles. Threads that each call once
        (a fresh pool starting up, even with its first thread back already) leave it
        off: more of them may not have started yet."""
        recent = self.recent(since)
        if len(recent) < 2 or self.async_at >= since:
            return False
        back = sum(t in self.turnaround for t in recent)
        return all(t in self.waiting for t in recent) and back > 0 and 2 * back >= len(recent)

    def back_by(self, since: float) -> float:
        """When the recent threads that are out and came back before should be back
        (``TURNAROUND_MARGIN`` of their last turnaround after their answer); ``-inf``
        when none is expected."""
        if self.async_at >= since:
            return float("-inf")
        return max(
            (
                self.answered[t] + TURNAROUND_MARGIN * self.turnaround[t]
                for t in self.recent(since)
                if t not in self.waiting and t in self.turnaround and t in self.answered
            ),
            default=float("-inf"),
        )
