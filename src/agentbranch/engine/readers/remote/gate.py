"""``Gate``: the one in-flight limit (``max_connections``) every request of a
``RemoteReader`` passes, from whichever thread or event loop."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from concurrent.futures import Future

__all__ = ["Gate"]


class Gate:
    """A count and a queue of waiters, each a ``concurrent.futures.Future`` (a task
    awaits its own through ``asyncio.wrap_future``, woken on its loop); a released slot
    passes straight to the next waiter. (``asyncio.Semaphore`` belongs to one loop, and
    ``threading.Semaphore`` would block a loop.)"""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._used = 0
        #: Each waiter with the loop of the task that waits on it (``None``: a thread).
        self._waiters: deque[tuple[Future[None], asyncio.AbstractEventLoop | None]] = deque()

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter, loop = self._waiters.popleft()
                if loop is not None and loop.is_closed():
                    continue  # nobody will ever wake there
                if waiter.set_running_or_notify_cancel():
                    waiter.set_result(None)  # the slot passes to this waiter
                    return
            self._used -= 1

    def _waiter(self, loop: asyncio.AbstractEventLoop | None) -> Future[None] | None:
        """``None`` with a slot taken now, else the future a slot is handed over on."""
        with self._lock:
            if self._used < self.limit:
                self._used += 1
                return None
            waiter: Future[None] = Future()
            self._waiters.append((waiter, loop))
            return waiter

    def acquire(self) -> None:
        waiter = self._waiter(None)
        if waiter is not None:
            waiter.result()

    async def aacquire(self) -> None:
        waiter = self._waiter(asyncio.get_running_loop())
        if waiter is None:
            return
        try:
            await asyncio.wrap_future(waiter)
        except asyncio.CancelledError:
            if not waiter.cancel():  # handed a slot meanwhile: it passes on
                self.release()
            raise
