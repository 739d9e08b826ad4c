"""Where a burst starts and how long it may be held: a fresh pool's first caller is
held for the pool (``hold_new_threads``), and a burst larger than the last read is held
for its own read time, not for one request's. Nothing here depends on timing: reads wait
on gates, the hold's clock is faked, and the quiet gap only needs to pass at all."""

from __future__ import annotations

import threading
import types
from concurrent.futures import ThreadPoolExecutor

import pytest
from _batching_fixtures import SCRIPT, TEAM, FakeClock, GatedReader, _wait_for_queue
from agentbranch_bench.levers import LeverReader

import agentbranch as ab
from agentbranch.engine import batching
from agentbranch.engine.batching import CallerThreads, pool_is_starting


def _here() -> bool:
    return pool_is_starting(threading.current_thread())


def _in_thread(name: str, fn):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("v", fn()), name=name)
    t.start()
    t.join(20)
    return out["v"]


def test_a_pool_is_starting_when_another_thread_of_it_is_alive():
    gate = threading.Event()
    with ThreadPoolExecutor(2, thread_name_prefix="pool-a") as pool:
        assert pool.submit(_here).result() is False  # its only thread
        pool.submit(gate.wait, 20)  # the first thread is busy: a second one starts
        assert pool.submit(_here).result() is True
        gate.set()
    # a thread per request, a lone worker, the main thread: no pool
    assert not _in_thread("worker", _here)
    assert not pool_is_starting(threading.main_thread())
    # a name that only shares a longer prefix is not a mate ("pool-1_0" vs "pool-10_0")
    other = threading.Event()
    mate = threading.Thread(target=other.wait, args=(20,), name="pool-10_0")
    mate.start()
    try:
        assert not _in_thread("pool-1_0", _here)
        assert _in_thread("pool-10_1", _here)
    finally:
        other.set()
        mate.join(20)


def test_a_thread_is_new_until_it_calls():
    c = CallerThreads()
    me = threading.current_thread()
    assert c.is_new(me) and c.is_new(7)
    c.arrive(me, 0.0)
    c.arrive(7, 0.0)  # keys that cannot be weakly referenced work too
    assert not c.is_new(me) and not c.is_new(7)
    assert not c.is_new(None)  # an async caller is never new


def _first_calls(hold: bool) -> list[tuple[int, str]]:
    inner = ab.ScriptedReader(SCRIPT)
    engine = ab.DecisionEngine(LeverReader(inner))
    coalescer = engine.reads_via
    coalescer.hold_new_threads = hold
    gate = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        pool.submit(gate.wait, 20)  # one thread of the pool is up and busy
        # a second thread starts for this call: new, with a mate alive
        assert (
            pool.submit(engine.decide, "charged twice", {"team": TEAM}).result(20)["team"].label
            == "billing"
        )
        # the same thread again: it called before
        assert (
            pool.submit(engine.decide, "site down", {"team": TEAM}).result(20)["team"].label
            == "outage"
        )
        gate.set()
    closes = list(coalescer.batch_closes)
    engine.close()
    return closes


def test_a_fresh_pools_first_caller_is_held_for_the_rest_of_the_pool():
    # held (until the quiet gap, or the bound if the process stayed busy), then alone
    assert _first_calls(hold=True) in ([(1, "quiet"), (1, "alone")], [(1, "bound"), (1, "alone")])
    assert _first_calls(hold=False) == [(1, "alone"), (1, "alone")]


def test_a_single_thread_pool_is_read_at_once():
    # one tool call of a ToolNode runs in a pool of its own thread
    engine = ab.DecisionEngine(ab.ScriptedReader(SCRIPT))
    with ThreadPoolExecutor(1) as pool:
        pool.submit(engine.decide, "charged twice", {"team": TEAM}).result(20)
    assert list(engine.reads_via.batch_closes) == [(1, "alone")]
    engine.close()


def test_a_burst_larger_than_the_last_read_is_held_for_its_own_read_time(monkeypatch):
    # The first read (one request) takes 1 s; four callers queue behind it and arrivals
    # never pause. The bound is half what reading the four should take at the last
    # read's time per request (2 s), not half the last read (0.5 s).
    clock = FakeClock()
    fake = types.SimpleNamespace(monotonic=clock.monotonic)
    monkeypatch.setattr(batching, "time", fake)
    inner = GatedReader(SCRIPT)
    coalescer = LeverReader(inner)
    coalescer.hold_new_threads = False  # the first caller is read alone
    engine = ab.DecisionEngine(coalescer)
    tickets = ["site down", "button broken", "charged again", "down again"]
    with ThreadPoolExecutor(5) as pool:
        first = pool.submit(engine.decide, "charged twice", {"team": TEAM})
        assert inner.entered.wait(10)
        clock.t += 1.0
        rest = [pool.submit(engine.decide, t, {"team": TEAM}) for t in tickets]
        _wait_for_queue(coalescer, len(tickets))
        inner.gate.set()
        assert first.result(timeout=20)["team"].label == "billing"
        held_from = clock.t
        while not all(f.done() for f in rest) and clock.t < held_from + 10:
            with coalescer._cond:
                clock.t += 0.001
                coalescer._last_arrival = clock.t
            threading.Event().wait(0.0005)
        labels = [f.result(timeout=20)["team"].label for f in rest]
    assert labels == ["outage", "bug", "billing", "outage"]
    assert list(coalescer.batch_closes) == [(1, "alone"), (4, "bound")]
    assert clock.t - held_from >= batching.HOLD_SHARE * 4 * 1.0
    assert clock.t - held_from < 5  # ... and closed by the bound, not held forever
    engine.close()


def _until(check, what: str) -> None:
    for _ in range(3000):
        if check():
            return
        threading.Event().wait(0.01)
    raise AssertionError(what)


@pytest.mark.parametrize("hold_while_busy", [True, False])
def test_a_quiet_gap_while_the_process_is_busy_starts_again(monkeypatch, hold_while_busy):
    # Both clocks are faked: the wall clock and the process's CPU clock move only when
    # the test moves them, under the coalescer's lock. A gap with no arrival but the
    # process at full CPU (callers still starting their runs) is not quiet; the next
    # gap, idle, is. With hold_while_busy off the busy gap closes the batch.
    clock = FakeClock()
    cpu = {"t": 0.0}
    fake = types.SimpleNamespace(monotonic=clock.monotonic)
    monkeypatch.setattr(batching, "time", fake)
    monkeypatch.setattr(batching, "_cpu_clock", lambda: cpu["t"])
    inner = GatedReader(SCRIPT)
    coalescer = LeverReader(inner)
    coalescer.hold_new_threads = False  # the first caller is read alone
    coalescer.hold_while_busy = hold_while_busy
    engine = ab.DecisionEngine(coalescer)
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(engine.decide, "charged twice", {"team": TEAM})
        assert inner.entered.wait(10)
        clock.t += 1.0  # the first read takes 1 s: the burst may be held 0.5 s
        rest = [pool.submit(engine.decide, t, {"team": TEAM}) for t in ("site down", "bug")]
        _wait_for_queue(coalescer, 2)
        inner.gate.set()
        first.result(timeout=20)
        _until(lambda: coalescer._holding, "the burst was never held")
        with coalescer._cond:  # 10 ms without an arrival, the process busy all along
            clock.t += 0.010
            cpu["t"] += 0.010
            busy_from = clock.t
        if hold_while_busy:
            _until(lambda: coalescer._last_arrival == busy_from, "the gap never started again")
            assert coalescer._queue and not any(f.done() for f in rest)
            with coalescer._cond:  # 10 ms more, the process idle: quiet
                clock.t += 0.010
        labels = [f.result(timeout=20)["team"].label for f in rest]
    assert labels == ["outage", "bug"]
    assert list(coalescer.batch_closes) == [(1, "alone"), (2, "quiet")]
    # closed after the gap started again, or by the busy gap itself
    assert (coalescer._last_arrival == busy_from) is hold_while_busy
    engine.close()
