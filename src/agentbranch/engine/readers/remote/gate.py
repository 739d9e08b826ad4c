"""``Gate``: the one in-flight limit of a ``RemoteReader`` (``max_connections``).

The requests of a batch go out concurrently (``aread``: ``asyncio.gather`` on one event
loop; ``read``: a thread pool), and several threads and event loops may share one reader:
every request, from whichever thread or loop, passes this one gate, so the reader never
has more than ``max_connections`` requests in flight.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any

__all__ = ["Gate"]


class Gate:
    """One in-flight limit shared by threads and event loops (``max_connections``).

    ``asyncio.Semaphore`` belongs to one loop and ``threading.Semaphore`` blocks a loop,
    so this keeps a count and a queue of waiters: a ``concurrent.futures.Future`` for a
    thread, an ``asyncio.Future`` (woken on its own loop) for a task. A released slot
    passes straight to the next waiter."""

    # An async waiter is ``[loop, future, handed_over, thread id of its loop]``.

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._used = 0
        self._waiters: deque[Future[None] | list[Any]] = deque()

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                if isinstance(waiter, Future):
                    if waiter.set_running_or_notify_cancel():
                        waiter.set_result(None)  # the slot passes to this thread
                        return
                    continue
                loop, future, thread = waiter[0], waiter[1], waiter[3]
                if future.cancelled() or loop.is_closed():
                    continue
                waiter[2] = True  # handed over; a task cancelled meanwhile gives it back
                if thread == threading.get_ident():
                    _wake(future)  # on the waiter's own thread: no wake-up write to its loop
                else:
                    loop.call_soon_threadsafe(_wake, future)
                return
            self._used -= 1

    def acquire(self) -> None:
        with self._lock:
            if self._used < self.limit:
                self._used += 1
                return
            waiter: Future[None] = Future()
            self._waiters.append(waiter)
        waiter.result()

    async def aacquire(self) -> None:
        with self._lock:
            if self._used < self.limit:
                self._used += 1
                return
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            entry: list[Any] = [loop, future, False, threading.get_ident()]
            self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                handed = entry[2]
            if handed:
                self.release()
            raise


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
