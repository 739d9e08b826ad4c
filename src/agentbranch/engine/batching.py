"""The coalescer: concurrent decisions reach the model as few, full reader batches.

``DecisionEngine`` puts one in front of its reader by default, so threads (LangGraph's
``graph.batch``, sync ``Send`` branches, web-server workers), asyncio tasks (``ainvoke``,
async branches) and any mix of them share reader batches without the user doing
anything. ``DecisionEngine(reader, batching=False)`` turns it off; build one yourself to
tune it::

    engine = DecisionEngine(BatchingReader(reader, max_batch=32, max_wait_s=0.005))

How it works: every caller's requests go on one bounded queue. Worker threads (at most
``concurrency``, default the reader's ``concurrent_batches``, 1 for a local model) take
up to ``max_batch`` queued requests, make ONE ``reader.read`` call and hand each caller
exactly its own answers. While a batch is being read the next one queues up, so batches
grow with the load by themselves ("natural batching").

When to close a batch that is not full (the default, "hold while a burst arrives"):

* a caller that finds no other caller's request queued or being read is **alone**: it is
  read at once, never held for company. Except a **fresh pool's first thread**: a lone
  caller from a ``ThreadPoolExecutor`` thread (named ``<pool>_<n>``) that never called
  before waits ``POOL_PEEK_S`` (0.2 ms) for the pool to start its next thread; if another
  thread of its pool is alive by then, or another call arrived, it is a burst's first
  (``graph.batch``, ``executor.map``, a ``ToolNode``'s parallel calls: the pool starts
  a thread per input while the first one already calls), held as below instead of read
  alone, which cost a read of its own (``hold_new_threads``; a pool of one thread, one
  tool call, is read after the peek);
* a caller that finds others in flight is part of a **burst** (``graph.batch`` threads,
  ``Send`` branches, many ``ainvoke``): the worker holds the batch while requests keep
  arriving and closes it once none has arrived for the **quiet gap** (``max_wait_s``,
  2 ms, but at least the interpreter's GIL switch interval, 5 ms: a caller ready to
  queue may wait that long for its turn), or when it is full, or at the latest after
  ``HOLD_SHARE`` (half) of the last read's time, or of what reading the requests
  queued now should take at the last read's time per request if that is longer, never
  less than the quiet gap (the **bound**: waiting never costs more than half a read of
  the batch held, a burst of 32 after lone reads is not cut at half a one-request read,
  and a reader that answers in microseconds is held no longer than the quiet gap);
* **busy is not quiet**: a quiet gap during which the process ran half a CPU or more
  (``BUSY_SHARE``, its CPU time, all threads) starts again, up to the bound. Its
  threads were working, not waiting: 32 agent steps calling a tool start a run, a
  ``ToolNode`` pool and a thread each, and a turn on the GIL can pass 5 ms with none
  of them arriving, so the burst was cut in two or three reads
  (``quiet25 + quiet7``). When every caller waits, the process idles and the gap
  closes as before (``hold_while_busy``);
* **all in**: a held batch also closes as soon as every thread that called lately
  (within three reads' time) is waiting for answers and at least half of them came
  back before (a pool that cycles, not one still starting its threads): nobody is left
  to arrive. A pool
  of threads smaller than its inputs (``graph.batch`` at LangGraph's default
  concurrency, CPUs + 4 runs at once) comes back in full every round: a thread that
  came back before is waited for (past the quiet gap, up to the bound) until twice
  its last turnaround after its answer, and the first thread back is not read alone
  when the last batch served several callers and others are expected back (every
  round would split in two: 1 + 5, 1 + 5 ...). Async callers share one thread, so a
  recent async caller turns this rule off (``agentbranch.engine.callers``);
* **settled**: a held batch closes as soon as nobody who could still call is running:
  every caller thread belongs to a ``ThreadPoolExecutor`` that has started all the
  threads it may (``graph.batch``, ``executor.map``) and each of them waits for
  answers, and every event loop whose tasks called has run everything it had ready and
  each of its tasks awaits answers (``asyncio.gather``, ``abatch``: a callback the loop
  runs after them looks). A fresh pool's burst and an async burst are read the moment
  their last caller queues, not a quiet gap later (``close_when_settled``). A task
  waiting on anything else (a checkpointer's write, a timer) may still call: the quiet
  gap decides then.

Why: callers of a burst do not arrive at once. 32 LangGraph runs in threads take turns
on the GIL (a run's own work is about a millisecond), so their requests trickle in over
tens of milliseconds, most of them while the first caller is being read. A fixed 2 ms
window cut the rest into several batches (4 + 28, 1 + 8 + 23 ...); holding until
arrivals pause reads them as one (1 + 31), so a reader whose forward has a large fixed
cost (a GPU) runs fewer forwards. The holding worker is not woken by every arrival (each
wake-up is a GIL hand-off taken from the callers' own work): it wakes when the batch is
full or at the time it computed, and looks again. ``batch_closes`` records why each of
the last batches closed. A ``max_wait_s`` given explicitly is a plain window instead:
every batch that is not full waits that long. ``close_when_all_in = False`` and
``close_when_settled = False`` turn those rules off, for comparison
(``benchmarks/bench_patterns.py --variants``).

* **De-duplication**: a request identical to one already queued or being read (same
  state, questions, instructions, draws, joint) is not read twice; both callers get the
  one answer.
* **Answer cache** (``cache_size``, off by default): a bounded LRU of answers keyed by a
  digest of the whole ``ReadRequest``. Only for deterministic readers (every model reader
  here is: a one-step read with a seeded canvas is a pure function of its request).
* **Back-pressure**: at most ``max_queue`` requests wait; a caller that finds the queue
  full waits for room (an async caller without blocking its event loop), at most
  ``queue_timeout_s`` when set, then gets ``QueueFullError``.
* **Failure isolation**: when a batch fails, its requests are read again one by one, so
  a bad request (a state too long, a special token) fails alone and the others get their
  answers. A cancelled caller (an async task cancelled, a timed-out wait) takes its
  requests out of the queue if they were not taken yet; nobody else is affected.
* **Abandoned reads**: a worker whose batch every caller gave up on (timed out,
  cancelled) stops counting toward ``concurrency``, so the next request starts a fresh
  worker instead of queueing behind a hung read. Python cannot stop a thread: the old
  worker finishes when the reader returns, then exits.
* **Interpreter exit**: workers are daemon threads, which Python stops wherever they are
  at exit; one stopped inside a native forward (torch) aborts the process ("terminate
  called without an active exception"). So at exit (``agentbranch.core.at_exit``, as
  ``concurrent.futures`` joins its workers) every coalescer stops taking batches and the
  reads in flight get up to ``at_exit.EXIT_WAIT_S`` in all to finish; a reader that hangs
  is left. A worker that ended by itself (idle) is waited for too: it may be the one
  freeing a coalescer nobody else holds, model and all.

Over 500 lines: one job, the coalescer, whose sync and async paths, burst hold and exit
handling share one lock and queue; split, that state would have to be shared across
modules. What it queues and reads (calls, items, batches, the de-duplication digest) is
in ``agentbranch.engine.batch_parts``; who called (the bookkeeping of the all-in and
settled rules, whether a lone caller is a fresh pool's first thread, and the event
loops' own look at their tasks, ``LoopWatch``) in ``agentbranch.engine.callers``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from concurrent.futures import CancelledError, Future
from typing import Any

from agentbranch.core.at_exit import COALESCERS, finish_at_exit, join_at_exit
from agentbranch.core.errors import ConfigurationError, ReaderError, ReaderTimeoutError
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine.batch_parts import (
    Batch,
    Call,
    Item,
    QueueFullError,
    hashable,
    one_call,
    read_key,
    similar_part,
)
from agentbranch.engine.callers import CallerThreads, LoopWatch, pool_is_starting, pool_thread
from agentbranch.engine.readers.base import Reader, WrappingReader

__all__ = ["BatchingReader", "QueueFullError", "read_key"]

#: A burst's batch is held at most this share of the last read's time (see above).
HOLD_SHARE = 0.5
#: How long a fresh pool's first caller waits for the pool's next thread to start.
POOL_PEEK_S = 0.0002
#: A quiet gap during which the process ran at least this share of one CPU was not
#: quiet: its threads were busy, and may be callers on their way (see above).
BUSY_SHARE = 0.5

# The process's CPU clock (all its threads), next to the coalescer's wall clock.
_cpu_clock = time.process_time


class BatchingReader(WrappingReader):
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
            that long (``window_s`` is the old name).
        max_queue: most requests waiting; further callers wait for room (back-pressure).
        queue_timeout_s: how long a caller waits for room before ``QueueFullError``
            (``None``: as long as it takes).
        concurrency: batches read at once (default: ``reader.concurrent_batches`` if the
            reader declares it, else 1 — one model reads one batch at a time).
        cache_size: answers kept in an LRU cache keyed by the request digest (0 = off).
        dedupe: share one read between identical requests in flight.
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
        window_s: float | None = None,
    ) -> None:
        wait = max_wait_s if max_wait_s is not None else window_s
        # The default wait applies only while other callers' requests are in flight.
        self._auto_wait = wait is None
        if wait is None:  # a reader that batches again itself need not wait here too
            wait = float(getattr(reader, "coalesce_wait_s", 0.002))
        concurrency = concurrency or int(getattr(reader, "concurrent_batches", 1) or 1)
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
        # exit, not by every arrival (see the module docstring).
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
        #: A held burst closes once every recent caller thread is waiting ("all in").
        self.close_when_all_in = True
        #: A lone caller from a pool's thread that never called before waits
        #: ``POOL_PEEK_S`` for the pool to start its next thread; if it did (a fresh
        #: pool: ``graph.batch``, a ``ToolNode``'s parallel calls) it is held as a
        #: burst's first, not read alone (its read would cost one more).
        self.hold_new_threads = True
        #: A held burst closes once nobody who could still arrive is running
        #: (``"settled"``): every caller thread's pool has started all its threads and
        #: each waits, and every caller event loop has nothing left to run.
        self.close_when_settled = True
        #: A held burst's quiet gap counts only if the process was quiet too: one during
        #: which it ran ``BUSY_SHARE`` of a CPU or more starts again (up to the bound).
        self.hold_while_busy = True
        #: A reader that declares ``pipelined_batch`` (its reads cost in proportion to
        #: their size and leave the GIL free: the embedded reader's traced embedding) is
        #: given at most that many requests at once: the rest of a burst arrives, and
        #: the first callers go on with their answers, while it reads. (Requests of one
        #: call alone, a ``decide_many``, are read in parts of ``max_batch``: nobody
        #: would go on early.)
        self.pipelined = True
        #: Counters: batches read, requests read, cache hits, de-duplicated requests,
        #: batches abandoned by all their callers while being read.
        self.stats = {"batches": 0, "requests": 0, "cache_hits": 0, "deduped": 0, "abandoned": 0}
        #: Sizes of the last batches read (for tests and the benchmark).
        self.batch_sizes: deque[int] = deque(maxlen=1024)
        #: Why each of the last batches closed, with its size: ``"alone"`` (a lone
        #: caller, read at once), ``"full"``, ``"quiet"`` (no arrival for the quiet
        #: gap), ``"all in"`` (every recent caller thread waits), ``"bound"`` (held as
        #: long as allowed) or ``"window"`` (an explicit ``max_wait_s`` elapsed).
        self.batch_closes: deque[tuple[int, str]] = deque(maxlen=1024)
        finish_at_exit(self._finish_at_exit, order=COALESCERS)

    @property
    def window_s(self) -> float:
        """The old name of ``max_wait_s``."""
        return self.max_wait_s

    # -- reading ---------------------------------------------------------------------

    def read(
        self, requests: Sequence[ReadRequest], *, timeout_s: float | None = None
    ) -> list[list[LabelRead]]:
        """Read ``requests`` in shared batches. ``timeout_s`` (the engine's): give up
        after that long with ``ReaderTimeoutError``; the requests are abandoned (not
        read if still queued, and a batch nobody waits for frees its worker's slot)."""
        call, pending = self._call(requests, threading.current_thread())
        until = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            deadline = self._deadline()
            while pending:
                room = self._offer(call, pending)
                if room is None:
                    break
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
        call, pending = self._call(requests, loop=loop)
        try:
            deadline = self._deadline()
            while pending:
                room = self._offer(call, pending)
                if room is None:
                    break
                try:
                    await asyncio.wait_for(asyncio.wrap_future(room), self._left(deadline))
                except TimeoutError:
                    raise self._full() from None
            waiter = asyncio.wrap_future(call.future)
            if self.close_when_settled:  # the loop says when its tasks are all in
                self._loops.watch(loop, waiter)
            try:
                return await waiter
            finally:
                self._loops.unwatch(loop, waiter)
        except BaseException:  # cancelled or failed: take our requests out of the queue
            call.future.cancel()
            raise

    def _call(
        self,
        requests: Sequence[ReadRequest],
        thread: threading.Thread | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> tuple[Call, deque[tuple[int, ReadRequest]]]:
        requests = list(requests)
        call = Call([None] * len(requests), len(requests), thread=thread, loop=loop)
        if not requests:
            call.future.set_result([])
            return call, deque()
        # Shortest state first: the reads a call is cut into (``max_batch``,
        # ``pipelined_batch``) then each hold states of similar length, and a reader
        # that pads (every torch reader) pads each little (answers keep their places).
        return call, deque(sorted(enumerate(requests), key=lambda pair: len(pair[1].state)))

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
        if self.close_when_settled:  # a task busy when its loop last looked may wait now
            self._loops.look_again()
        try:
            while not self._ready():
                if why := self._nobody_left():
                    return why
                at, why = self._close_at(start + self._hold_bound_s(gap), gap)
                left = at - time.monotonic()
                if left <= 0:
                    if why == "quiet" and self.hold_while_busy and self._busy():
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
        if starter is None or not self.hold_new_threads:
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
        are queued or being read, or (``close_when_all_in``) the last batch served
        several callers and a thread of theirs that came back before is expected back
        soon (a pool of threads cycling through its inputs: its first thread back would
        otherwise be read alone, and the rest of the pool would follow in a batch of
        their own, 1 + 5, 1 + 5 ...)."""
        if self._queue or any(item.wanted() for batch in self._reading for item in batch.items):
            return True
        return (
            self.close_when_all_in
            and self._last_callers >= 2
            and self._callers.back_by(self._since()) > time.monotonic()
        )

    def _since(self) -> float:
        """Callers seen since then are "recent": three reads' time, at least 0.1 s."""
        return time.monotonic() - max(0.1, 3 * self._last_read_s)

    def _nobody_left(self) -> str | None:
        """Why nobody is left to arrive, so that waiting for a quiet gap would only cost
        time (``agentbranch.engine.callers``): ``"all in"`` (every thread that called
        lately waits for answers now, a pool that cycles), ``"settled"`` (nobody who
        could still call is running), else ``None``."""
        since = self._since()
        if self.close_when_all_in and self._callers.all_in(since):
            return "all in"
        if self.close_when_settled and self._callers.settled(since):
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
        ``pipelined_batch`` when smaller (``pipelined``)."""
        part = getattr(self.inner, "pipelined_batch", None) if self.pipelined else None
        return min(self.max_batch, part) if part else self.max_batch

    def _close_at(self, bound: float, gap: float) -> tuple[float, str]:
        """When a held burst's batch closes unless more arrives (and why): the quiet gap
        after the last arrival (or, with ``close_when_all_in``, once the threads that
        are out should be back, if later), or the bound, whichever comes first."""
        quiet = self._last_arrival + gap
        if self.close_when_all_in:
            quiet = max(quiet, self._callers.back_by(self._since()))
        return (quiet, "quiet") if quiet <= bound else (bound, "bound")

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
        start = time.monotonic()
        try:
            reads = self.inner.read([item.request for item in batch])
            if len(reads) != len(batch):
                raise ReaderError(
                    f"reader {self.inner.name!r} answered {len(reads)} of {len(batch)} "
                    "batched requests"
                )
        except BaseException as e:  # noqa: BLE001 - delivered to the callers
            # Anything the reader raises reaches its callers, never the worker alone (a
            # dead worker would leave them waiting). Exceptions proper get a re-read.
            if len(batch) > 1 and isinstance(e, Exception):
                # Which request failed? Read each alone: a bad one fails alone.
                for item in batch:
                    if item.wanted():
                        self._read([item])
                    else:
                        self._settle(item, None, None)
                return
            for item in batch:
                self._settle(item, None, e)
            return
        with self._cond:
            self._last_read_s = time.monotonic() - start
            self._last_read_size = len(batch)
            self.stats["batches"] += 1
            self.stats["requests"] += len(batch)
            self.batch_sizes.append(len(batch))
        for item, item_reads in zip(batch, reads):
            self._settle(item, item_reads, None)

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
