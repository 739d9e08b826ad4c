"""Readers, scripts and waits shared by the coalescer's tests (tests/test_batching*.py):
no test depends on timing, a gated reader blocks on an event."""

from __future__ import annotations

import hashlib
import threading

from _lg_fixtures import by_keyword, sure

import agentbranch as ab
from agentbranch.engine.batching import BatchingReader

TEAM = ab.choice("Which team?", ["billing", "outage", "bug"])
SCRIPT = {
    "team": by_keyword({"charged": sure("billing"), "down": sure("outage")}, default=sure("bug"))
}
TICKETS = ["charged twice", "site down", "button broken", "charged again", "down again"]


def _wait_for_queue(coalescer: BatchingReader, n: int) -> None:
    """Until ``n`` requests are queued (the reader is blocked meanwhile: not timing)."""
    for _ in range(3000):
        if len(coalescer._queue) >= n:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{n} requests never queued")


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t


class GatedReader(ab.ScriptedReader):
    """A scripted reader whose reads wait for ``gate``; ``entered`` is set on each read.
    A state containing "poison" makes the whole batch fail (a bad request)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = threading.Event()
        self.entered = threading.Event()

    def read(self, requests):
        self.entered.set()
        assert self.gate.wait(30), "test gate never opened"
        if any("poison" in r.state for r in requests):
            self.calls.append(list(requests))
            raise ValueError("poisoned state")
        return super().read(requests)


def spread(state: str, q):
    """A distribution that differs per state (so a mixed-up answer is caught)."""
    h = int(hashlib.sha256(f"{state}/{q.id}".encode()).hexdigest(), 16)
    weights = [1 + (h >> (8 * i)) % 97 for i in range(len(q.options))]
    return {o: w / sum(weights) for o, w in zip(q.options, weights)}


class PipelinedReader(GatedReader):
    """A reader that reads best in parts of 3 (as the embedded reader's trace does in
    parts of 16)."""

    pipelined_batch = 3
