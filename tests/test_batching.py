"""BatchingReader: concurrent decisions coalesce into reader batches, each caller gets
its own answers, failures and cancellations stay with their caller, a full queue pushes
back.

Where a test needs one batch, the window is long (seconds) and ``max_batch`` equals the
number of concurrent callers, so the batch closes as soon as everyone has arrived; where
it needs a read in flight, the reader blocks on an event. No test depends on timing.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TypedDict

import pytest
from _batching_fixtures import (
    SCRIPT,
    TEAM,
    TICKETS,
    FakeClock,
    GatedReader,
    PipelinedReader,
    _wait_for_queue,
    spread,
)
from agentbranch_bench.levers import LeverReader

import agentbranch as ab
from agentbranch.core.errors import ReaderError
from agentbranch.core.reads import ReadRequest
from agentbranch.engine.batching import BatchingReader, QueueFullError, read_key

EXPECTED = ["billing", "outage", "bug", "billing", "outage"]


def test_wrapper_reports_the_inner_reader():
    inner = ab.ScriptedReader(model="m1", max_options=7)
    b = BatchingReader(inner)
    assert (b.name, b.model, b.max_options) == ("scripted", "m1", 7)
    d = ab.DecisionEngine(b).decide("x", {"team": TEAM})["team"]
    assert d.reader == "scripted" and d.model == "m1"


def test_threads_share_one_batch():
    inner = ab.ScriptedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=10, max_batch=len(TICKETS)))
    results: dict[int, str] = {}
    barrier = threading.Barrier(len(TICKETS))

    def work(i: int) -> None:
        barrier.wait()
        results[i] = engine.decide(TICKETS[i], {"team": TEAM})["team"].label

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(TICKETS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(len(TICKETS))] == EXPECTED
    assert len(inner.calls) == 1
    assert sorted(r.state for r in inner.calls[0]) == sorted(TICKETS)


def test_async_tasks_share_one_batch():
    inner = ab.ScriptedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=10, max_batch=len(TICKETS)))

    async def main():
        return await asyncio.gather(*(engine.adecide(t, {"team": TEAM}) for t in TICKETS))

    decisions = asyncio.run(main())
    assert [d["team"].label for d in decisions] == EXPECTED
    assert len(inner.calls) == 1 and len(inner.calls[0]) == len(TICKETS)


def test_decide_many_is_split_into_max_batch_chunks():
    inner = ab.ScriptedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=0, max_batch=2))
    out = engine.decide_many(TICKETS, {"team": TEAM})
    assert [d["team"].label for d in out] == EXPECTED
    assert [len(c) for c in inner.calls] == [2, 2, 1]


def test_sequential_calls_are_separate_batches():
    inner = ab.ScriptedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=0))
    engine.decide("a", {"team": TEAM})
    engine.decide("b", {"team": TEAM})
    assert [len(c) for c in inner.calls] == [1, 1]


class SlowToGather(ab.ScriptedReader):
    """A reader whose default coalescing wait is long (the default is 2 ms)."""

    coalesce_wait_s = 30.0


def test_a_lone_caller_is_read_at_once_by_default():
    # With the default wait, a caller that finds no other caller's request in flight
    # is not held for a burst: nothing here could take the 30 s wait.
    inner = SlowToGather(SCRIPT)
    coalescer = BatchingReader(inner)
    assert coalescer.max_wait_s == 30.0
    engine = ab.DecisionEngine(coalescer)
    done = threading.Event()
    worker = threading.Thread(
        target=lambda: (
            (engine.decide("a", {"team": TEAM}), engine.decide("b", {"team": TEAM})) and done.set()
        )
    )
    worker.start()
    assert done.wait(20), "a lone caller waited for a burst"
    assert [len(c) for c in inner.calls] == [1, 1]
    assert list(coalescer.batch_closes) == [(1, "alone"), (1, "alone")]
    engine.close()


def test_the_default_wait_gathers_callers_that_arrive_while_others_are_in_flight():
    inner = GatedReader(SCRIPT)
    inner.coalesce_wait_s = 30.0
    engine = ab.DecisionEngine(BatchingReader(inner, max_batch=2))
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(engine.decide, "charged twice", {"team": TEAM})
        assert inner.entered.wait(10)  # the first read is in flight
        second = pool.submit(engine.decide, "site down", {"team": TEAM})
        while not engine.reads_via._queue:  # queued behind the first: a burst
            threading.Event().wait(0.01)
        inner.gate.set()
        third = pool.submit(engine.decide, "button broken", {"team": TEAM})
        labels = [f.result(timeout=20)["team"].label for f in (first, second, third)]
    assert labels == ["billing", "outage", "bug"]
    # the second waited for the third (max_batch 2 closes the batch when it arrives)
    assert [len(c) for c in inner.calls] == [1, 2]
    assert list(engine.reads_via.batch_closes) == [(1, "alone"), (2, "full")]
    engine.close()


def burst_during_a_read(engine: ab.DecisionEngine, inner: GatedReader, n: int) -> None:
    """One caller whose read ``inner`` holds, ``n - 1`` more queued meanwhile, then the
    gate opened: every caller gets the answers of its own state."""
    states = [f"ticket {i}" for i in range(n)]
    with ThreadPoolExecutor(len(states)) as pool:
        first = pool.submit(engine.decide, states[0], {"team": TEAM})
        assert inner.entered.wait(10)
        rest = [pool.submit(engine.decide, s, {"team": TEAM}) for s in states[1:]]
        _wait_for_queue(engine.reads_via, len(rest))
        inner.gate.set()
        got = [f.result(timeout=20)["team"].probabilities for f in [first, *rest]]
    plain = ab.DecisionEngine(ab.ScriptedReader(default=spread), batching=False)
    assert got == [plain.decide(s, {"team": TEAM})["team"].probabilities for s in states]


def test_a_burst_arriving_during_a_read_is_read_as_one_batch():
    # The default rule: the first caller is alone and read at once; the callers that
    # arrive while it is read are a burst, held until arrivals pause, then read together.
    inner = GatedReader(default=spread)
    engine = ab.DecisionEngine(inner)
    coalescer = engine.reads_via
    burst_during_a_read(engine, inner, 7)
    assert [len(c) for c in inner.calls] == [1, 6]
    # held until arrivals paused, or up to the bound if the process stayed busy meanwhile
    # (a loaded machine): which of the two closes it is timing, not the rule under test
    assert [n for n, _ in coalescer.batch_closes] == [1, 6]
    assert [why for _, why in coalescer.batch_closes] in (["alone", "quiet"], ["alone", "bound"])
    engine.close()


def test_graph_batch_runs_arriving_during_a_read_share_one_batch():
    from langgraph.graph import END, START, StateGraph

    from agentbranch.langgraph import decide_node

    class S(TypedDict, total=False):
        ticket: str
        decisions: dict

    inner = GatedReader(SCRIPT)
    engine = ab.DecisionEngine(inner)
    g = StateGraph(S)
    g.add_node("triage", decide_node(engine, {"team": TEAM}, state_key="ticket"))
    g.add_edge(START, "triage")
    g.add_edge("triage", END)
    app = g.compile()
    tickets = [f"{t} (#{i})" for i, t in enumerate(TICKETS * 2)]  # distinct: no de-dup
    with ThreadPoolExecutor(1) as pool:
        out = pool.submit(
            app.batch, [{"ticket": t} for t in tickets], config={"max_concurrency": 10}
        )
        assert inner.entered.wait(10)  # the first run's read is in flight ...
        coalescer = engine.reads_via
        for _ in range(3000):  # ... until every other run has queued behind it
            with coalescer._cond:
                reading = sum(len(b) for b in coalescer._reading.values())
                if reading + len(coalescer._queue) == len(tickets):
                    break
            threading.Event().wait(0.01)
        else:
            raise AssertionError("the runs never queued")
        inner.gate.set()
        labels = [o["decisions"]["team"]["label"] for o in out.result(timeout=30)]
    assert labels == EXPECTED * 2
    # the first read (usually the first run alone; all of them when they found each
    # other before the worker took the first), then all that queued meanwhile
    closes = list(coalescer.batch_closes)
    assert [len(c) for c in inner.calls] == [n for n, _ in closes]
    assert sum(n for n, _ in closes) == len(tickets) and len(closes) <= 2
    if len(closes) == 2:  # held: closed by the quiet gap, or by the bound on a busy machine
        assert closes[1][1] in ("quiet", "bound")
    engine.close()


def test_a_burst_that_never_pauses_is_held_only_up_to_the_bound(monkeypatch):
    # The coalescer's clock is faked; it moves only together with (simulated) arrivals,
    # under the coalescer's lock, so the worker sees exactly this sequence of events.
    import types

    from agentbranch.engine import batching

    clock = FakeClock()
    fake = types.SimpleNamespace(monotonic=clock.monotonic)
    monkeypatch.setattr(batching, "time", fake)
    inner = GatedReader(SCRIPT)
    coalescer = BatchingReader(inner)  # the default rule
    engine = ab.DecisionEngine(coalescer)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(engine.decide, "charged twice", {"team": TEAM})
        assert inner.entered.wait(10)
        clock.t += 1.0  # the first read takes 1 s: a burst is held at most 0.5 s
        second = pool.submit(engine.decide, "site down", {"team": TEAM})  # a burst
        _wait_for_queue(coalescer, 1)
        inner.gate.set()
        assert first.result(timeout=20)["team"].label == "billing"
        held_from = clock.t
        # requests keep arriving 1 ms apart (inside the quiet gap): never quiet
        while not second.done() and clock.t < held_from + 5:
            with coalescer._cond:
                clock.t += 0.001
                coalescer._last_arrival = clock.t
            threading.Event().wait(0.0005)
        assert second.result(timeout=20)["team"].label == "outage"
    assert list(coalescer.batch_closes) == [(1, "alone"), (1, "bound")]
    # held no less than the bound: half the last read's time (the worker began holding
    # at held_from or later)
    assert clock.t - held_from >= batching.HOLD_SHARE * 1.0
    engine.close()


def test_an_explicit_wait_is_a_plain_window():
    inner = ab.ScriptedReader(SCRIPT)
    coalescer = BatchingReader(inner, max_wait_s=0)  # given: no quiet-gap rule
    ab.DecisionEngine(coalescer).decide("x", {"team": TEAM})
    assert list(coalescer.batch_closes) == [(1, "window")]


def test_invalid_configuration():
    with pytest.raises(ab.ConfigurationError):
        BatchingReader(ab.ScriptedReader(), max_batch=0)


# -- the coalescer as the engine's default path ---------------------------------------


QUESTION_SETS = [
    {"team": TEAM},
    {"team": TEAM, "urgent": ab.yes_no("Urgent?")},
    {"mood": ab.score("Mood?", ["calm", "annoyed", "angry"])},
]


def probe(i: int) -> tuple[str, dict]:
    # 1,700 distinct states: some requests repeat (and may be de-duplicated).
    return f"ticket {i % 1700}: something about {i % 13}", QUESTION_SETS[i % 3]


def probs(decisions) -> dict:
    return {qid: d.probabilities for qid, d in decisions.items()}


def test_engine_coalesces_by_default_and_can_be_told_not_to():
    reader = ab.ScriptedReader(SCRIPT)
    engine = ab.DecisionEngine(reader)
    assert engine.reader is reader
    assert isinstance(engine.reads_via, BatchingReader) and engine.reads_via.inner is reader
    assert engine.decide("charged twice", {"team": TEAM})["team"].label == "billing"
    assert ab.DecisionEngine(reader, batching=False).reads_via is reader
    own = BatchingReader(reader, max_batch=4)
    assert ab.DecisionEngine(own).reads_via is own  # never wrapped twice
    with pytest.raises(ab.ConfigurationError):
        BatchingReader(own)
    engine.close()


@pytest.mark.parametrize("mode", ["threads", "asyncio", "graph.batch", "mixed"])
def test_2000_decisions_from_64_callers_each_get_their_own_read(mode):
    n, callers = 2000, 64
    inner = ab.ScriptedReader(default=spread, delay_s=0.001)
    engine = ab.DecisionEngine(inner)
    coalescer = engine.reads_via
    got: dict[int, dict] = {}

    def one(i: int) -> None:
        state, qs = probe(i)
        got[i] = probs(engine.decide(state, qs))

    async def aone(i: int) -> None:
        state, qs = probe(i)
        got[i] = probs(await engine.adecide(state, qs))

    def thread_worker(k: int, step: int) -> None:
        for i in range(k, n, step):
            one(i)

    async def task_worker(k: int, step: int) -> None:
        for i in range(k, n, step):
            await aone(i)

    if mode == "threads":
        with ThreadPoolExecutor(callers) as pool:
            list(pool.map(thread_worker, range(callers), [callers] * callers))
    elif mode == "asyncio":

        async def main():
            await asyncio.gather(*(task_worker(k, callers) for k in range(callers)))

        asyncio.run(main())
    elif mode == "graph.batch":
        from langgraph.graph import END, START, StateGraph

        class S(TypedDict):
            i: int
            out: dict

        def node(s: S) -> dict:
            state, qs = probe(s["i"])
            return {"out": probs(engine.decide(state, qs))}

        g = StateGraph(S)
        g.add_node("decide", node)
        g.add_edge(START, "decide")
        g.add_edge("decide", END)
        app = g.compile()
        outs = app.batch([{"i": i} for i in range(n)], config={"max_concurrency": callers})
        got = {o["i"]: o["out"] for o in outs}
    else:  # half threads, half asyncio tasks on one engine at the same time
        half = callers // 2

        async def main():
            await asyncio.gather(*(task_worker(k, callers) for k in range(half, callers)))

        with ThreadPoolExecutor(half) as pool:
            futures = [pool.submit(thread_worker, k, callers) for k in range(half)]
            asyncio.run(main())
            for f in futures:
                f.result()

    plain = ab.DecisionEngine(ab.ScriptedReader(default=spread), batching=False)
    for i in range(n):
        state, qs = probe(i)
        assert got[i] == probs(plain.decide(state, qs)), i
    stats = coalescer.stats
    assert stats["requests"] + stats["deduped"] + stats["cache_hits"] == n
    assert sum(len(c) for c in inner.calls) == stats["requests"]
    engine.close()


def test_a_bad_request_fails_alone():
    inner = GatedReader(SCRIPT)
    inner.gate.set()
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=10, max_batch=3))
    states = ["charged twice", "poison pill", "site down"]

    async def main():
        return await asyncio.gather(
            *(engine.adecide(s, {"team": TEAM}) for s in states), return_exceptions=True
        )

    good, bad, good2 = asyncio.run(main())
    assert good["team"].label == "billing" and good2["team"].label == "outage"
    assert isinstance(bad, ReaderError) and "poisoned state" in str(bad)
    # one batch of three failed, then each request was read alone
    assert [len(c) for c in inner.calls] == [3, 1, 1, 1]


def test_a_failing_reader_fails_every_caller_with_its_error():
    inner = ab.ScriptedReader(error=RuntimeError("model crashed"))
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=10, max_batch=3))

    async def main():
        return await asyncio.gather(
            *(engine.adecide(t, {"team": TEAM}) for t in TICKETS[:3]), return_exceptions=True
        )

    errors = asyncio.run(main())
    assert all(isinstance(e, ReaderError) and "model crashed" in str(e) for e in errors)


def test_a_cancelled_request_fails_alone_and_is_never_read():
    inner = GatedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=0, concurrency=1))

    async def main():
        first = asyncio.create_task(engine.adecide("charged twice", {"team": TEAM}))
        await asyncio.to_thread(inner.entered.wait, 30)  # the first batch is in flight
        doomed = asyncio.create_task(engine.adecide("site down", {"team": TEAM}))
        other = asyncio.create_task(engine.adecide("button broken", {"team": TEAM}))
        await asyncio.sleep(0)  # both queued behind the read in flight
        await asyncio.sleep(0)
        doomed.cancel()
        try:
            await doomed  # its cancellation has reached the coalescer ...
        except asyncio.CancelledError as e:
            doomed = e
        inner.gate.set()  # ... before the reader is free to take the next batch
        return (*await asyncio.gather(first, other), doomed)

    first, other, doomed = asyncio.run(main())
    assert first["team"].label == "billing" and other["team"].label == "bug"
    assert isinstance(doomed, asyncio.CancelledError)
    assert "site down" not in [r.state for call in inner.calls for r in call]


def test_a_full_queue_pushes_back():
    inner = GatedReader(SCRIPT)
    coalescer = BatchingReader(inner, max_wait_s=0, max_queue=2, concurrency=1)
    engine = ab.DecisionEngine(coalescer)
    results: dict[str, object] = {}

    def decide(state: str, eng=engine) -> None:
        try:
            results[state] = eng.decide(state, {"team": TEAM})["team"].label
        except Exception as e:  # noqa: BLE001
            results[state] = e

    threads = [threading.Thread(target=decide, args=("charged 1",))]
    threads[0].start()
    assert inner.entered.wait(30)  # in flight; the queue is empty again
    for state in ("down 2", "other 3"):  # these fill the queue (2 places)
        threads.append(threading.Thread(target=decide, args=(state,)))
        threads[-1].start()
    # wait until both are queued (not timing: the reader is blocked meanwhile)
    while len(coalescer._queue) < 2:
        threading.Event().wait(0.005)
    # a caller with a queue timeout gets QueueFullError ...
    impatient = ab.DecisionEngine(coalescer)
    coalescer.queue_timeout_s = 0.05
    decide("late 4", impatient)
    assert isinstance(results["late 4"], QueueFullError)
    # ... one without waits for room (it cannot finish while the reader is blocked)
    coalescer.queue_timeout_s = None
    waiting = threading.Thread(target=decide, args=("down 5",))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive() and "down 5" not in results
    inner.gate.set()
    for t in [*threads, waiting]:
        t.join(30)
    assert results == {
        "charged 1": "billing",
        "down 2": "outage",
        "other 3": "bug",
        "late 4": results["late 4"],
        "down 5": "outage",
    }


def test_identical_reads_in_flight_are_read_once():
    inner = GatedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=0, concurrency=1))

    async def main():
        first = asyncio.create_task(engine.adecide("button broken", {"team": TEAM}))
        await asyncio.to_thread(inner.entered.wait, 30)
        twins = [asyncio.create_task(engine.adecide("site down", {"team": TEAM})) for _ in range(3)]
        await asyncio.sleep(0)
        inner.gate.set()
        return await asyncio.gather(first, *twins)

    out = asyncio.run(main())
    assert [d["team"].label for d in out] == ["bug", "outage", "outage", "outage"]
    assert [len(c) for c in inner.calls] == [1, 1]
    assert engine.reads_via.stats["deduped"] == 2


def test_answer_cache_is_bounded_and_keyed_on_the_whole_request():
    inner = ab.ScriptedReader(SCRIPT)
    coalescer = BatchingReader(inner, cache_size=2)
    engine = ab.DecisionEngine(coalescer)
    a = engine.decide("charged twice", {"team": TEAM})
    b = engine.decide("charged twice", {"team": TEAM})
    assert probs(a) == probs(b) and len(inner.calls) == 1
    assert coalescer.stats["cache_hits"] == 1
    engine.decide("charged twice", {"team": TEAM}, draws=2)  # another request: a miss
    assert len(inner.calls) == 2
    engine.decide("x", {"team": TEAM})
    engine.decide("y", {"team": TEAM})  # evicts the oldest
    engine.decide("charged twice", {"team": TEAM})
    assert len(inner.calls) == 5
    assert read_key(inner.calls[0][0]) == read_key(inner.calls[-1][0])


def test_closing_fails_queued_requests_and_stops():
    inner = GatedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=0, concurrency=1))

    async def main():
        first = asyncio.create_task(engine.adecide("charged twice", {"team": TEAM}))
        await asyncio.to_thread(inner.entered.wait, 30)
        queued = asyncio.create_task(engine.adecide("site down", {"team": TEAM}))
        await asyncio.sleep(0)
        # close() fails the queued request at once, then waits for the read in flight
        threading.Timer(0.2, inner.gate.set).start()
        engine.close()
        return await asyncio.gather(first, queued, return_exceptions=True)

    first, queued = asyncio.run(main())
    assert not engine.reads_via._threads  # the worker has exited
    assert first["team"].label == "billing"
    assert isinstance(queued, ReaderError) and "closed" in str(queued)
    with pytest.raises(ReaderError, match="closed"):
        engine.decide("x", {"team": TEAM})


def _batch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "agentbranch-batch"]


def _req(state: str) -> ReadRequest:
    from agentbranch.core.questions import to_spec

    return ReadRequest(state=state, questions=(to_spec("u", ab.yes_no("U?")),))


def test_a_request_abandoned_while_queued_is_never_read():
    import time

    from agentbranch.core.errors import ReaderTimeoutError
    from agentbranch.testing import FaultyReader

    reader = FaultyReader(ab.ScriptedReader({}), "hang", affects=lambda r: "slow" in r.state)
    coalescer = BatchingReader(reader, concurrency=1, max_wait_s=0)
    out: list[object] = []
    try:
        slow = threading.Thread(target=lambda: out.append(coalescer.read([_req("slow")])))
        slow.start()
        deadline = time.monotonic() + 60
        while not reader.calls:  # the one worker is reading "slow"; its caller waits
            assert slow.is_alive() and time.monotonic() < deadline, "slow never reached the reader"
            time.sleep(0.01)
        with pytest.raises(ReaderTimeoutError, match="within 0.1s"):
            coalescer.read([_req("queued")], timeout_s=0.1)
        assert coalescer.stats["abandoned"] == 0  # "slow" is still wanted
        reader.release()
        slow.join(30)
        assert len(coalescer.read([_req("next")])[0]) == 1
    finally:
        reader.release()
    states = [r.state for call in reader.calls for r in call]
    assert states == ["slow", "next"]  # "queued" was dropped, not read
    assert coalescer.stats["requests"] == 2 and len(out[0]) == 1


def test_a_hung_batch_nobody_waits_for_does_not_block_the_next_request():
    import time

    from agentbranch.core.errors import ReaderTimeoutError
    from agentbranch.testing import FaultyReader

    reader = FaultyReader(ab.ScriptedReader({}), "hang", affects=lambda r: "bad" in r.state)
    coalescer = BatchingReader(reader, concurrency=1, max_wait_s=0)
    coalescer.idle_s = 0.05
    before = len(_batch_threads())
    try:
        for i in range(3):  # each hung batch is abandoned; the next caller is served
            with pytest.raises(ReaderTimeoutError):
                coalescer.read([_req(f"bad {i}")], timeout_s=0.1)
            assert len(coalescer.read([_req(f"good {i}")], timeout_s=10)[0]) == 1  # hang: 30 s
        assert coalescer.stats["abandoned"] == 3
        assert coalescer._workers <= 1  # the stuck workers no longer count
    finally:
        reader.release()
    # the stuck workers finish when the reader returns, then every worker exits
    deadline = time.monotonic() + 30  # generous: a loaded CI machine schedules late
    while len(_batch_threads()) > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(_batch_threads()) <= before
    states = sorted(r.state for call in reader.calls for r in call)
    assert states == sorted([f"bad {i}" for i in range(3)] + [f"good {i}" for i in range(3)])
    assert coalescer.stats["requests"] == 6 and coalescer.stats["batches"] == 6
    assert coalescer._workers == 0 and not coalescer._reading


def test_a_held_batch_closes_once_every_recent_caller_thread_waits():
    # Two threads take turns, as a pool smaller than its inputs does. The quiet gap is
    # 30 s: the batch can only close because both threads are waiting (not timing).
    inner = GatedReader(SCRIPT)
    inner.coalesce_wait_s = 30.0
    engine = ab.DecisionEngine(inner)
    coalescer = engine.reads_via
    answers: dict[str, str] = {}

    def decide(state: str) -> None:
        answers[state] = engine.decide(state, {"team": TEAM})["team"].label

    first = threading.Thread(target=lambda: (decide("charged twice"), decide("down again")))
    first.start()
    assert inner.entered.wait(10)  # the first thread's lone read is in flight
    second = threading.Thread(target=decide, args=("site down",))
    second.start()
    _wait_for_queue(coalescer, 1)
    inner.gate.set()  # the first thread is answered, comes back: both wait -> close
    first.join(20)
    second.join(20)
    assert answers == {"charged twice": "billing", "site down": "outage", "down again": "outage"}
    assert list(coalescer.batch_closes) == [(1, "alone"), (2, "all in")]
    engine.close()


@pytest.mark.parametrize("pipelined", [True, False])
def test_a_pipelined_reader_is_given_a_burst_in_parts(pipelined):
    # The first caller is read alone; the seven that arrive meanwhile are read in parts
    # of the reader's pipelined_batch (while one part is read, the next callers wait,
    # and the first ones carry on), or all at once with the lever off.
    inner = PipelinedReader(default=spread)
    engine = ab.DecisionEngine(LeverReader(inner))
    engine.reads_via.pipelined = pipelined
    burst_during_a_read(engine, inner, 8)
    assert [len(c) for c in inner.calls] == ([1, 3, 3, 1] if pipelined else [1, 7])
    engine.close()


def test_max_batch_caps_a_pipelined_reader_too():
    inner = PipelinedReader(SCRIPT)
    inner.gate.set()
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=0, max_batch=2))
    assert [d["team"].label for d in engine.decide_many(TICKETS, {"team": TEAM})] == EXPECTED
    assert [len(c) for c in inner.calls] == [2, 2, 1]
    engine.close()
