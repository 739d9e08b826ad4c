"""Reader faults (``agentbranch.testing.FaultyReader``) as a graph sees them.

Each fault — the reader raises, hangs past ``timeout_s``, answers NaN or +inf, answers the
wrong shape, or leaves part of a batch unanswered — is run under ``on_error="raise"``,
``FailOpen`` and ``FailClosed``, alone and inside a shared ``BatchingReader`` batch with a
healthy caller, and the engine must keep serving afterwards. A fault is always an error
(``ReaderError``) for the decision it hits, never a decision, and never touches a healthy
caller's answer: a batch that raises is read again one request at a time, so only the bad
request fails. Only a hang fails everyone in its batch (the time is gone).
"""

from __future__ import annotations

import asyncio
import math
import threading

import pytest

import agentbranch as ab
from agentbranch.core.errors import InvalidReadError, ReaderError, ReaderTimeoutError
from agentbranch.core.reads import LabelRead
from agentbranch.engine.batching import BatchingReader
from agentbranch.policy import FailClosed, FailOpen, Policy, Resolver
from agentbranch.testing import FaultyReader

URGENT = {"urgent": ab.yes_no("Does this need a reply within the hour?")}
SCRIPT = {"urgent": {"yes": 0.7, "no": 0.3}}
FAULTS = FaultyReader.FAULTS
#: Faults that spoil individual answers; the others fail the whole read call.
PER_REQUEST = ("nan", "inf", "wrong_shape", "partial")
#: Faults a healthy caller in the same batch never sees ("raise": re-read one by one).
FAILS_ALONE = (*PER_REQUEST, "raise")
ON_ERROR = {"raise": "raise", "fail_open": FailOpen("no"), "fail_closed": FailClosed("safe")}
TIMEOUT_S = 0.3  # a "hang" is 30 s (released at teardown); the engine gives up at 0.3 s
#: Every read that is not a hang gets this long: a loaded machine can take more than 0.3 s
#: for a scripted read, and a test must not fail on a time.
HEALTHY_TIMEOUT_S = 30.0
SHARED_TIMEOUT_S = 3.0  # a hang in a shared batch (``test_fault_in_a_shared_batch``)


def faulty(fault: str) -> tuple[FaultyReader, ab.ScriptedReader]:
    inner = ab.ScriptedReader(SCRIPT)
    reader = FaultyReader(inner, fault, affects=lambda r: "bad" in r.state)
    return reader, inner


def engine_over(
    reader, *, batch: bool, fault: str, timeout_s: float = TIMEOUT_S
) -> ab.DecisionEngine:
    # max_batch=2: the window closes as soon as both callers joined (no timing).
    top = BatchingReader(reader, max_wait_s=10.0, max_batch=2) if batch else reader
    return ab.DecisionEngine(top, timeout_s=timeout_s if fault == "hang" else HEALTHY_TIMEOUT_S)


def expected_error(fault: str) -> type[ReaderError]:
    if fault == "hang":
        return ReaderTimeoutError
    if fault == "raise":
        return ReaderError
    return InvalidReadError


def check_outcome(outcome, fault: str, on_error: str) -> None:
    """What a graph sees for the faulted decision under each ``on_error``."""
    if on_error == "raise":
        assert isinstance(outcome, expected_error(fault)), outcome
        return
    assert isinstance(outcome, dict), outcome
    rec = outcome["urgent"]
    assert rec["band"] == "error" and rec["probabilities"] is None
    assert rec["confidence"] is None  # no confidence is invented for a failed read
    if on_error == "fail_open":
        assert (rec["decided_by"], rec["label"], rec["goto"]) == ("fail_open", "no", None)
    else:
        assert (rec["decided_by"], rec["label"], rec["goto"]) == ("fail_closed", None, "safe")
    assert rec["error"].startswith(expected_error(fault).__name__)


def check_taken(outcome) -> None:
    assert isinstance(outcome, dict), outcome
    rec = outcome["urgent"]
    assert (rec["decided_by"], rec["label"]) == ("engine", "yes")
    assert rec["probabilities"]["yes"] == pytest.approx(0.7)


def resolve(resolver: Resolver, state: str, use_async: bool = False):
    try:
        if use_async:
            return asyncio.run(resolver.aresolve(state))
        return resolver.resolve(state)
    except ab.AgentBranchError as e:
        return e


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("on_error", list(ON_ERROR))
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_alone(fault, on_error, use_async):
    reader, inner = faulty(fault)
    engine = engine_over(reader, batch=False, fault=fault)
    resolver = Resolver(engine, URGENT, Policy(on_error=ON_ERROR[on_error]))
    try:
        check_outcome(resolve(resolver, "bad ticket", use_async), fault, on_error)
        engine.timeout_s = HEALTHY_TIMEOUT_S  # the healthy reads below are not timed tight
        # the engine keeps serving: healthy states, then the same state once healed
        check_taken(resolve(resolver, "good ticket", use_async))
        reader.active = False
        check_taken(resolve(resolver, "bad ticket", use_async))
    finally:
        reader.release()


@pytest.mark.parametrize("on_error", list(ON_ERROR))
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_in_a_shared_batch(fault, on_error):
    """Two graph runs share one batch; only the bad one's answer is faulted."""
    reader, inner = faulty(fault)
    # the hang's timeout also covers both callers joining the window: on a starved CPU
    # (two test workers and a model on two cores) 0.3 s was seen to pass before the
    # second thread joined, and the shared read never started
    engine = engine_over(reader, batch=True, fault=fault, timeout_s=SHARED_TIMEOUT_S)
    resolver = Resolver(engine, URGENT, Policy(on_error=ON_ERROR[on_error]))
    outcomes: dict[str, object] = {}
    start = threading.Barrier(2)

    def run(state: str) -> None:
        start.wait()
        outcomes[state] = resolve(resolver, state)

    threads = [threading.Thread(target=run, args=(s,)) for s in ("bad ticket", "good ticket")]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        calls = [sorted(r.state for r in batch) for batch in reader.calls]
        if fault == "raise":  # the shared read failed: each request read again alone
            assert calls[0] == ["bad ticket", "good ticket"]
            assert sorted(calls[1:]) == [["bad ticket"], ["good ticket"]]
        else:
            assert calls == [["bad ticket", "good ticket"]]  # one shared read
        check_outcome(outcomes["bad ticket"], fault, on_error)
        if fault in FAILS_ALONE:
            check_taken(outcomes["good ticket"])  # the healthy caller is untouched
        else:  # a hang: the time is gone for the whole batch
            check_outcome(outcomes["good ticket"], fault, on_error)
        reader.release()
        reader.active = False
        engine.timeout_s = HEALTHY_TIMEOUT_S
        again: dict[str, object] = {}
        threads = [
            threading.Thread(target=lambda s=s: again.__setitem__(s, resolve(resolver, s)))
            for s in ("bad ticket", "good ticket")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        check_taken(again["bad ticket"])
        check_taken(again["good ticket"])
    finally:
        reader.release()


def test_a_nan_yes_no_read_is_not_a_confident_no():
    """The issue's first example: ``(nan, log 0.1)`` used to be ``no`` at confidence 1."""

    class NanReader(ab.ScriptedReader):
        def read(self, requests):
            return [[LabelRead((math.nan, math.log(0.1)))] for _ in requests]

    engine = ab.DecisionEngine(NanReader())
    with pytest.raises(InvalidReadError, match="not in \\[-inf, 0\\]"):
        engine.decide("s", URGENT)


def test_a_graph_routes_a_faulted_decision_by_its_on_error():
    """The same faults through a LangGraph router: FailClosed goes to the safe node."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from agentbranch.langgraph import route

    class S(TypedDict, total=False):
        text: str
        out: str

    reader, _ = faulty("nan")
    engine = ab.DecisionEngine(reader)
    router = route(
        engine,
        "urgent",
        URGENT["urgent"],
        path_map={"yes": "page", "no": "queue"},
        policy=Policy(on_error=FailClosed("safe")),
        state_key="text",
    )
    g = StateGraph(S)
    for node in ("page", "queue", "safe"):
        g.add_node(node, lambda s, node=node: {"out": node})
        g.add_edge(node, END)
    g.add_conditional_edges(START, router, router.path_map)
    app = g.compile()
    assert app.invoke({"text": "bad ticket"})["out"] == "safe"
    assert app.invoke({"text": "good ticket"})["out"] == "page"


# -- timeouts: the timeout measures the read, no pool caps concurrency ---------------------


class RendezvousReader(ab.ScriptedReader):
    """Each read waits until ``n`` REQUESTS are being read at once (in one reader call or
    many): it only completes if nothing between the callers and the reader caps how many
    requests are in flight below ``n``. With the coalescer the requests arrive as a few
    batches; it may read ``concurrent_batches`` of them at once (the capacity the reader
    declares, like ``RemoteReader``'s ``max_connections``)."""

    def __init__(self, n: int) -> None:
        super().__init__(SCRIPT)
        self.n = n
        self.concurrent_batches = n
        self.in_flight = 0
        self.most_calls_at_once = 0
        self._calls = 0
        self._all_in = threading.Condition()

    def read(self, requests):
        with self._all_in:
            self.in_flight += len(requests)
            self._calls += 1
            self.most_calls_at_once = max(self.most_calls_at_once, self._calls)
            self._all_in.notify_all()
            arrived = self._all_in.wait_for(lambda: self.in_flight >= self.n, timeout=60)
            self._calls -= 1
        assert arrived, "the reads never were all in flight at once: something caps them"
        return super().read(requests)


# Both rules at once, with no timing in the test: each timed caller's read only completes
# once all 64 requests are being read, so a fixed-size pool (a thread pool, a semaphore, a
# coalescer that ignores the reader's capacity) below 64 makes every caller time out, and
# a timeout that counted a pool's queue would too. batching=False: 64 reader calls at once.
@pytest.mark.parametrize("batching", [False, True], ids=["direct", "coalesced"])
def test_64_timed_sync_callers_all_read_at_once(batching):
    n = 64
    reader = RendezvousReader(n)
    engine = ab.DecisionEngine(reader, timeout_s=30.0, batching=batching)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        try:
            results[i] = engine.decide(f"ticket {i}", URGENT)["urgent"].label
        except ab.AgentBranchError as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert results == ["yes"] * n
    assert sum(len(c) for c in reader.calls) == n  # every request read once
    if not batching:
        assert reader.most_calls_at_once == n


@pytest.mark.parametrize("batching", [False, True], ids=["direct", "coalesced"])
def test_64_timed_async_callers_all_read_at_once(batching):
    """The default ``aread`` borrows the loop's small default executor; a timed read
    gets its own thread instead (or the coalescer's workers), so 64 tasks read at once."""
    n = 64
    reader = RendezvousReader(n)
    engine = ab.DecisionEngine(reader, timeout_s=30.0, batching=batching)

    async def main():
        return await asyncio.gather(
            *(engine.adecide(f"ticket {i}", URGENT) for i in range(n)), return_exceptions=True
        )

    results = asyncio.run(main())
    assert [r["urgent"].label for r in results] == ["yes"] * n
    assert sum(len(c) for c in reader.calls) == n
    if not batching:
        assert reader.most_calls_at_once == n


def test_a_timed_out_read_does_not_block_the_next_one():
    reader = FaultyReader(ab.ScriptedReader(SCRIPT), "hang", affects=lambda r: "bad" in r.state)
    engine = ab.DecisionEngine(reader, timeout_s=TIMEOUT_S)
    try:
        with pytest.raises(ReaderTimeoutError, match=f"within {TIMEOUT_S}s"):
            engine.decide("bad", URGENT)
        engine.timeout_s = HEALTHY_TIMEOUT_S
        assert engine.decide("good", URGENT)["urgent"].label == "yes"
    finally:
        reader.release()
