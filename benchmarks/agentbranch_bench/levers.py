"""The coalescer with its rules as switches, for the benchmark's variants only.

``LeverReader`` is a ``BatchingReader`` whose hold rules (``agentbranch.engine.batching``)
can each be turned off, so ``bench_patterns.py --variants`` compares the library with
the coalescer as it was before a rule. The production coalescer has no switches."""

from __future__ import annotations

from agentbranch.engine.batching import BatchingReader

__all__ = ["LEVERS", "LeverReader"]

#: The switches, each on by default (the library as it is).
LEVERS = (
    "close_when_all_in",
    "hold_new_threads",
    "close_when_settled",
    "hold_while_busy",
    "pipelined",
)


class LeverReader(BatchingReader):
    """A ``BatchingReader`` with switches: ``close_when_all_in`` (a held burst closes
    once every recent caller thread waits, and a cycling pool's first thread back is
    held), ``hold_new_threads`` (a fresh pool's first thread is held as a burst's
    first), ``close_when_settled`` (a held burst closes once nobody who could still call
    is running), ``hold_while_busy`` (a quiet gap while the process works starts
    again) and ``pipelined`` (a ``pipelined_batch`` reader is given a burst in parts)."""

    close_when_all_in = True
    hold_new_threads = True
    close_when_settled = True
    hold_while_busy = True
    pipelined = True

    def _all_in(self, since: float) -> bool:
        return self.close_when_all_in and super()._all_in(since)

    def _expected_back(self, since: float) -> float:
        return super()._expected_back(since) if self.close_when_all_in else float("-inf")

    def _settled(self, since: float) -> bool:
        return self.close_when_settled and super()._settled(since)

    def _pool_starting(self) -> bool:
        if not self.hold_new_threads:
            self._starter = None
            return False
        return super()._pool_starting()

    def _busy(self) -> bool:
        return self.hold_while_busy and super()._busy()

    def _pipelined_part(self) -> int | None:
        return super()._pipelined_part() if self.pipelined else None
