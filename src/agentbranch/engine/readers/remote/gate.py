"""``Gate``: the one in-flight limit (``max_connections``) every request of a
``RemoteReader`` passes, from whichever thread or event loop."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any

__all__ = ["Gate"]


class Gate:
    """A count and a queue of waiters: a ``concurrent.futures.Future`` for a thread, an
    ``asyncio.Future`` (woken on its own loop) for a task; a released slot passes straight
    to the next waiter. (``asyncio.Semaphore`` belongs to one loop, and
    ``threading.Semaphore`` would block a loop.)"""

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
                if isinstance(waiter, Future):  # (never cancelled: a thread waits for it)
                    waiter.set_result(None)  # the slot passes to this thread
                    return
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
