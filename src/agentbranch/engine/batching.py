"""The coalescer: concurrent decisions reach the model as few, full reader batches.

``DecisionEngine`` puts a ``BatchingReader`` in front of its reader by default, so
threads, asyncio tasks and any mix of them share reader batches::

    engine = DecisionEngine(BatchingReader(reader, max_batch=32, max_wait_s=0.005))

Its hold rule says when a batch that is not full closes: a lone caller is read at once
(unless it is a fresh pool's first thread); a burst is held until no request arrived for
the quiet gap, until every recent caller waits ("all in"), until nobody who could still
call is running ("settled"), or until the bound (half the last read's time).
docs/batching.md gives the rule in full and why. ``CallerThreads`` records who calls
(under the coalescer's lock); ``LoopWatch`` has each event loop say when it settled.

Over 500 lines: one idea, the coalescer; its queue, workers, hold rule and record of
who calls it read and write the same state under one lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sys
import threading
import time
import weakref
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import CancelledError, Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from agentbranch.core.at_exit import COALESCERS, finish_at_exit, join_at_exit
from agentbranch.core.errors import ConfigurationError, ReaderError, ReaderTimeoutError
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine.readers.base import Reader, WrappingReader, require_reader

#: A burst's batch is held at most this share of the last read's time.
HOLD_SHARE = 0.5
#: How long a fresh pool's first caller waits for the pool's next thread to start.
POOL_PEEK_S = 0.0002
#: A quiet gap during which the process ran at least this share of one CPU was not
#: quiet: its threads were busy, and may be callers on their way.
BUSY_SHARE = 0.5

# The process's CPU clock (all its threads), next to the coalescer's wall clock.
_cpu_clock = time.process_time


class QueueFullError(ReaderError):
    """The coalescer's queue stayed full for ``queue_timeout_s``: the reader is
    overloaded. Lower the load, raise ``max_queue``/``queue_timeout_s``, or add readers."""


def timed_out(reader: str, timeout_s: float | None) -> ReaderTimeoutError:
    """The error of a read that took longer than the engine's ``timeout_s``."""
    return ReaderTimeoutError(
        f"reader {reader!r} did not answer within {timeout_s}s; raise timeout_s or check "
        "the model/server load"
    )


def read_key(request: ReadRequest) -> str:
    """A digest of everything that determines a read (the answer-cache key)."""
    blob = json.dumps(
        [
            request.state,
            request.instructions,
            request.draws,
            request.joint,
            [
                [q.id, q.type, q.instructions, q.options, q.descriptions, q.labels]
                for q in request.questions
            ],
        ],
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def hashable(request: ReadRequest) -> bool:
    try:
        hash(request)
    except TypeError:  # built by hand with lists instead of tuples
        return False
    return True


@dataclass(eq=False)
class Call:
    """One caller's ``read``: its answers fill in as the requests are read."""

    answers: list[list[LabelRead] | None]
    remaining: int
    future: Future[list[list[LabelRead]]] = field(default_factory=Future)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The calling thread when it is a pool's and never called before, else ``None``.
    pool_thread: threading.Thread | None = None
    #: Who called: the calling thread (a sync caller) or event loop (an async one).
    thread: threading.Thread | None = None
    loop: Any = None
    #: Whether the coalescer counts the caller as waiting yet (from its first queueing).
    arrived: bool = False

    def give(self, index: int, reads: list[LabelRead]) -> None:
        with self.lock:  # answers may arrive from several workers at once
            if self.future.done() or self.answers[index] is not None:
                return
            self.answers[index] = reads
            self.remaining -= 1
            last = self.remaining == 0
        if last:
            with contextlib.suppress(InvalidStateError):  # cancelled meanwhile
                self.future.set_result(self.answers)  # type: ignore[arg-type]

    def fail(self, error: BaseException) -> None:
        with contextlib.suppress(InvalidStateError):
            self.future.set_exception(error)


def new_call(
    requests: Sequence[ReadRequest],
    thread: threading.Thread | None = None,
    loop: Any = None,
) -> tuple[Call, deque[tuple[int, ReadRequest]]]:
    """A caller's ``Call`` for ``requests`` and its requests still to queue, by index."""
    requests = list(requests)
    call = Call([None] * len(requests), len(requests), thread=thread, loop=loop)
    if not requests:
        call.future.set_result([])
    # Shortest state first: the reads a call is cut into then each hold states of
    # similar length, and a reader that pads pads each little.
    return call, deque(sorted(enumerate(requests), key=lambda pair: len(pair[1].state)))


@dataclass(eq=False)
class Item:
    """One distinct request in flight, and every (call, index) waiting for it."""

    request: ReadRequest
    key: Any
    waiters: list[tuple[Call, int]] = field(default_factory=list)

    def wanted(self) -> bool:
        return any(not call.future.done() for call, _ in self.waiters)


#: A read cut from a longer queue looks this many reads' worth into it for requests of
#: its first request's length.
SIMILAR_WINDOW = 4


def similar_part(queue: deque[Item], limit: int) -> list[Item]:
    """Take the next read's items off ``queue``: all of them when they fit in ``limit``;
    else the oldest and the ``limit - 1`` of the next ``SIMILAR_WINDOW × limit`` whose
    states are closest to its length (a reader pads to its longest state), the rest
    staying queued in order. The oldest is always read, so none starves."""
    if len(queue) <= limit:
        part = list(queue)
        queue.clear()
        return part
    window = [queue.popleft() for _ in range(min(len(queue), SIMILAR_WINDOW * limit))]
    head, rest = window[0], window[1:]
    n = len(head.request.state)
    nearest = sorted(range(len(rest)), key=lambda i: abs(len(rest[i].request.state) - n))
    chosen = set(nearest[: limit - 1])
    queue.extendleft(reversed([item for i, item in enumerate(rest) if i not in chosen]))
    return [head, *(item for i, item in enumerate(rest) if i in chosen)]


def one_call(queue: deque[Item], n: int) -> bool:
    """Whether the next ``n`` queued requests all wait for one call only (a
    ``decide_many``), which gains nothing from being read in pipelined parts."""
    return len({id(call) for item in islice(queue, n) for call, _ in item.waiters}) == 1


class BatchingReader(WrappingReader):
    """A reader that coalesces concurrent ``read``/``aread`` calls into batches.

    Args:
        reader: the reader that does the work.
        max_batch: most requests in one ``reader.read`` call (fewer for a reader that
            reads best in parts: ``pipelined``).
        max_wait_s: by default the quiet gap of the hold rule (at least the GIL switch
            interval): the reader's ``coalesce_wait_s``, 2 ms unless the reader batches
            again downstream (0: ``RemoteReader``, ``VLLMReader`` on a GPU). A value
            given here is a plain window instead: every batch that is not full waits
            that long.
        max_queue: most requests waiting; further callers wait for room (back-pressure).
        queue_timeout_s: how long a caller waits for room before ``QueueFullError``
            (``None``: as long as it takes).
        concurrency: batches read at once (default: ``reader.concurrent_batches``, 1
            unless the reader declares more: one model reads one batch at a time).
        cache_size: answers kept in an LRU cache keyed by the request digest (0 = off).
        dedupe: share one read between identical requests in flight.

    Worker threads (at most ``concurrency``) take up to ``max_batch`` queued requests,
    make ONE reader call and hand each caller its own answers as the reader hands them
    over. A failed request fails alone, abandoned reads free their worker's slot, and
    at interpreter exit the reads in flight may finish (docs/batching.md).
    """

    def __init__(
        self,
        reader: Reader,
        *,
        max_batch: int = 64,
        max_wait_s: float | None = None,
        max_queue: int = 4096,
        queue_timeout_s: float | None = None,
        concurrency: int | None = None,
        cache_size: int = 0,
        dedupe: bool = True,
    ) -> None:
        require_reader(reader)
        # The default wait applies only while other callers' requests are in flight; a
        # reader that batches again itself need not wait here too.
        self._auto_wait = max_wait_s is None
        wait = float(reader.coalesce_wait_s) if max_wait_s is None else max_wait_s
        concurrency = concurrency or int(reader.concurrent_batches or 1)
        if wait < 0 or max_batch < 1 or max_queue < 1 or concurrency < 1 or cache_size < 0:
            raise ConfigurationError(
                "BatchingReader needs max_wait_s >= 0, max_batch >= 1, max_queue >= 1, "
                "concurrency >= 1 and cache_size >= 0"
            )
        if isinstance(reader, BatchingReader):
            raise ConfigurationError(
                "this reader is already a BatchingReader; do not wrap it twice"
            )
        self.inner = reader
        self.max_batch = max_batch
        self.max_wait_s = wait
        self.max_queue = max_queue
        self.queue_timeout_s = queue_timeout_s
        self.concurrency = concurrency
        self.cache_size = cache_size
        self.dedupe = dedupe
        #: Idle workers exit after this long; the next call starts them again.
        self.idle_s = 2.0
        lock = threading.RLock()
        self._cond = threading.Condition(lock)  # new work for idle workers, room, exit
        # A worker holding a batch waits on this one: woken when the batch is full or at
        # exit, not by every arrival (the hold rule).
        self._filled = threading.Condition(lock)
        self._queue: deque[Item] = deque()
        self._in_flight: dict[Any, Item] = {}
        self._cache: OrderedDict[str, list[LabelRead]] = OrderedDict()
        self._room: list[Future[None]] = []
        self._workers = 0  # workers counted toward ``concurrency``
        # The batch each counted worker is reading (until every caller abandoned it).
        self._reading: dict[threading.Thread, list[Item]] = {}
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._closed = False
        # Whether the last caller found other callers' requests in flight: only then is
        # a burst arriving, worth the default wait; a lone caller is read at once.
        self._crowded = False
        # When the quiet gap runs from (monotonic), and the process's CPU time then.
        self._last_arrival = 0.0
        self._last_arrival_cpu = 0.0
        self._last_read_s = 0.0  # how long the last batch took to read
        self._last_read_size = 0  # and how many requests it read
        # Who calls: threads waiting now, recent ones, their turnarounds (``_nobody_left``).
        self._callers = CallerThreads()
        self._loops = LoopWatch(self._callers, self._cond, self._loop_settled)
        self._last_callers = 0  # distinct calls in the last batch taken
        self._holding = False  # a worker is holding a burst's batch
        self._starter: threading.Thread | None = None  # a lone caller: a new pool thread
        #: Counters: batches and requests sent to the reader, cache hits, de-duplicated
        #: requests, abandoned batches.
        self.stats = {"batches": 0, "requests": 0, "cache_hits": 0, "deduped": 0, "abandoned": 0}
        #: Sizes of the last batches read (for tests and the benchmark).
        self.batch_sizes: deque[int] = deque(maxlen=1024)
        #: Why each of the last batches closed, with its size: ``"alone"``, ``"full"``,
        #: ``"quiet"``, ``"all in"``, ``"settled"``, ``"bound"`` or ``"window"`` (an
        #: explicit ``max_wait_s`` elapsed).
        self.batch_closes: deque[tuple[int, str]] = deque(maxlen=1024)
        finish_at_exit(self._stop_workers, order=COALESCERS)

    # -- reading ---------------------------------------------------------------------

    def read(
        self, requests: Sequence[ReadRequest], *, timeout_s: float | None = None
    ) -> list[list[LabelRead]]:
        """Read ``requests`` in shared batches. ``timeout_s`` (the engine's): give up
        after that long with ``ReaderTimeoutError``, abandoning the requests."""
        call, pending = new_call(requests, threading.current_thread())
        until = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            deadline = min((t for t in (self._deadline(), until) if t is not None), default=None)
            for room in self._rooms(call, pending):
                try:
                    room.result(timeout=self._left(deadline))
                except TimeoutError:
                    if until is not None and time.monotonic() >= until:
                        raise timed_out(self.inner.name, timeout_s) from None
                    raise self._full() from None
            try:
                return call.future.result(timeout=self._left(until))
            except TimeoutError:
                if call.future.done():  # the reader itself raised a TimeoutError
                    raise
                raise timed_out(self.inner.name, timeout_s) from None
        except BaseException:  # timed out, failed or interrupted: abandon our requests
            call.future.cancel()
            raise

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        loop = asyncio.get_running_loop()
        call, pending = new_call(requests, loop=loop)
        try:
            deadline = self._deadline()
            for room in self._rooms(call, pending):
                try:
                    await asyncio.wait_for(asyncio.wrap_future(room), self._left(deadline))
                except TimeoutError:
                    raise self._full() from None
            waiter = asyncio.wrap_future(call.future)
            self._loops.watch(loop, waiter)  # the loop says when its tasks are all in
            try:
                return await waiter
            finally:
                self._loops.unwatch(loop, waiter)
        except BaseException:  # cancelled or failed: take our requests out of the queue
            call.future.cancel()
            raise

    def _rooms(self, call: Call, pending: deque[tuple[int, ReadRequest]]) -> Iterator[Future[None]]:
        """Queue ``pending``, yielding a future to wait on while the queue is full."""
        while pending and (room := self._offer(call, pending)) is not None:
            yield room

    def _arrive(self, call: Call) -> None:
        """Count ``call``'s caller as waiting, under the lock as its requests are queued:
        counted before, it would let a held batch close without them."""
        thread, loop = call.thread, call.loop
        if thread is not None and pool_thread(thread) and self._callers.is_new(thread):
            call.pool_thread = thread
        self._callers.arrive(thread, time.monotonic(), loop)
        call.arrived = True
        call.future.add_done_callback(lambda future: self._given_up(future, thread, loop))

    def _given_up(self, future: Future[Any], thread: threading.Thread | None, loop: Any) -> None:
        """A call ended: its caller waits no more. Without its answers, batches that
        nobody waits for any more stop counting toward ``concurrency``."""
        with self._cond:
            self._callers.leave(thread, time.monotonic(), loop)
            if not future.cancelled() and future.exception() is None:
                return
            freed = False
            for worker, batch in list(self._reading.items()):
                if not any(item.wanted() for item in batch):
                    del self._reading[worker]
                    self._threads.discard(worker)  # close() does not wait for it
                    self._workers -= 1
                    self.stats["abandoned"] += 1
                    freed = True
            if freed and self._queue:
                self._wake()

    def _deadline(self) -> float | None:
        return None if self.queue_timeout_s is None else time.monotonic() + self.queue_timeout_s

    @staticmethod
    def _left(deadline: float | None) -> float | None:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def _full(self) -> QueueFullError:
        return QueueFullError(
            f"the read queue stayed full ({self.max_queue} requests) for "
            f"{self.queue_timeout_s}s: the reader cannot keep up. Lower the load, raise "
            "max_queue or queue_timeout_s, or serve the model with more capacity."
        )

    def _offer(self, call: Call, pending: deque[tuple[int, ReadRequest]]) -> Future[None] | None:
        """Queue what fits of ``pending``; ``None`` when all is queued (or answered),
        else a future that resolves when there may be room."""
        with self._cond:
            if self._closed:
                raise ReaderError("this BatchingReader is closed; create a new one")
            if not call.arrived:
                self._arrive(call)
            queued = False
            crowded = self._company()
            while pending:
                index, request = pending[0]
                # De-duplication keys on the request itself: cheaper than a digest.
                key: Any = None
                if self.cache_size:
                    key = read_key(request)
                elif self.dedupe:
                    key = request if hashable(request) else None
                if key is not None and key in self._cache:
                    self._cache.move_to_end(key)
                    self.stats["cache_hits"] += 1
                    pending.popleft()
                    call.give(index, list(self._cache[key]))
                    continue
                # Never join a read every caller gave up on (it may hang).
                if self.dedupe and key in self._in_flight and self._in_flight[key].wanted():
                    self.stats["deduped"] += 1
                    pending.popleft()
                    self._in_flight[key].waiters.append((call, index))  # type: ignore[index]
                    continue
                if len(self._queue) >= self.max_queue:
                    break
                pending.popleft()
                item = Item(request, key, [(call, index)])
                if self.dedupe and key is not None:
                    self._in_flight[key] = item
                self._queue.append(item)
                queued = True
            if queued:
                self._crowded = crowded
                self._starter = None if crowded else call.pool_thread
                self._quiet_from_now()
                self._wake()
                if len(self._queue) >= self._limit() or (self._holding and self._nobody_left()):
                    self._filled.notify_all()
            if not pending:
                return None
            room: Future[None] = Future()
            self._room.append(room)
            return room

    def _wake(self) -> None:
        """Notify idle workers; start one if none is idle and the limit allows."""
        if self._idle == 0 and self._workers < self.concurrency:
            self._workers += 1
            worker = threading.Thread(target=self._work, name="agentbranch-batch", daemon=True)
            self._threads.add(worker)
            worker.start()
            # An idle worker may drop the last reference to the model: joined at exit.
            join_at_exit(worker)
        self._cond.notify_all()

    # -- workers -------------------------------------------------------------------

    def _take(self) -> list[Item] | None:
        """The next batch (``None``: idle too long or closed, the worker exits)."""
        with self._cond:
            self._idle += 1
            try:
                while not self._queue:
                    if self._closed or not self._cond.wait(self.idle_s) and not self._queue:
                        self._workers -= 1
                        return None
                why = self._hold()
                batch: list[Item] = []
                limit = self._limit()
                if limit < self.max_batch and one_call(self._queue, self.max_batch):
                    limit = self.max_batch  # one decide_many: nobody gains from parts
                for item in similar_part(self._queue, limit):
                    if item.wanted():
                        batch.append(item)
                    else:  # every caller gave up on it
                        self._forget(item)
                room, self._room = self._room, []
                if batch:
                    self._reading[threading.current_thread()] = batch
                    self.batch_closes.append((len(batch), why))
                    self._last_callers = len(
                        {id(call) for item in batch for call, _ in item.waiters}
                    )
            finally:
                self._idle -= 1
        for r in room:
            r.set_result(None)
        return batch

    def _forget(self, item: Item) -> None:
        if item.key is not None and self._in_flight.get(item.key) is item:
            del self._in_flight[item.key]

    def _work(self) -> None:
        me = threading.current_thread()
        try:
            while (batch := self._take()) is not None:
                if batch:
                    self._read(batch)
                with self._cond:
                    if self._reading.pop(me, None) is None and batch:
                        return  # abandoned: another worker took our slot
        finally:
            with self._cond:
                self._threads.discard(me)

    def _read(self, batch: list[Item]) -> None:
        """Read ``batch`` through ``reader.read_each``. When the reader fails the batch as
        a whole, what it did not hand over is read again one by one, so a bad request
        fails alone (not after a timeout: its callers would wait twice)."""
        start = time.monotonic()
        waiting = dict(enumerate(batch))  # the requests not handed over yet

        def deliver(index: int, reads: list[LabelRead] | BaseException) -> None:
            """Settle request ``index`` once; a ``ReaderError`` in place of reads goes to
            its callers as an answer (the engine raises it), any other error fails them."""
            if (item := waiting.pop(index, None)) is None:
                return
            if isinstance(reads, BaseException) and not isinstance(reads, ReaderError):
                self._settle(item, None, reads)
            else:
                self._settle(item, reads, None)

        with self._cond:  # counted as it goes to the reader: callers may have it first
            self.stats["batches"] += 1
            self.stats["requests"] += len(batch)
            self.batch_sizes.append(len(batch))
        try:
            self.inner.read_each([item.request for item in batch], deliver)
            if waiting:
                raise ReaderError(
                    f"reader {self.inner.name!r} answered {len(batch) - len(waiting)} of "
                    f"{len(batch)} batched requests"
                )
        except BaseException as e:  # noqa: BLE001 - delivered to the callers
            # Anything the reader raises reaches its callers (a dead worker would leave
            # them waiting). Exceptions proper get a re-read.
            left = list(waiting.values())
            if len(left) > 1 and isinstance(e, Exception) and not isinstance(e, TimeoutError):
                for item in left:  # which request failed? Read each alone
                    if item.wanted():
                        self._read([item])
                    else:
                        self._settle(item, None, None)
                return
            for item in left:
                self._settle(item, None, e)
            return
        with self._cond:
            self._last_read_s = time.monotonic() - start
            self._last_read_size = len(batch)

    def _settle(
        self, item: Item, reads: list[LabelRead] | None, error: BaseException | None
    ) -> None:
        with self._cond:
            self._forget(item)
            # Never cache a failure (a reader may answer one request with its error).
            cacheable = reads is not None and not isinstance(reads, BaseException)
            if cacheable and item.key is not None and self.cache_size:
                self._cache[item.key] = reads
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            waiters = list(item.waiters)
        for call, index in waiters:
            if error is not None:
                call.fail(error)
            elif reads is not None:
                call.give(index, reads)
            else:
                call.fail(CancelledError())

    # -- the hold rule (module docstring) ---------------------------------------------

    def _hold(self) -> str:
        """Wait (holding ``_cond``) until the queued batch should close; say why."""
        if self._ready():
            return "full"
        if not self._auto_wait:  # an explicit window: always waited
            return "full" if self._filled.wait_for(self._ready, self.max_wait_s) else "window"
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
                # Closes the quiet gap after the last arrival (or when the threads out are
                # due back, if later), or at the bound, whichever comes first.
                bound = start + self._hold_bound_s(gap)
                quiet = max(self._last_arrival + gap, self._expected_back(self._since()))
                at, why = (quiet, "quiet") if quiet <= bound else (bound, "bound")
                left = at - time.monotonic()
                if left <= 0:
                    if why == "quiet" and self._busy():
                        self._quiet_from_now()  # not quiet: the gap starts again
                        continue
                    return why
                # wakes when full, all in, at exit or at the time (an arrival moves the
                # quiet gap later: the loop computes the close time again)
                self._filled.wait(left)
        finally:
            self._holding = False
        return "full"

    def _pool_starting(self) -> bool:
        """Whether a lone caller is the first of a fresh pool's threads (``graph.batch``
        starting its runs): after ``POOL_PEEK_S``, another call arrived or another thread
        of its pool is alive."""
        starter, self._starter = self._starter, None
        if starter is None:
            return False
        arrived = self._last_arrival
        self._filled.wait(POOL_PEEK_S)  # (releases the lock: callers may queue)
        return self._last_arrival != arrived or pool_is_starting(starter)

    def _hold_bound_s(self, gap: float) -> float:
        """How long a burst's batch may be held: ``HOLD_SHARE`` of the last read's time,
        or of what reading the queued requests should take at its time per request if
        longer, never less than the quiet gap."""
        per_request = self._last_read_s / max(1, self._last_read_size)
        longest = max(self._last_read_s, per_request * len(self._queue))
        return max(gap, HOLD_SHARE * longest)

    def _company(self) -> bool:
        """Whether a caller arriving now is part of a burst: other callers' requests are
        queued or being read, or the last batch served several callers and one of their
        threads is expected back soon (a cycling pool's first thread back, else read
        alone: 1 + 5, 1 + 5 ...)."""
        if self._queue or any(item.wanted() for b in self._reading.values() for item in b):
            return True
        return self._last_callers >= 2 and self._expected_back(self._since()) > time.monotonic()

    def _since(self) -> float:
        """Callers seen since then are "recent": three reads' time, at least 0.1 s."""
        return time.monotonic() - max(0.1, 3 * self._last_read_s)

    def _nobody_left(self) -> str | None:
        """Why nobody is left to arrive: ``"all in"`` (every recent caller waits, a pool
        that cycles), ``"settled"`` (nobody who could still call is running), or ``None``."""
        since = self._since()
        return "all in" if self._all_in(since) else "settled" if self._settled(since) else None

    def _loop_settled(self) -> None:
        """An event loop of our async callers settled: a held batch may close now."""
        if self._holding and self._nobody_left():
            self._filled.notify_all()

    def _quiet_from_now(self) -> None:
        """A request arrived (or a quiet gap was busy): the quiet gap runs from now."""
        self._last_arrival = time.monotonic()
        self._last_arrival_cpu = _cpu_clock()

    def _busy(self) -> bool:
        """Whether the process ran at least ``BUSY_SHARE`` of a CPU since the quiet gap
        began: its threads were working, so no arrival does not mean none is coming."""
        wall = time.monotonic() - self._last_arrival
        return wall > 0 and _cpu_clock() - self._last_arrival_cpu >= BUSY_SHARE * wall

    def _ready(self) -> bool:
        return len(self._queue) >= self._limit() or self._closed

    def _limit(self) -> int:
        """Most requests in the next read: ``max_batch``, or the reader's
        ``pipelined_batch`` when smaller."""
        part = self._pipelined_part()
        return min(self.max_batch, part) if part else self.max_batch

    # -- the hold rule's tests, one method each (a variant can leave one out) ------

    def _all_in(self, since: float) -> bool:
        """Every thread that called since ``since`` waits for answers now."""
        return self._callers.all_in(since)

    def _settled(self, since: float) -> bool:
        """Nobody who could still call is running (``CallerThreads``, ``LoopWatch``)."""
        return self._callers.settled(since)

    def _expected_back(self, since: float) -> float:
        """When the threads that called since ``since`` and are out should be back."""
        return self._callers.back_by(since)

    def _pipelined_part(self) -> int | None:
        """The reader's ``pipelined_batch``: at most that many requests at once."""
        return self.inner.pipelined_batch

    # -- lifecycle -------------------------------------------------------------------

    def clear_cache(self) -> None:
        """Drop every cached answer."""
        with self._cond:
            self._cache.clear()

    def close(self) -> None:
        """Stop the workers, fail what is still queued, close the wrapped reader."""
        if not self._stop_workers(None):
            self.inner.close()

    def _stop_workers(self, deadline: float | None) -> bool:
        """Stop taking batches, fail what is queued and wait for the workers to finish
        their batch (5 s each, or until ``deadline``). Whether it was closed already."""
        with self._cond:
            already = self._closed
            self._closed = True
            queued, self._queue = list(self._queue), deque()
            room, self._room = self._room, []
            self._cond.notify_all()
            self._filled.notify_all()
        error = ReaderError("the reader was closed before this request was read")
        for item in queued:
            self._settle(item, None, error)
        for r in room:
            r.set_result(None)
        with self._cond:
            workers = [t for t in self._threads if t is not threading.current_thread()]
        for t in workers:  # each finishes the batch it is reading, then exits
            t.join(timeout=5 if deadline is None else max(0.0, deadline - time.monotonic()))
        return already

    def __repr__(self) -> str:
        return f"BatchingReader({self.inner!r}, max_batch={self.max_batch})"


#: A thread is expected back within this many of its own last turnarounds.
TURNAROUND_MARGIN = 2.0
#: ``CallerThreads.seen`` is first swept of ended threads at this size.
SWEEP_AT = 64


def pool_thread(thread: threading.Thread) -> bool:
    """Whether ``thread`` is named as a ``ThreadPoolExecutor``'s (``<prefix>_<n>``)."""
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
    """The ``ThreadPoolExecutor`` whose worker ``thread`` is, or ``None``. CPython starts
    each worker with a weakref to its executor as the first argument (3.11 to 3.14)."""
    args = getattr(thread, "_args", None)
    ref = args[0] if isinstance(args, tuple) and args else None
    executor = ref() if isinstance(ref, weakref.ref) else None
    return executor if isinstance(executor, ThreadPoolExecutor) else None


def pool_all_waiting(executor: ThreadPoolExecutor, waiting: int) -> bool:
    """Whether ``waiting`` threads of ``executor`` are every thread it may start
    (counted: the executor lists a thread only after it started, and it may call before)."""
    return waiting >= executor._max_workers


def loop_waits_on(loop: Any, ours: set[int]) -> bool:
    """Whether every task of event ``loop`` waits for one of the futures whose ids are
    ``ours``, directly or through the tasks and ``gather``s it awaits (a task waiting on
    anything else may still call). Called on the loop's own thread."""
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
    """The callers of one coalescer: its sync threads (keyed by object: the OS reuses
    idents) and the event loops of its async callers. The coalescer's lock guards it."""

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
        # Per pool (weakly: a collected pool's threads can no longer end): threads waiting.
        self._pool_waiting = weakref.WeakKeyDictionary[ThreadPoolExecutor, int]()
        # ``seen`` is swept of ended threads when it grows past this (``_sweep``).
        self._sweep_at = SWEEP_AT

    def is_new(self, thread: Hashable | None) -> bool:
        """Whether ``thread`` never called before (never for an async caller, ``None``)."""
        return thread is not None and thread not in self.known and thread not in self._known_keys

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
        """A call of ``thread`` (or of event ``loop``) ended."""
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
        """Count ``thread`` in (or out of) its pool's waiting threads. Only a quick "no"
        rests on these counts (``settled``), never a "yes"."""
        executor = self._pool(thread)
        if executor is not None:
            self._pool_waiting[executor] = self._pool_waiting.get(executor, 0) + change

    def _pool(self, thread: Hashable) -> ThreadPoolExecutor | None:
        """``thread``'s pool, while it lives (``None``: a thread of no pool)."""
        ref = self.pools.get(thread)
        return None if ref is None else ref()

    def recent(self, since: float) -> list[Hashable]:
        """The threads waiting now or seen since ``since``; older ones are forgotten."""
        for t in [t for t, at in self.seen.items() if at < since and t not in self.waiting]:
            self._forget(t)
        return list(self.seen)

    def _sweep(self) -> None:
        """Forget every thread that ended and waits for nothing (a thread per request
        calls once). Amortised: the next sweep waits until ``seen`` doubles."""
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
        half of them came back before: a pool that cycles (a fresh pool starting up may
        not have started all its threads yet)."""
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
        event loop with recent callers has each of its tasks awaiting answers. Needs at
        least one recent caller."""
        # A pool with threads waiting has fewer waiting than it may start: a quick no.
        if any(0 < n < e._max_workers for e, n in list(self._pool_waiting.items())):
            return False
        pools: Counter[ThreadPoolExecutor] = Counter()
        ended: list[Hashable] = []
        try:
            for t, at in self.seen.items():
                if t in self.waiting:
                    executor = self._pool(t)
                    if executor is None:  # a thread of no pool: its mates cannot be known
                        return False
                    pools[executor] += 1
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
            if calls.arrived >= since and not loop.is_closed()
        ]
        if not pools and not loops:
            return False
        if not all(pool_all_waiting(executor, waiting) for executor, waiting in pools.items()):
            return False
        return all(
            calls.waiting > 0 and not calls.unknown and calls.settled_after == calls.arrivals
            for calls in loops
        )

    def back_by(self, since: float) -> float:
        """When the recent threads that are out and came back before are due back
        (``TURNAROUND_MARGIN`` turnarounds after their answer); ``-inf`` if none is."""
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
    return not isinstance(thread, threading.Thread) or thread.is_alive()


class LoopWatch:
    """Whether the event loops of a coalescer's async callers are settled: each has run
    all it had ready, and every task of it awaits answers (``loop_waits_on``). A loop
    looks at itself on its own thread, by a callback, when one of its tasks starts
    waiting and when a held batch starts; ``settled`` is called under ``lock`` then."""

    def __init__(self, callers: CallerThreads, lock: Any, settled: Callable[[], None]) -> None:
        self._callers = callers
        self._lock = lock  # the coalescer's: it guards ``callers`` too
        # Weakly: the coalescer (and its model) must be freed when its last user lets go.
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
        """Runs on ``loop`` after its ready callbacks: look again while more are ready;
        else the loop settled if every task of it awaits answers."""
        ready = getattr(loop, "_ready", None)  # asyncio's ready queue (uvloop has none)
        ready = None if ready is None else bool(ready)
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


__all__ = [
    "BatchingReader",
    "QueueFullError",
    "read_key",
    "SWEEP_AT",
    "TURNAROUND_MARGIN",
    "WAIT_DEPTH",
    "CallerThreads",
    "LoopCalls",
    "LoopWatch",
    "executor_of",
    "loop_waits_on",
    "pool_all_waiting",
    "pool_is_starting",
    "pool_thread",
]
