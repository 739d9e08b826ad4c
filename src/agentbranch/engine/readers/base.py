"""The reader protocol: a batch of ``ReadRequest`` in, one ``LabelRead`` per question out.

Readers know nothing of LangGraph, policies or decisions. ``ScriptedReader`` is the mock
transport for tests of the layers above.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from agentbranch.core.errors import ReaderError
from agentbranch.core.reads import LabelRead, ReadRequest

__all__ = ["Reader", "WrappingReader"]


class Reader(ABC):
    """Turns read requests into label reads, batched.

    Subclasses set ``name`` (the reader kind, e.g. ``"transformers"``) and ``model``
    (the served model id), and implement ``read``. ``aread`` defaults to running
    ``read`` in a worker thread; readers with a native async path override it.
    ``max_options`` is how many options one question read may carry (the size of the
    label set); the engine splits larger questions into several reads.
    """

    name: str = "reader"
    model: str = "unknown"
    max_options: int = 26

    @abstractmethod
    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        """Read every request; ``result[i][j]`` answers ``requests[i].questions[j]``.
        ``result[i]`` may instead be the ``ReaderError`` request ``i`` failed with: the
        engine raises it for that request's caller only."""

    def read_each(
        self,
        requests: Sequence[ReadRequest],
        deliver: Callable[[int, list[LabelRead] | BaseException], None],
    ) -> None:
        """Read every request and hand request ``i``'s reads to ``deliver(i, reads)``;
        ``reads`` may be the error that request failed with (it fails that request's
        caller alone). The coalescer reads through this. By default one ``read`` of the
        whole batch, then each request's reads in order (what ``read`` raises, this
        raises). A reader whose requests finish apart (a server, one HTTP request each)
        overrides it to deliver each request the moment it is answered."""
        reads = self.read(requests)
        if len(reads) != len(requests):
            raise ReaderError(
                f"reader {self.name!r} answered {len(reads)} of {len(requests)} batched requests"
            )
        for index, request_reads in enumerate(reads):
            deliver(index, request_reads)

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        """Async ``read``; by default ``read`` in a worker thread."""
        return await asyncio.to_thread(self.read, requests)

    def load(self) -> None:
        """Load the model if it is loaded lazily (idempotent). The engine calls it before
        the first read, outside ``latency_s``. Default: nothing to load."""

    def warmup(self) -> None:
        """``load()`` plus the one-off work a first read would pay (a first forward).
        ``DecisionEngine.warmup()`` / ``DecisionEngine(eager=True)`` call it."""
        self.load()

    def close(self) -> None:
        """Release held resources (engines, HTTP pools). Idempotent."""

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WrappingReader(Reader):
    """A reader in front of another (the coalescer, fault injection): it answers with the
    wrapped reader's identity and forwards loading, warm-up and closing to it.

    Subclasses set ``self.inner`` and implement ``read``."""

    inner: Reader

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def model(self) -> str:  # type: ignore[override]
        return self.inner.model

    @property
    def max_options(self) -> int:  # type: ignore[override]
        return self.inner.max_options

    def load(self) -> None:
        load = getattr(self.inner, "load", None)  # duck-typed readers may lack it
        if callable(load):
            load()

    def warmup(self) -> None:
        warmup = getattr(self.inner, "warmup", None)
        if callable(warmup):
            warmup()

    def close(self) -> None:
        self.inner.close()
