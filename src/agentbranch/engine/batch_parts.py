"""What the coalescer (``agentbranch.engine.batching``) queues and reads: a caller's call,
each distinct request in flight with the calls waiting for it, a batch a worker took,
and the digest that tells identical requests apart."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from agentbranch.core.errors import ReaderError
from agentbranch.core.reads import LabelRead, ReadRequest

__all__ = [
    "SIMILAR_WINDOW",
    "Batch",
    "Call",
    "Handover",
    "Item",
    "QueueFullError",
    "hashable",
    "new_call",
    "one_call",
    "read_key",
    "similar_part",
]


class QueueFullError(ReaderError):
    """The coalescer's queue stayed full for ``queue_timeout_s``: the reader is
    overloaded. Lower the load, raise ``max_queue``/``queue_timeout_s``, or add readers."""


def read_key(request: ReadRequest) -> str:
    """A digest of everything that determines a read (the answer-cache key): the state,
    instructions, draws, joint, and every question's id, type, wording, options,
    descriptions and labels."""
    blob = json.dumps(
        [
            request.state,
            request.instructions,
            request.draws,
            request.joint,
            [
                [q.id, q.type, q.instructions, q.options, q.descriptions, q.labels]
                for q in request.questions
            ],
        ],
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def hashable(request: ReadRequest) -> bool:
    try:
        hash(request)
    except TypeError:  # built by hand with lists instead of tuples
        return False
    return True


@dataclass(eq=False)
class Call:
    """One caller's ``read``: its answers fill in as the requests are read."""

    answers: list[list[LabelRead] | None]
    remaining: int
    future: Future[list[list[LabelRead]]] = field(default_factory=Future)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The calling thread when it is a pool's and never called before (a fresh pool
    #: may be starting: ``BatchingReader.hold_new_threads``), else ``None``.
    pool_thread: threading.Thread | None = None
    #: Who called: the calling thread (a sync caller) or event loop (an async one).
    thread: threading.Thread | None = None
    loop: Any = None
    #: Whether the coalescer counts the caller as waiting yet (from its first queueing).
    arrived: bool = False

    def give(self, index: int, reads: list[LabelRead]) -> None:
        with self.lock:  # answers may arrive from several workers at once
            if self.future.done() or self.answers[index] is not None:
                return
            self.answers[index] = reads
            self.remaining -= 1
            last = self.remaining == 0
        if last:
            try:
                self.future.set_result(self.answers)  # type: ignore[arg-type]
            except InvalidStateError:  # cancelled meanwhile
                pass

    def fail(self, error: BaseException) -> None:
        try:
            self.future.set_exception(error)
        except InvalidStateError:
            pass


def new_call(
    requests: Sequence[ReadRequest],
    thread: threading.Thread | None = None,
    loop: Any = None,
) -> tuple[Call, deque[tuple[int, ReadRequest]]]:
    """A caller's ``Call`` for ``requests`` and its requests still to queue, by index."""
    requests = list(requests)
    call = Call([None] * len(requests), len(requests), thread=thread, loop=loop)
    if not requests:
        call.future.set_result([])
        return call, deque()
    # Shortest state first: the reads a call is cut into (``max_batch``,
    # ``pipelined_batch``) then each hold states of similar length, and a reader
    # that pads (every torch reader) pads each little (answers keep their places).
    return call, deque(sorted(enumerate(requests), key=lambda pair: len(pair[1].state)))


@dataclass(eq=False)
class Item:
    """One distinct request in flight, and every (call, index) waiting for it."""

    request: ReadRequest
    key: Any
    waiters: list[tuple[Call, int]] = field(default_factory=list)

    def wanted(self) -> bool:
        return any(not call.future.done() for call, _ in self.waiters)


@dataclass(eq=False)
class Batch:
    """The requests one worker is reading; ``counted`` while it counts toward
    ``concurrency`` (until every caller abandoned it)."""

    items: list[Item]
    thread: threading.Thread
    counted: bool = True


#: A read cut from a longer queue looks this many reads' worth into it for requests of
#: its first request's length.
SIMILAR_WINDOW = 4


def similar_part(queue: deque[Item], limit: int) -> list[Item]:
    """Take the next read's items off ``queue``: all of them when they fit in ``limit``;
    else the oldest and the ``limit - 1`` of the next ``SIMILAR_WINDOW × limit`` whose
    states are closest to its length (ties: the older), the rest staying queued in
    order. A reader pads each forward to its longest state, so a burst's reads then
    each hold states of similar length; the oldest is always read, so none starves."""
    if len(queue) <= limit:
        part = list(queue)
        queue.clear()
        return part
    window = [queue.popleft() for _ in range(min(len(queue), SIMILAR_WINDOW * limit))]
    head, rest = window[0], window[1:]
    n = len(head.request.state)
    nearest = sorted(range(len(rest)), key=lambda i: abs(len(rest[i].request.state) - n))
    chosen = set(nearest[: limit - 1])
    queue.extendleft(reversed([item for i, item in enumerate(rest) if i not in chosen]))
    return [head, *(item for i, item in enumerate(rest) if i in chosen)]


def one_call(queue: deque[Item], n: int) -> bool:
    """Whether the next ``n`` queued requests all wait for one call only (a
    ``decide_many``): cutting them into small pipelined parts lets nobody go on early,
    it only adds reads."""
    return len({id(call) for item in islice(queue, n) for call, _ in item.waiters}) == 1


class Handover:
    """``deliver`` for ``Reader.read_each`` over one batch: each request is settled once
    (``settle(item, reads, error)``), its reads or the ``ReaderError`` in their place
    given to its callers (the engine raises that error), any other error failing them."""

    def __init__(self, items: list[Item], settle: Any) -> None:
        self.items = items
        self.settle = settle
        self.done = [False] * len(items)

    def __call__(self, index: int, reads: list[LabelRead] | BaseException) -> None:
        if self.done[index]:
            return
        self.done[index] = True
        if isinstance(reads, BaseException) and not isinstance(reads, ReaderError):
            self.settle(self.items[index], None, reads)
        else:
            self.settle(self.items[index], reads, None)

    def left(self) -> list[Item]:
        """The requests not handed over yet."""
        return [item for item, done in zip(self.items, self.done) if not done]

    def check(self, reader: str) -> None:
        """Raise ``ReaderError`` if ``reader``'s ``read_each`` returned with requests
        still not handed over."""
        if not all(self.done):
            raise ReaderError(
                f"reader {reader!r} answered {sum(self.done)} of {len(self.done)} batched requests"
            )
