"""The coalescer: concurrent decisions reach the model as few, full reader batches.

``DecisionEngine`` puts a ``BatchingReader`` in front of its reader by default, so
threads, asyncio tasks and any mix of them share reader batches (what it does: its
docstring; docs/design.md in full). ``DecisionEngine(reader, batching=False)`` turns it
off; build one yourself to tune it::

    engine = DecisionEngine(BatchingReader(reader, max_batch=32, max_wait_s=0.005))
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import CancelledError, Future
from typing import Any

from agentbranch.core.at_exit import COALESCERS, finish_at_exit, join_at_exit
from agentbranch.core.errors import ConfigurationError, ReaderError, ReaderTimeoutError
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine._batch_hold import HoldRule
from agentbranch.engine.batch_parts import (
    Batch,
    Call,
    Handover,
    Item,
    QueueFullError,
    hashable,
    new_call,
    one_call,
    read_key,
    similar_part,
)
from agentbranch.engine.callers import CallerThreads, LoopWatch, pool_thread
from agentbranch.engine.readers.base import Reader, WrappingReader, require_reader

__all__ = ["BatchingReader", "QueueFullError", "read_key"]


class BatchingReader(HoldRule, WrappingReader):
    """A reader that coalesces concurrent ``read``/``aread`` calls into batches.

    Args:
        reader: the reader that does the work.
        max_batch: most requests in one ``reader.read`` call (fewer for a reader that
            reads best in parts: ``pipelined``).
        max_wait_s: by default the quiet gap: a batch that is not full, of a burst
            (callers that found others in flight), closes once no request arrived for
            this long (at least the GIL switch interval), at the latest after half the
            last read's time; a caller that finds no other in flight is read at once.
            Default 2 ms, or the reader's ``coalesce_wait_s``: 0 (no holding) for
            ``RemoteReader`` and for ``VLLMReader`` on a GPU, which batch again
            downstream (``VLLMReader`` on the CPU holds, as the default). A value
            given here is a plain window instead: every batch that is not full waits
            that long.
        max_queue: most requests waiting; further callers wait for room (back-pressure).
        queue_timeout_s: how long a caller waits for room before ``QueueFullError``
            (``None``: as long as it takes).
        concurrency: batches read at once (default: ``reader.concurrent_batches``, 1
            unless the reader declares more: one model reads one batch at a time).
        cache_size: answers kept in an LRU cache keyed by the request digest (0 = off).
        dedupe: share one read between identical requests in flight.

    Every caller's requests go on one bounded queue; worker threads (at most
    ``concurrency``) take up to ``max_batch`` of them, make ONE ``reader.read`` call and hand
    each caller exactly its own answers. Identical requests in flight are read once, an
    optional LRU caches answers, a full queue applies back-pressure (``QueueFullError``),
    each caller gets its answer as soon as the reader hands it over (``read_each``), a
    failed request fails alone (``_read``), abandoned reads free
    their worker's slot, and at interpreter exit the reads in flight may finish. When a
    batch that is not full closes (alone, quiet, all in, settled, bound) is the hold rule of
    ``agentbranch.engine._batch_hold``; docs/design.md explains both in full.
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
        wait = max_wait_s
        # The default wait applies only while other callers' requests are in flight.
        self._auto_wait = wait is None
        if wait is None:  # a reader that batches again itself need not wait here too
            wait = float(reader.coalesce_wait_s)
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
        # exit, not by every arrival (the hold rule: ``_batch_hold``).
        self._filled = threading.Condition(lock)
        self._queue: deque[Item] = deque()
        self._in_flight: dict[Any, Item] = {}
        self._cache: OrderedDict[str, list[LabelRead]] = OrderedDict()
        self._room: list[Future[None]] = []
        self._workers = 0  # workers counted toward ``concurrency``
        self._reading: set[Batch] = set()  # batches of counted workers being read
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._closed = False
        # Whether the last caller found other callers' requests in flight: only then is
        # a burst arriving, worth the default wait; a lone caller is read at once.
        self._crowded = False
        # When a request was last queued (monotonic), or a held burst's quiet gap was
        # found busy: the quiet gap runs from then. And the process's CPU time then.
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
        #: Counters: batches and requests sent to the reader (a failed batch's re-reads
        #: count too), cache hits, de-duplicated requests, abandoned batches.
        self.stats = {"batches": 0, "requests": 0, "cache_hits": 0, "deduped": 0, "abandoned": 0}
        #: Sizes of the last batches read (for tests and the benchmark).
        self.batch_sizes: deque[int] = deque(maxlen=1024)
        #: Why each of the last batches closed, with its size: ``"alone"`` (a lone
        #: caller, read at once), ``"full"``, ``"quiet"`` (no arrival for the quiet
        #: gap), ``"all in"`` (every recent caller thread waits), ``"bound"`` (held as
        #: long as allowed) or ``"window"`` (an explicit ``max_wait_s`` elapsed).
        self.batch_closes: deque[tuple[int, str]] = deque(maxlen=1024)
        finish_at_exit(self._finish_at_exit, order=COALESCERS)

    # -- reading ---------------------------------------------------------------------

    def read(
        self, requests: Sequence[ReadRequest], *, timeout_s: float | None = None
    ) -> list[list[LabelRead]]:
        """Read ``requests`` in shared batches. ``timeout_s`` (the engine's): give up
        after that long with ``ReaderTimeoutError``; the requests are abandoned (not
        read if still queued, and a batch nobody waits for frees its worker's slot)."""
        call, pending = new_call(requests, threading.current_thread())
        until = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            deadline = self._deadline()
            for room in self._rooms(call, pending):
                wait = self._left(deadline)
                if until is not None:
                    wait = self._left(until) if wait is None else min(wait, self._left(until))
                try:
                    room.result(timeout=wait)
                except TimeoutError:
                    if until is not None and time.monotonic() >= until:
                        raise self._timed_out(timeout_s) from None
                    raise self._full() from None
            try:
                return call.future.result(timeout=self._left(until))
            except TimeoutError:
                if call.future.done():  # the reader itself raised a TimeoutError
                    raise
                raise self._timed_out(timeout_s) from None
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
        """Queue ``pending``; while the queue is full, each time a future that resolves
        when there may be room, for the caller to wait on (sync or async)."""
        while pending:
            room = self._offer(call, pending)
            if room is None:
                return
            yield room

    def _arrive(self, call: Call) -> None:
        """Count ``call``'s caller as waiting (who is waiting now, and who came lately:
        ``_nobody_left``), under the lock as its requests are queued: a caller counted
        before its requests are queued would let a held batch close without them."""
        thread, loop = call.thread, call.loop
        if thread is not None and pool_thread(thread) and self._callers.is_new(thread):
            call.pool_thread = thread
        self._callers.arrive(thread, time.monotonic(), loop)
        call.arrived = True
        call.future.add_done_callback(lambda future: self._given_up(future, thread, loop))

    def _given_up(
        self,
        future: Future[Any],
        thread: threading.Thread | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """A call ended: its thread (or task) waits no more. Without its answers
        (cancelled, timed out, failed), batches that nobody waits for any more stop
        counting toward ``concurrency``."""
        with self._cond:
            self._callers.leave(thread, time.monotonic(), loop)
            if not future.cancelled() and future.exception() is None:
                return
            freed = False
            for batch in list(self._reading):
                if not any(item.wanted() for item in batch.items):
                    batch.counted = False
                    self._reading.discard(batch)
                    self._threads.discard(batch.thread)  # close() does not wait for it
                    self._workers -= 1
                    self.stats["abandoned"] += 1
                    freed = True
            if freed and self._queue:
                self._wake()

    def _timed_out(self, timeout_s: float | None) -> ReaderTimeoutError:
        return ReaderTimeoutError(
            f"reader {self.inner.name!r} did not answer within {timeout_s}s; raise "
            "timeout_s or check the model/server load"
        )

    def _deadline(self) -> float | None:
        if self.queue_timeout_s is None:
            return None
        return time.monotonic() + self.queue_timeout_s

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
                # The cache keys on the digest; in-flight de-duplication on the request
                # itself (a frozen dataclass: hashing it is cheaper than a digest).
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
            # A worker idle too long ends by itself, and may then drop the last
            # reference to this coalescer and free the model: joined at exit until then.
            join_at_exit(worker)
        self._cond.notify_all()

    # -- workers -------------------------------------------------------------------

    def _take(self) -> Batch | None:
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
                taken = Batch(batch, threading.current_thread())
                if batch:
                    self._reading.add(taken)
                    self.batch_closes.append((len(batch), why))
                    self._last_callers = len(
                        {id(call) for item in batch for call, _ in item.waiters}
                    )
            finally:
                self._idle -= 1
        for r in room:
            r.set_result(None)
        return taken

    def _forget(self, item: Item) -> None:
        if item.key is not None and self._in_flight.get(item.key) is item:
            del self._in_flight[item.key]

    def _work(self) -> None:
        try:
            while (batch := self._take()) is not None:
                if batch.items:
                    self._read(batch.items)
                with self._cond:
                    if not batch.counted:  # abandoned: another worker took our slot
                        return
                    self._reading.discard(batch)
        finally:
            with self._cond:
                self._threads.discard(threading.current_thread())

    def _read(self, batch: list[Item]) -> None:
        """Read ``batch`` through ``reader.read_each``: each caller gets its answer as
        soon as the reader hands it over. When the reader fails the batch as a whole,
        what it did not hand over is read again one by one, so a bad request fails alone
        (not after a timeout: its callers would wait twice)."""
        start = time.monotonic()
        handover = Handover(batch, self._settle)
        with self._cond:  # counted as it goes to the reader: callers may have it first
            self.stats["batches"] += 1
            self.stats["requests"] += len(batch)
            self.batch_sizes.append(len(batch))
        try:
            self.inner.read_each([item.request for item in batch], handover)
            handover.check(self.inner.name)
        except BaseException as e:  # noqa: BLE001 - delivered to the callers
            # Anything the reader raises reaches its callers, never the worker alone (a
            # dead worker would leave them waiting). Exceptions proper get a re-read.
            left = handover.left()
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

    # -- lifecycle -------------------------------------------------------------------

    def clear_cache(self) -> None:
        """Drop every cached answer."""
        with self._cond:
            self._cache.clear()

    def close(self) -> None:
        """Stop the workers, fail what is still queued, close the wrapped reader."""
        if not self._stop_workers(None):
            self.inner.close()

    def _finish_at_exit(self, deadline: float) -> None:
        self._stop_workers(deadline)

    def _stop_workers(self, deadline: float | None) -> bool:
        """Stop taking batches, fail what is still queued and wait for the workers to
        finish the batch they are reading (5 s each, or until ``deadline``). Whether
        this reader was closed already."""
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
