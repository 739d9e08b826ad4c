"""A held burst closes the moment nobody who could still call is running ("settled"):
every caller thread's pool has started all its threads and each of them waits, and every
caller event loop has run all it had ready. Nothing here depends on timing: the
coalescer's clock is frozen, so a quiet gap or a bound can never close a batch, and
reads wait on gates."""

from __future__ import annotations

import asyncio
import threading
import types
from concurrent.futures import ThreadPoolExecutor

import pytest
from _batching_fixtures import SCRIPT, TEAM, TICKETS, FakeClock, GatedReader, _wait_for_queue
from agentbranch_bench.levers import LeverReader

import agentbranch as ab
from agentbranch.engine import batching
from agentbranch.engine.batching import CallerThreads, executor_of, pool_all_waiting


def _pool_threads(
    pool: ThreadPoolExecutor, n: int
) -> tuple[list[threading.Thread], threading.Event]:
    """Start ``n`` threads of ``pool``, each parked on the returned event."""
    release = threading.Event()
    barrier = threading.Barrier(n + 1)
    seen: list[threading.Thread] = []

    def park() -> None:
        seen.append(threading.current_thread())
        barrier.wait(20)
        release.wait(20)

    for _ in range(n):
        pool.submit(park)
    barrier.wait(20)
    return seen, release


def test_a_pool_is_settled_once_it_started_every_thread_and_each_waits():
    with ThreadPoolExecutor(3) as pool:
        threads, release = _pool_threads(pool, 3)
        assert all(executor_of(t) is pool for t in threads)
        c = CallerThreads()
        for t in threads[:2]:
            c.arrive(t, 10.0)
        assert not c.settled(0.0)  # the third thread may still call
        c.arrive(threads[2], 10.0)
        assert c.settled(0.0) and pool_all_waiting(pool, 3)
        c.leave(threads[0], 11.0)  # answered: it may call again
        assert not c.settled(0.0)
        release.set()


def test_a_pools_last_thread_counts_before_its_executor_lists_it():
    # ThreadPoolExecutor adds a thread to its ``_threads`` only after the thread
    # started, and the thread may call first: the burst is in all the same.
    with ThreadPoolExecutor(3) as pool:
        threads, release = _pool_threads(pool, 3)
        pool._threads.discard(threads[2])  # as just before the executor adds it
        try:
            c = CallerThreads()
            for t in threads:
                c.arrive(t, 10.0)
            assert c.settled(0.0)
            c.leave(threads[1], 11.0)
            assert not c.settled(0.0)
        finally:
            pool._threads.add(threads[2])
            release.set()


def test_a_pool_that_may_start_more_threads_is_not_settled():
    with ThreadPoolExecutor(4) as pool:  # room for a fourth thread
        threads, release = _pool_threads(pool, 3)
        c = CallerThreads()
        for t in threads:
            c.arrive(t, 10.0)
        assert not c.settled(0.0)
        release.set()


def test_a_thread_of_no_pool_leaves_it_off():
    c = CallerThreads()
    assert executor_of(threading.current_thread()) is None
    assert executor_of(7) is None  # a key that is no thread at all
    c.arrive(threading.current_thread(), 10.0)
    assert not c.settled(0.0)
    assert not CallerThreads().settled(0.0)  # nobody called: nothing to close


def test_a_finished_pools_threads_and_a_closed_loop_do_not_hold_it_open():
    c = CallerThreads()
    with ThreadPoolExecutor(2) as old:
        threads_old, release_old = _pool_threads(old, 2)
        for t in threads_old:
            c.arrive(t, 10.0)
            c.leave(t, 10.5)
        release_old.set()
    for t in threads_old:
        t.join(20)
    loop = asyncio.new_event_loop()
    c.arrive(None, 10.0, loop)
    c.leave(None, 10.5, loop)
    loop.close()
    with ThreadPoolExecutor(2) as pool:
        threads, release = _pool_threads(pool, 2)
        for t in threads:
            c.arrive(t, 11.0)
        assert c.settled(0.0)
        release.set()


#: How long a test waits for a burst that should close at once (if the rule broke, the
#: frozen clock would hold it forever: the test fails after this instead of hanging).
WAIT_S = 20


def _run_guarded(main, engine: ab.DecisionEngine):
    """``asyncio.run(main())``, closing ``engine`` after ``WAIT_S`` if it is still
    running: that fails a batch held forever, so a broken rule fails the test instead
    of hanging it. (A watchdog thread, not ``asyncio.wait_for``: on Python 3.11 that
    makes the awaiting task wait on a future of its own, which is not an answer.)"""
    watchdog = threading.Timer(WAIT_S, engine.close)
    watchdog.start()
    try:
        return asyncio.run(main())
    finally:
        watchdog.cancel()
        engine.close()


def _frozen(monkeypatch) -> FakeClock:
    clock = FakeClock()
    fake = types.SimpleNamespace(monotonic=clock.monotonic)
    monkeypatch.setattr(batching, "time", fake)
    return clock


def test_a_fresh_pools_burst_closes_when_its_last_thread_queues(monkeypatch):
    _frozen(monkeypatch)  # no quiet gap or bound can close the batch
    engine = ab.DecisionEngine(ab.ScriptedReader(SCRIPT))
    barrier = threading.Barrier(len(TICKETS))

    def decide(ticket: str) -> str:
        barrier.wait(20)  # every thread of the pool is up before the first call
        return engine.decide(ticket, {"team": TEAM})["team"].label

    with ThreadPoolExecutor(len(TICKETS)) as pool:
        try:
            futures = [pool.submit(decide, t) for t in TICKETS]
            labels = [f.result(timeout=WAIT_S) for f in futures]
        finally:
            engine.close()  # fails a batch still held, so a broken rule fails, not hangs
    assert labels == ["billing", "outage", "bug", "billing", "outage"]
    assert list(engine.reads_via.batch_closes) == [(len(TICKETS), "settled")]
    engine.close()


@pytest.mark.parametrize("timeout_s", [None, 60.0], ids=["no timeout", "engine timeout"])
def test_an_async_burst_closes_once_its_loop_has_run_everything_ready(monkeypatch, timeout_s):
    # With the engine's timeout_s each task awaits its read under a timeout: still the read.
    _frozen(monkeypatch)
    inner = GatedReader(SCRIPT)
    engine = ab.DecisionEngine(inner, timeout_s=timeout_s)
    coalescer = engine.reads_via

    async def main() -> list[str]:
        first = asyncio.ensure_future(engine.adecide("charged twice", {"team": TEAM}))
        await asyncio.sleep(0)  # the first caller is alone: read at once (gated)
        await asyncio.to_thread(inner.entered.wait, 20)
        rest = [asyncio.ensure_future(engine.adecide(t, {"team": TEAM})) for t in TICKETS[1:]]
        await asyncio.to_thread(_wait_for_queue, coalescer, len(rest))
        inner.gate.set()
        done = await asyncio.gather(first, *rest)
        return [d["team"].label for d in done]

    labels = _run_guarded(main, engine)
    assert labels == ["billing", "outage", "bug", "billing", "outage"]
    assert list(coalescer.batch_closes) == [(1, "alone"), (len(TICKETS) - 1, "settled")]


def test_with_the_lever_off_nobody_is_taken_to_be_left(monkeypatch):
    with ThreadPoolExecutor(2) as pool:
        threads, release = _pool_threads(pool, 2)
        coalescer = LeverReader(ab.ScriptedReader(SCRIPT))
        for t in threads:
            coalescer._callers.arrive(t, batching.time.monotonic())
        assert coalescer._nobody_left() == "settled"
        coalescer.close_when_settled = False
        assert coalescer._nobody_left() is None
        release.set()
        coalescer.close()


def test_a_task_waiting_on_anything_else_keeps_the_burst_open(monkeypatch):
    # A task of the loop awaits something that is not an answer (a checkpointer's write,
    # say): it may still call, so the burst is not settled until it did.
    _frozen(monkeypatch)  # no quiet gap or bound can close the batch
    inner = GatedReader(SCRIPT)
    engine = ab.DecisionEngine(inner)
    coalescer = engine.reads_via

    async def main() -> list[str]:
        written = asyncio.Event()

        async def after_write(ticket: str):
            await written.wait()
            return await engine.adecide(ticket, {"team": TEAM})

        first = asyncio.ensure_future(engine.adecide("charged twice", {"team": TEAM}))
        await asyncio.sleep(0)  # the first caller is alone: read at once (gated)
        await asyncio.to_thread(inner.entered.wait, 20)
        rest = [asyncio.ensure_future(engine.adecide(t, {"team": TEAM})) for t in TICKETS[1:4]]
        late = asyncio.ensure_future(after_write(TICKETS[4]))
        await asyncio.to_thread(_wait_for_queue, coalescer, len(rest))
        inner.gate.set()
        await first  # the burst of three is held now, the late task still writing
        await asyncio.sleep(0.05)
        written.set()
        done = await asyncio.gather(first, *rest, late)
        return [d["team"].label for d in done]

    labels = _run_guarded(main, engine)
    assert labels == ["billing", "outage", "bug", "billing", "outage"]
    assert list(coalescer.batch_closes) == [(1, "alone"), (len(TICKETS) - 1, "settled")]


class _LoopWithoutReadyQueue:
    """An event loop this module cannot look into (as uvloop)."""

    def __init__(self) -> None:
        self.soon: list = []

    def call_soon(self, fn, *args):
        self.soon.append((fn, args))

    def is_closed(self) -> bool:
        return False


@pytest.mark.parametrize("ready", [None, ["a callback"]])
def test_a_loop_that_cannot_be_looked_into_or_is_busy_is_not_settled(ready):
    coalescer = LeverReader(ab.ScriptedReader(SCRIPT))
    loop = _LoopWithoutReadyQueue()
    if ready is not None:
        loop._ready = ready
    coalescer._callers.arrive(None, batching.time.monotonic(), loop)
    coalescer._loops.watch(loop, object())
    fn, args = loop.soon.pop()
    fn(*args)
    assert coalescer._nobody_left() is None
    # a busy loop is looked at again after what is ready; one that cannot be, never
    assert len(loop.soon) == (0 if ready is None else 1)
    assert coalescer._callers.loops[loop].unknown == (ready is None)
    coalescer.close()
