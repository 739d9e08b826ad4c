"""BatchingReader: concurrent decisions coalesce into one reader batch.

The window is long (seconds) and ``max_batch`` equals the number of concurrent callers,
so the batch closes as soon as everyone has arrived: no test depends on timing unless it
fails (then it waits out the window and finds several batches).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from _lg_fixtures import by_keyword, sure

import agentbranch as ab
from agentbranch.engine.batching import BatchingReader
from agentbranch.errors import ReaderError

TEAM = ab.choice("Which team?", ["billing", "outage", "bug"])
SCRIPT = {
    "team": by_keyword({"charged": sure("billing"), "down": sure("outage")}, default=sure("bug"))
}
TICKETS = ["charged twice", "site down", "button broken", "charged again", "down again"]
EXPECTED = ["billing", "outage", "bug", "billing", "outage"]


def test_wrapper_reports_the_inner_reader():
    inner = ab.ScriptedReader(model="m1", max_options=7)
    b = BatchingReader(inner)
    assert (b.name, b.model, b.max_options) == ("scripted", "m1", 7)
    d = ab.DecisionEngine(b).decide("x", {"team": TEAM})["team"]
    assert d.reader == "scripted" and d.model == "m1"


def test_threads_share_one_batch():
    inner = ab.ScriptedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, window_s=10, max_batch=len(TICKETS)))
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
    engine = ab.DecisionEngine(BatchingReader(inner, window_s=10, max_batch=len(TICKETS)))

    async def main():
        return await asyncio.gather(*(engine.adecide(t, {"team": TEAM}) for t in TICKETS))

    decisions = asyncio.run(main())
    assert [d["team"].label for d in decisions] == EXPECTED
    assert len(inner.calls) == 1 and len(inner.calls[0]) == len(TICKETS)


def test_decide_many_is_split_into_max_batch_chunks():
    inner = ab.ScriptedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, window_s=0, max_batch=2))
    out = engine.decide_many(TICKETS, {"team": TEAM})
    assert [d["team"].label for d in out] == EXPECTED
    assert [len(c) for c in inner.calls] == [2, 2, 1]


def test_a_failed_batch_fails_every_caller():
    inner = ab.ScriptedReader(error=RuntimeError("model crashed"))
    engine = ab.DecisionEngine(BatchingReader(inner, window_s=10, max_batch=3))

    async def main():
        return await asyncio.gather(
            *(engine.adecide(t, {"team": TEAM}) for t in TICKETS[:3]), return_exceptions=True
        )

    errors = asyncio.run(main())
    assert len(inner.calls) == 1
    assert all(isinstance(e, ReaderError) and "model crashed" in str(e) for e in errors)


def test_sequential_calls_are_separate_batches():
    inner = ab.ScriptedReader(SCRIPT)
    engine = ab.DecisionEngine(BatchingReader(inner, window_s=0))
    engine.decide("a", {"team": TEAM})
    engine.decide("b", {"team": TEAM})
    assert [len(c) for c in inner.calls] == [1, 1]


def test_invalid_configuration():
    with pytest.raises(ab.ConfigurationError):
        BatchingReader(ab.ScriptedReader(), max_batch=0)
