"""The coalescer cuts long calls and bursts into reads of similar state lengths (a
reader pads each forward to its longest state): a call's requests are queued shortest
first, a read taken from a longer queue is its oldest request and those nearest its
length; every caller still gets the answers of its own states, and none starves."""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

from _batching_fixtures import TEAM, PipelinedReader, _wait_for_queue, spread
from hypothesis import given
from hypothesis import strategies as st

import agentbranch as ab
from agentbranch.core.reads import ReadRequest
from agentbranch.engine.batching import SIMILAR_WINDOW, BatchingReader, Item, similar_part


def item(n: int, tag: int) -> Item:
    return Item(ReadRequest(state="x" * n + f"#{tag}", questions=()), None)


@given(st.lists(st.integers(0, 50), max_size=80), st.integers(1, 20))
def test_a_part_is_the_oldest_and_the_nearest_in_length(lengths, limit):
    items = [item(n, i) for i, n in enumerate(lengths)]
    queue = deque(items)
    part = similar_part(queue, limit)
    if len(items) <= limit:
        assert part == items and not queue
        return
    assert part[0] is items[0] and len(part) == limit  # the oldest is always read
    # Nothing lost, the rest still queued in order.
    assert sorted(map(id, [*part, *queue])) == sorted(map(id, items))
    assert [id(x) for x in items if x in queue] == [id(x) for x in queue]
    # The others: from the window, none left in it nearer the oldest's length.
    window = items[1 : SIMILAR_WINDOW * limit]
    head = len(items[0].request.state)

    def gap(x: Item) -> int:
        return abs(len(x.request.state) - head)

    assert all(x in window for x in part[1:])
    left = [x for x in window if x not in part]
    assert not left or limit == 1 or max(map(gap, part[1:])) <= min(map(gap, left))


def test_decide_many_is_read_in_parts_of_similar_length():
    inner = ab.ScriptedReader(default=spread)
    engine = ab.DecisionEngine(BatchingReader(inner, max_wait_s=0, max_batch=3))
    states = [f"ticket {i}" + " more" * (i * 7 % 10) for i in range(9)]
    got = engine.decide_many(states, {"team": TEAM})
    lengths = [[len(r.state) for r in call] for call in inner.calls]
    assert [len(c) for c in lengths] == [3, 3, 3]
    assert [n for c in lengths for n in c] == sorted(len(s) for s in states)
    plain = ab.DecisionEngine(ab.ScriptedReader(default=spread), batching=False)
    assert [d["team"].probabilities for d in got] == [
        plain.decide(s, {"team": TEAM})["team"].probabilities for s in states
    ]
    engine.close()


def test_a_burst_is_read_in_parts_of_similar_length():
    # A first caller holds the reader; a burst of callers with short and long states
    # queues meanwhile, long and short interleaved: each part of 3 holds one kind.
    inner = PipelinedReader(default=spread)
    engine = ab.DecisionEngine(inner)
    states = ["first", *[("long " * 20 if i % 2 else "s") + str(i) for i in range(6)]]
    with ThreadPoolExecutor(len(states)) as pool:
        first = pool.submit(engine.decide, states[0], {"team": TEAM})
        assert inner.entered.wait(10)
        rest = []
        for s in states[1:]:  # one at a time: the queue keeps their order
            rest.append(pool.submit(engine.decide, s, {"team": TEAM}))
            _wait_for_queue(engine.reads_via, len(rest))
        inner.gate.set()
        got = [f.result(timeout=20)["team"].probabilities for f in [first, *rest]]
    kinds = [{r.state.startswith("long") for r in call} for call in inner.calls[1:]]
    assert kinds == [{False}, {True}]  # the oldest (short) and the other short ones first
    plain = ab.DecisionEngine(ab.ScriptedReader(default=spread), batching=False)
    assert got == [plain.decide(s, {"team": TEAM})["team"].probabilities for s in states]
    engine.close()


def test_a_decide_many_alone_is_not_cut_into_pipelined_parts():
    # Parts let a burst's first callers go on early; one call's states have nobody to
    # let go: they are read in parts of max_batch (here all at once), not of 3.
    inner = PipelinedReader(default=spread)
    inner.gate.set()
    engine = ab.DecisionEngine(inner)
    states = [f"ticket {i}" for i in range(8)]
    got = engine.decide_many(states, {"team": TEAM})
    assert [len(c) for c in inner.calls] == [8]
    plain = ab.DecisionEngine(ab.ScriptedReader(default=spread), batching=False)
    assert [d["team"].probabilities for d in got] == [
        plain.decide(s, {"team": TEAM})["team"].probabilities for s in states
    ]
    engine.close()
