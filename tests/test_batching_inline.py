"""A lone sync caller reads its batch on its own thread (``read_alone_inline``, off by
default): the same answers, callers arriving meanwhile are served after it by a worker,
errors reach every caller, a timed caller still hands its read to a worker, one read at
a time."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import agentbranch as ab
from agentbranch.core.errors import ReaderTimeoutError

TEAM = ab.choice("Which team?", ["billing", "outage", "bug"])


def spread(state: str, q):
    """A distribution that differs per state (so a mixed-up answer is caught)."""
    h = int(hashlib.sha256(f"{state}/{q.id}".encode()).hexdigest(), 16)
    weights = [1 + (h >> (8 * i)) % 97 for i in range(len(q.options))]
    return {o: w / sum(weights) for o, w in zip(q.options, weights)}


class Recording(ab.ScriptedReader):
    """Records the thread of every read and the most reads in flight at once; reads
    wait for ``gate``; a state containing "poison" fails its batch."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.threads: list[threading.Thread] = []
        self.in_flight = 0
        self.most = 0
        self._lock = threading.Lock()

    def read(self, requests):
        with self._lock:
            self.threads.append(threading.current_thread())
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        self.entered.set()
        try:
            assert self.gate.wait(30), "test gate never opened"
            if any("poison" in r.state for r in requests):
                raise ValueError("poisoned state")
            return super().read(requests)
        finally:
            with self._lock:
                self.in_flight -= 1


def _inline(reader, **kwargs) -> ab.DecisionEngine:
    engine = ab.DecisionEngine(reader, **kwargs)
    engine.reads_via.read_alone_inline = True
    return engine


def _plain(states):
    engine = ab.DecisionEngine(ab.ScriptedReader(default=spread), batching=False)
    return [engine.decide(s, {"team": TEAM})["team"].probabilities for s in states]


def _wait_for_queue(coalescer, n: int) -> None:
    for _ in range(3000):
        if len(coalescer._queue) >= n:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{n} requests never queued")


@pytest.mark.parametrize("inline", [True, False])
def test_a_lone_caller_reads_on_its_own_thread_only_when_inline(inline: bool) -> None:
    reader = Recording(default=spread)
    engine = ab.DecisionEngine(reader)
    assert engine.reads_via.read_alone_inline is False  # off by default
    engine.reads_via.read_alone_inline = inline
    got = [engine.decide(s, {"team": TEAM})["team"].probabilities for s in ("a", "b")]
    assert got == _plain(["a", "b"])
    on_caller = [t is threading.current_thread() for t in reader.threads]
    assert on_caller == [inline, inline]
    assert list(engine.reads_via.batch_closes) == [(1, "alone"), (1, "alone")]
    engine.close()


def test_callers_arriving_during_an_inline_read_are_read_after_it_by_a_worker() -> None:
    reader = Recording(default=spread)
    reader.gate.clear()
    engine = _inline(reader)
    coalescer = engine.reads_via
    states = [f"ticket {i}" for i in range(6)]
    with ThreadPoolExecutor(len(states)) as pool:
        first = pool.submit(engine.decide, states[0], {"team": TEAM})
        assert reader.entered.wait(10)  # the lone caller reads on its thread
        rest = [pool.submit(engine.decide, s, {"team": TEAM}) for s in states[1:]]
        _wait_for_queue(coalescer, len(rest))
        assert len(reader.threads) == 1  # no worker reads while the slot is taken
        reader.gate.set()
        got = [f.result(timeout=20)["team"].probabilities for f in [first, *rest]]
    assert got == _plain(states)
    assert [len(c) for c in reader.calls] == [1, 5]
    assert reader.most == 1
    assert reader.threads[1].name == "agentbranch-batch"
    assert list(coalescer.batch_closes) == [(1, "alone"), (5, "quiet")]
    engine.close()


def test_an_inline_read_that_fails_fails_its_caller_and_those_who_joined_it() -> None:
    reader = Recording(default=spread)
    reader.gate.clear()
    engine = _inline(reader)
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(engine.decide, "poison", {"team": TEAM})
        assert reader.entered.wait(10)
        # the same request joins the read in flight; another one queues behind it
        joined = pool.submit(engine.decide, "poison", {"team": TEAM})
        other = pool.submit(engine.decide, "fine", {"team": TEAM})
        _wait_for_queue(engine.reads_via, 1)
        reader.gate.set()
        for f in (first, joined):
            with pytest.raises(ab.ReaderError, match="poisoned state"):
                f.result(timeout=20)
        assert other.result(timeout=20)["team"].probabilities == _plain(["fine"])[0]
    coalescer = engine.reads_via
    assert coalescer.stats["deduped"] == 1
    # its failure frees no worker slot: it never took one (nothing "abandoned")
    assert coalescer.stats["abandoned"] == 0 and coalescer._workers >= 0
    engine.close()


def test_a_caller_with_a_timeout_hands_its_read_to_a_worker_and_times_out() -> None:
    reader = Recording(default=spread)
    reader.gate.clear()
    engine = _inline(reader, timeout_s=0.2)
    with pytest.raises(ReaderTimeoutError):
        engine.decide("hangs", {"team": TEAM})
    assert reader.threads[0] is not threading.current_thread()
    reader.gate.set()
    assert engine.decide("then", {"team": TEAM})["team"].probabilities == _plain(["then"])[0]
    engine.close()


def test_close_waits_for_an_inline_read_and_the_reader_answers_it() -> None:
    reader = Recording(default=spread)
    reader.gate.clear()
    engine = _inline(reader)
    with ThreadPoolExecutor(1) as pool:
        lone = pool.submit(engine.decide, "a", {"team": TEAM})
        assert reader.entered.wait(10)
        threading.Timer(0.1, reader.gate.set).start()
        engine.reads_via._stop_workers(None)  # waits for the read (up to 5 s)
        assert lone.done()
        assert lone.result()["team"].probabilities == _plain(["a"])[0]


def test_after_a_batch_of_several_callers_a_lone_caller_hands_off() -> None:
    # It may be the first of the next burst: a worker's batch lets the others join it.
    reader = Recording(default=spread)
    engine = _inline(reader)
    engine.decide_many(["x", "y"], {"team": TEAM})  # one caller: inline
    coalescer = engine.reads_via
    coalescer._last_callers = 2  # as after a burst's batch (two callers)
    assert engine.decide("z", {"team": TEAM})["team"].probabilities == _plain(["z"])[0]
    assert engine.decide("w", {"team": TEAM})["team"].probabilities == _plain(["w"])[0]
    on_caller = [t is threading.current_thread() for t in reader.threads]
    assert on_caller == [True, False, True]  # after one caller's batch: inline again
    engine.close()
