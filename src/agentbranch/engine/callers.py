"""Who calls a coalescer: the threads and event loops waiting for answers, the ones that
called lately, and how long each takes to come back after its answer.

``BatchingReader``'s hold rule (``agentbranch.engine.batching``) asks it, under the
coalescer's lock, whether every recent caller waits ("all in"), when the callers that
are out should be back ("back by"), whether nobody who could still call is running
("settled"; ``LoopWatch`` has each event loop look at itself, on its own thread), and
whether a lone caller may be a fresh pool's first thread (``is_new``, ``pool_thread``,
``pool_is_starting``). docs/design.md, "The coalescer: when a batch closes", gives the
rules in full.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SWEEP_AT",
    "TURNAROUND_MARGIN",
    "WAIT_DEPTH",
    "CallerThreads",
    "LoopCalls",
    "LoopWatch",
    "executor_of",
    "loop_has_ready",
    "loop_waits_on",
    "pool_all_waiting",
    "pool_is_starting",
    "pool_thread",
]

#: A thread is expected back within this many of its own last turnarounds.
TURNAROUND_MARGIN = 2.0
#: ``CallerThreads.seen`` is first swept of ended threads at this size.
SWEEP_AT = 64


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


def executor_of(thread: Any) -> ThreadPoolExecutor | None:
    """The ``ThreadPoolExecutor`` whose worker ``thread`` is, or ``None`` (a thread of no
    pool, or a Python whose executor starts its workers otherwise). CPython starts each
    worker as ``Thread(target=_worker, args=(weakref to the executor, ...))`` (3.11 to
    3.14), so the thread's arguments lead to its pool."""
    args = getattr(thread, "_args", None)
    if not isinstance(args, tuple) or not args or not isinstance(args[0], weakref.ref):
        return None
    executor = args[0]()
    if not isinstance(executor, ThreadPoolExecutor):
        return None
    if not isinstance(getattr(executor, "_threads", None), set):
        return None
    if not isinstance(getattr(executor, "_max_workers", None), int):
        return None
    return executor


def pool_all_waiting(executor: ThreadPoolExecutor, waiting: int) -> bool:
    """Whether ``waiting`` distinct threads of ``executor`` wait for answers and that is
    every thread it may start (``max_workers``): no thread of this pool can call until
    they are answered. Counted, not looked up in ``executor._threads``: the executor
    adds a thread there only after the thread started, and a new thread may call
    before that."""
    return waiting >= executor._max_workers


def loop_waits_on(loop: Any, ours: set[int]) -> bool:
    """Whether every task of event ``loop`` waits for one of the futures whose ids are
    ``ours``, directly or through the tasks and ``gather``s it awaits. A task waiting on
    anything else (I/O such as a checkpointer's write, a timer, an ``asyncio.wait``)
    may still call, so the loop is not settled. Called on the loop's own thread."""
    try:
        tasks = asyncio.all_tasks(loop)
    except RuntimeError:  # the loop's task set changed while read
        return False
    return bool(tasks) and all(_waits_on(task, ours, 0) for task in tasks)


#: How deep ``_waits_on`` follows tasks awaiting tasks (a LangGraph run awaits its node's
#: task, which awaits the read: 2).
WAIT_DEPTH = 16


def _waits_on(future: Any, ours: set[int], depth: int) -> bool:
    if id(future) in ours:
        return True
    if depth >= WAIT_DEPTH:
        return False
    if isinstance(future, asyncio.Task):
        waiter = getattr(future, "_fut_waiter", None)  # what the task awaits now
        return waiter is not None and _waits_on(waiter, ours, depth + 1)
    children = getattr(future, "_children", None)  # a gather's
    if isinstance(children, list):
        return all(c.done() or _waits_on(c, ours, depth + 1) for c in children)
    return False


def loop_has_ready(loop: Any) -> bool | None:
    """Whether event loop ``loop`` has callbacks ready to run (its tasks may still
    arrive), or ``None`` when it cannot be told (a loop without asyncio's ready queue)."""
    ready = getattr(loop, "_ready", None)
    return None if ready is None else bool(ready)


@dataclass
class LoopCalls:
    """The async calls of one event loop."""

    waiting: int = 0  # calls in flight
    arrived: float = float("-inf")  # when one last called
    arrivals: int = 0  # calls so far
    settled_after: int = -1  # ``arrivals`` when the loop last had nothing left to run
    checking: bool = False  # a settle check is scheduled on the loop
    unknown: bool = False  # the loop cannot be looked into
    futures: set[int] = field(default_factory=set)  # ids of the futures its calls await


class CallerThreads:
    """The callers of one coalescer: its sync threads, and the event loops of its async
    callers (not thread-safe: the coalescer's lock guards it).

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
        # Each recent thread's pool (``executor_of``), weakly: looked up once per thread.
        self.pools: dict[Hashable, weakref.ref[ThreadPoolExecutor] | None] = {}
        # The event loops whose tasks called (weakly: a finished asyncio.run's loop goes).
        self.loops: weakref.WeakKeyDictionary[Any, LoopCalls] = weakref.WeakKeyDictionary()
        # Per pool (by id): its executor, weakly, and how many of its threads wait. A
        # quick "no" for ``settled`` while a burst arrives, asked on every arrival.
        self._pool_waiting: dict[int, tuple[weakref.ref[ThreadPoolExecutor], int]] = {}
        # ``seen`` is swept of ended threads when it grows past this (``_sweep``).
        self._sweep_at = SWEEP_AT

    def is_new(self, thread: Hashable | None) -> bool:
        """Whether ``thread`` never called before (a fresh pool's thread, a new
        ``ToolNode`` call's thread); an async caller (``None``) is never new."""
        if thread is None:
            return False
        return thread not in self.known and thread not in self._known_keys

    def arrive(self, thread: Hashable | None, now: float, loop: Any = None) -> None:
        """A call from ``thread`` (``None``: an async caller, of event ``loop``)."""
        if thread is None:
            self.async_at = now
            if loop is not None:
                calls = self.loops.setdefault(loop, LoopCalls())
                calls.waiting += 1
                calls.arrived = now
                calls.arrivals += 1
            return
        if thread in self.answered and not self.waiting[thread]:
            self.turnaround[thread] = now - self.answered[thread]
        if len(self.seen) >= self._sweep_at:
            self._sweep()
        self.seen[thread] = now
        self.waiting[thread] += 1
        if thread not in self.pools:
            executor = executor_of(thread)
            self.pools[thread] = None if executor is None else weakref.ref(executor)
        if self.waiting[thread] == 1:
            self._count_pool(thread, +1)
        try:
            self.known.add(thread)
        except TypeError:
            self._known_keys.add(thread)

    def leave(self, thread: Hashable | None, now: float, loop: Any = None) -> None:
        """A call of ``thread`` (or of event ``loop``) ended (answered, failed or given
        up)."""
        if thread is None:
            calls = self.loops.get(loop) if loop is not None else None
            if calls is not None:
                calls.waiting -= 1
            return
        self.waiting[thread] -= 1
        if self.waiting[thread] <= 0:
            del self.waiting[thread]
            self.answered[thread] = now
            self._count_pool(thread, -1)

    def _count_pool(self, thread: Hashable, change: int) -> None:
        """Count ``thread`` in (or out of) its pool's waiting threads, keyed by the
        executor's id. Only a quick "no" rests on these counts (``_pool_short``), never
        a "yes": a count off for a pool collected meanwhile costs at most a quiet gap."""
        ref = self.pools.get(thread)
        if ref is None:
            return
        executor = ref()
        if executor is None:
            return
        _, waiting = self._pool_waiting.get(id(executor), (ref, 0))
        if waiting + change > 0:
            self._pool_waiting[id(executor)] = (ref, waiting + change)
        else:
            self._pool_waiting.pop(id(executor), None)

    def _pool_short(self) -> bool:
        """Whether a pool with threads waiting has fewer waiting than it may start."""
        for key, (ref, waiting) in list(self._pool_waiting.items()):
            executor = ref()
            if executor is None:  # collected: its threads' counts can no longer end
                del self._pool_waiting[key]
            elif waiting < executor._max_workers:
                return True
        return False

    def recent(self, since: float) -> list[Hashable]:
        """The threads waiting now or seen since ``since``; older ones are forgotten."""
        for t in [t for t, at in self.seen.items() if at < since and t not in self.waiting]:
            self._forget(t)
        return list(self.seen)

    def _sweep(self) -> None:
        """Forget every thread that ended and waits for nothing: a thread per request
        (a server's, ``threading.Thread(target=...)``) calls once, and its caller's
        records would otherwise pile up when no burst ever asks ``recent``. Amortised:
        the next sweep waits until ``seen`` doubles."""
        for t in [t for t in self.seen if t not in self.waiting and not _alive(t)]:
            self._forget(t)
        self._sweep_at = max(SWEEP_AT, 2 * len(self.seen))

    def _forget(self, thread: Hashable) -> None:
        del self.seen[thread]
        self.answered.pop(thread, None)
        self.turnaround.pop(thread, None)
        self.pools.pop(thread, None)

    def all_in(self, since: float) -> bool:
        """Whether every recent thread (two or more) waits for answers now, and at least
        half of them came back before: a pool that cycles. Threads that each call once
        (a fresh pool starting up, even with its first thread back already) leave it
        off: more of them may not have started yet."""
        if not self.turnaround or self.async_at >= since:  # nobody came back yet
            return False
        recent = self.recent(since)
        if len(recent) < 2:
            return False
        back = sum(t in self.turnaround for t in recent)
        return all(t in self.waiting for t in recent) and back > 0 and 2 * back >= len(recent)

    def settled(self, since: float) -> bool:
        """Whether nobody who could still arrive is running: every recent caller waits,
        every caller thread's pool has started all its threads and each waits, and every
        event loop with recent callers had nothing left to run after they arrived, each
        of its tasks awaiting answers (the module docstring). Needs at least one recent
        caller."""
        # Asked on every arrival while a burst is held: a pool still short of waiting
        # threads says no at once; else it stops at the first caller still out.
        if self._pool_short():
            return False
        pools: dict[int, tuple[ThreadPoolExecutor, int]] = {}
        ended: list[Hashable] = []
        try:
            for t, at in self.seen.items():
                if t in self.waiting:
                    ref = self.pools.get(t)
                    executor = ref() if ref is not None else None
                    if executor is None:  # a thread of no pool: its mates cannot be known
                        return False
                    waiting = pools.get(id(executor), (executor, 0))[1]
                    pools[id(executor)] = (executor, waiting + 1)
                elif at >= since:
                    if _alive(t):  # out, and may call again
                        return False
                    ended.append(t)
        finally:
            for t in ended:
                self._forget(t)
        loops = [
            calls
            for loop, calls in list(self.loops.items())
            if calls.arrived >= since and not _closed(loop)
        ]
        if not pools and not loops:
            return False
        if not all(pool_all_waiting(executor, waiting) for executor, waiting in pools.values()):
            return False
        return all(
            calls.waiting > 0 and not calls.unknown and calls.settled_after == calls.arrivals
            for calls in loops
        )

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


def _alive(thread: Hashable) -> bool:
    """Whether ``thread`` may still call (a key that is no thread is taken as alive)."""
    is_alive = getattr(thread, "is_alive", None)
    return bool(is_alive()) if callable(is_alive) else True


def _closed(loop: Any) -> bool:
    """Whether event ``loop`` is closed (its tasks can call no more)."""
    is_closed = getattr(loop, "is_closed", None)
    return bool(is_closed()) if callable(is_closed) else False


class LoopWatch:
    """Whether the event loops of a coalescer's async callers are settled: each has run
    all it had ready, and every task of it awaits answers (``loop_waits_on``). A loop
    is looked at on its own thread, by a callback it runs after what is ready on it
    (again after that while more is ready), when one of its tasks starts waiting for
    answers and when a held batch starts (``look_again``). ``settled``, a method of the
    coalescer, is called under ``lock`` when a loop became settled."""

    def __init__(self, callers: CallerThreads, lock: Any, settled: Callable[[], None]) -> None:
        self._callers = callers
        self._lock = lock  # the coalescer's: it guards ``callers`` too
        # Weakly: the coalescer owns this watch, and must be freed (its model with it)
        # when its last user lets go, not at the next garbage collection.
        self._settled = weakref.WeakMethod(settled)

    def watch(self, loop: Any, waiter: Any) -> None:
        """A task of ``loop`` awaits ``waiter`` for its answers: have the loop look."""
        with self._lock:
            calls = self._callers.loops.get(loop)
            if calls is None or calls.unknown:
                return
            calls.futures.add(id(waiter))
            if calls.checking:
                return
            calls.checking = True
        loop.call_soon(self._check, loop)

    def unwatch(self, loop: Any, waiter: Any) -> None:
        """The task awaiting ``waiter`` has its answers (or gave up)."""
        with self._lock:
            calls = self._callers.loops.get(loop)
            if calls is not None:
                calls.futures.discard(id(waiter))

    def look_again(self) -> None:
        """Have every loop with calls waiting look again (called under the lock)."""
        for loop, calls in list(self._callers.loops.items()):
            if calls.waiting > 0 and not calls.checking and not calls.unknown:
                try:
                    loop.call_soon_threadsafe(self._check, loop)
                except RuntimeError:  # the loop is closed
                    continue
                calls.checking = True

    def _check(self, loop: Any) -> None:
        """Runs on ``loop`` after the callbacks ready with it: if more are ready, look
        again after those; else, if every task of the loop awaits answers, the loop's
        tasks that could call are in."""
        ready = loop_has_ready(loop)
        with self._lock:
            calls = self._callers.loops.get(loop)
            if calls is None:
                return
            if ready and calls.waiting > 0:
                loop.call_soon(self._check, loop)
                return
            calls.checking = False
            calls.unknown = ready is None
            if ready is False and calls.waiting > 0 and loop_waits_on(loop, calls.futures):
                calls.settled_after = calls.arrivals
                settled = self._settled()
                if settled is not None:
                    settled()
