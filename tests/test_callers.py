"""``CallerThreads``: who waits, who came lately, when the ones out should be back
(times are given, nothing sleeps)."""

from __future__ import annotations

import math

from agentbranch.engine.batching import TURNAROUND_MARGIN, CallerThreads


def test_all_in_needs_every_recent_thread_waiting_two_of_them_and_a_cycle():
    c = CallerThreads()
    c.arrive(1, 0.0)
    assert not c.all_in(since=-1.0)  # one thread is not a pool
    c.arrive(2, 0.1)
    assert not c.all_in(since=-1.0)  # both wait, but nobody came back yet: starting up
    c.leave(1, 0.2)
    assert not c.all_in(since=-1.0)  # thread 1 is out
    c.arrive(1, 0.3)
    assert c.all_in(since=-1.0)  # thread 1 came back: a cycling pool, all in
    c.leave(1, 0.4)
    c.arrive(3, 0.5)
    assert not c.all_in(since=-1.0)  # thread 1 is out again
    assert c.all_in(since=0.45) is False  # 1 forgotten; 2 and 3 never came back


def test_a_waiting_thread_is_never_forgotten():
    c = CallerThreads()
    c.arrive(1, 0.0)
    c.arrive(2, 0.0)
    assert c.recent(since=10.0) == [1, 2]  # both still wait, however long ago they came


def test_an_async_caller_turns_the_rules_off():
    c = CallerThreads()
    c.arrive(1, 0.0)
    c.arrive(2, 0.0)
    c.arrive(None, 0.5)
    assert not c.all_in(since=0.0)
    assert c.back_by(since=0.0) == -math.inf


def test_back_by_waits_only_for_threads_that_came_back_before():
    c = CallerThreads()
    c.arrive(1, 0.0)
    c.leave(1, 1.0)
    assert c.back_by(since=0.0) == -math.inf  # seen once: no turnaround yet
    c.arrive(1, 1.5)  # came back 0.5 s after its answer
    c.leave(1, 2.0)
    assert c.back_by(since=0.0) == 2.0 + TURNAROUND_MARGIN * 0.5
    c.arrive(1, 2.2)
    assert c.back_by(since=0.0) == -math.inf  # back: nobody is out


def test_a_pool_still_starting_its_threads_is_not_all_in():
    # A fresh pool of many threads: its first thread is answered and back for another
    # input while most threads called once; more of them may still be starting.
    c = CallerThreads()
    c.arrive(1, 0.0)
    c.leave(1, 0.02)
    for t in range(2, 6):
        c.arrive(t, 0.01 + t / 1000)
    c.arrive(1, 0.021)  # back: one of five came back
    assert not c.all_in(since=-1.0)
    for t in range(2, 4):  # two more came back: three of five, a pool that cycles
        c.leave(t, 0.03)
        c.arrive(t, 0.031)
    assert c.all_in(since=-1.0)


def test_threads_that_ended_are_swept_so_lone_callers_do_not_pile_up():
    # A thread per request calls once and ends; no burst ever asks who came lately,
    # so without a sweep every one of them would be kept (with its Thread object).
    import threading

    from agentbranch.engine.batching import SWEEP_AT

    c = CallerThreads()
    parked = threading.Event()
    alive = threading.Thread(target=parked.wait, args=(20,))
    alive.start()
    c.arrive(alive, 0.0)
    c.leave(alive, 0.1)  # alive but done: may call again, kept
    for i in range(5 * SWEEP_AT):
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        c.arrive(t, 1.0 + i)
        c.leave(t, 1.5 + i)
    assert len(c.seen) <= 2 * SWEEP_AT and len(c.answered) == len(c.seen)
    assert alive in c.seen
    waiting = threading.Thread(target=lambda: None)
    waiting.start()
    waiting.join()
    c.arrive(waiting, 9e9)  # ended (a key no longer running) but still counted waiting
    for _ in range(3 * SWEEP_AT):
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        c.arrive(t, 9e9)
        c.leave(t, 9e9)
    assert waiting in c.seen and c.waiting[waiting] == 1  # never forgotten while waiting
    parked.set()
    alive.join(20)
