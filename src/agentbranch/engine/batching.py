"""Micro-batching: concurrent decisions reach the model as ONE reader batch.

LangGraph runs the branches of a ``Send`` fan-out concurrently: sync nodes in a thread
pool, async nodes as asyncio tasks. Each branch calls the engine on its own. Wrap the
reader in a ``BatchingReader`` and the calls that arrive within ``window_s`` of the first
one are read together::

    engine = DecisionEngine(BatchingReader(reader, window_s=0.01))

The first caller of a window becomes its leader: it waits up to ``window_s`` (less when
``max_batch`` requests are queued), takes every queued request, makes one
``reader.read``/``reader.aread`` call (split into chunks of at most ``max_batch``
requests) and
hands each caller its own answers. Sync threads and asyncio tasks can share a window;
errors reach every caller of the failed batch.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from agentbranch.engine.readers.base import Reader
from agentbranch.engine.reads import LabelRead, ReadRequest
from agentbranch.errors import ConfigurationError, ReaderError


@dataclass
class _Waiting:
    requests: list[ReadRequest]
    future: Future[list[list[LabelRead]]] = field(default_factory=Future)


@dataclass
class _Window:
    waiting: list[_Waiting] = field(default_factory=list)
    size: int = 0
    full: threading.Event = field(default_factory=threading.Event)


class BatchingReader(Reader):
    """A reader that coalesces concurrent ``read``/``aread`` calls into one batch.

    Args:
        reader: the reader that does the work.
        window_s: how long the first call of a window waits for others.
        max_batch: flush as soon as this many requests are queued; larger batches are
            read in chunks of this size.
    """

    def __init__(self, reader: Reader, *, window_s: float = 0.01, max_batch: int = 64) -> None:
        if window_s < 0 or max_batch < 1:
            raise ConfigurationError("window_s must be >= 0 and max_batch >= 1")
        self.inner = reader
        self.window_s = window_s
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._window: _Window | None = None

    # the wrapped reader's identity
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
        self.inner.load()

    def warmup(self) -> None:
        self.inner.warmup()

    def close(self) -> None:
        self.inner.close()

    # -- queueing ------------------------------------------------------------------

    def _join(self, requests: Sequence[ReadRequest]) -> tuple[_Waiting, _Window | None]:
        """Queue ``requests``; returns the window to lead, if this call leads one."""
        waiting = _Waiting(list(requests))
        with self._lock:
            lead = self._window is None
            if lead:
                self._window = _Window()
            window = self._window
            assert window is not None
            window.waiting.append(waiting)
            window.size += len(waiting.requests)
            if window.size >= self.max_batch:
                window.full.set()
        return waiting, window if lead else None

    def _close_window(self, window: _Window) -> list[_Waiting]:
        with self._lock:
            if self._window is window:
                self._window = None
            return list(window.waiting)

    def _chunks(self, waiting: list[_Waiting]) -> list[list[tuple[_Waiting, ReadRequest]]]:
        flat = [(w, r) for w in waiting for r in w.requests]
        return [flat[i : i + self.max_batch] for i in range(0, len(flat), self.max_batch)]

    @staticmethod
    def _deliver(
        chunk: list[tuple[_Waiting, ReadRequest]],
        reads: list[list[LabelRead]] | None,
        error: BaseException | None,
        answers: dict[int, list[list[LabelRead]]],
    ) -> None:
        if error is None and reads is not None and len(reads) != len(chunk):
            error = ReaderError(f"reader answered {len(reads)} of {len(chunk)} batched requests")
        for i, (w, _) in enumerate(chunk):
            if w.future.done():
                continue
            if error is not None:
                w.future.set_exception(error)
                continue
            got = answers.setdefault(id(w), [])
            got.append(reads[i])  # type: ignore[index]
            if len(got) == len(w.requests):
                w.future.set_result(got)

    # -- sync ----------------------------------------------------------------------

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        waiting, window = self._join(requests)
        if window is not None:
            window.full.wait(self.window_s)
            answers: dict[int, list[list[LabelRead]]] = {}
            for chunk in self._chunks(self._close_window(window)):
                try:
                    reads = self.inner.read([r for _, r in chunk])
                except BaseException as e:  # every caller of the batch sees it
                    self._deliver(chunk, None, e, answers)
                    continue
                self._deliver(chunk, reads, None, answers)
        return waiting.future.result()

    # -- async ---------------------------------------------------------------------

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        waiting, window = self._join(requests)
        if window is not None:
            if not window.full.is_set() and self.window_s > 0:
                # Wait for the window without blocking the loop; a full batch ends it early.
                try:
                    await asyncio.to_thread(window.full.wait, self.window_s)
                except asyncio.CancelledError:
                    # The leader was cancelled: nobody would read this window; fail it.
                    err = ReaderError("the batch leader was cancelled before reading")
                    for w in self._close_window(window):
                        if not w.future.done():
                            w.future.set_exception(err)
                    raise
            answers: dict[int, list[list[LabelRead]]] = {}
            for chunk in self._chunks(self._close_window(window)):
                try:
                    reads = await self.inner.aread([r for _, r in chunk])
                except BaseException as e:
                    self._deliver(chunk, None, e, answers)
                    continue
                self._deliver(chunk, reads, None, answers)
        return await asyncio.wrap_future(waiting.future)


__all__ = ["BatchingReader"]
