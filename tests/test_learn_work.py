"""Learning's own thread at interpreter exit: the task in flight finishes (or stops at
its next step when it is long), what is queued never starts, and nothing waits forever."""

from __future__ import annotations

import threading
import time

from agentbranch.policy.earned.learn.loop import Stopped, Work


def test_a_long_task_stops_at_its_next_step_when_the_process_exits():
    work = Work("test-learn")
    started, steps = threading.Event(), []

    def rebuild() -> None:  # a restart's rebuild: many native steps, closing checked between
        started.set()
        for i in range(10_000):
            if work.closing:
                raise Stopped
            steps.append(i)
            time.sleep(0.01)

    work.submit(rebuild)
    assert started.wait(30)
    begun = time.monotonic()
    work._finish_at_exit(time.monotonic() + 60)
    assert time.monotonic() - begun < 30  # one step, not the 100 s task
    assert len(steps) < 10_000
    assert work.wait(1) is False  # exiting: nothing is done any more, nobody waits


def test_what_is_queued_at_exit_never_starts():
    work = Work("test-learn")
    gate, ran = threading.Event(), []
    work.submit(gate.wait, 30)  # the task in flight
    work.submit(ran.append, "queued")
    closing = threading.Thread(target=work._finish_at_exit, args=(time.monotonic() + 60,))
    closing.start()
    deadline = time.monotonic() + 30
    while not work.closing and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    closing.join(60)
    time.sleep(0.1)
    assert ran == []
    work.submit(ran.append, "after")  # nothing new starts either
    time.sleep(0.1)
    assert ran == []
