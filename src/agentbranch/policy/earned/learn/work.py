"""Learning's own thread: the work a label or a question's first ask starts (trial reads
of labelled states, store re-reads, adoption, fits, a restart's rebuild) runs here, in
the order it was asked for, so no decision waits on it.

One daemon thread per learner, started with its first task. ``wait`` returns once every
task asked for so far is done (benchmarks, tests, and an app that wants its learning
settled before it exits). At interpreter exit the task in flight finishes (a daemon
thread stopped inside a native forward aborts the process) and the tasks still queued
are dropped: they are trial reads (evidence a version would have had; less evidence
opens nothing) and fits a restart makes again. A long task (a restart's rebuild embeds
every labelled state) checks ``closing`` between its native steps and stops with
``Stopped``, so exit waits for one step, not the whole task.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from agentbranch.core.at_exit import AUDITS, finish_at_exit

log = logging.getLogger("agentbranch")


class Stopped(Exception):
    """Raised by a task that saw ``Work.closing``: the process is exiting."""


class Work:
    """A queue of tasks run one after the other on one daemon thread."""

    def __init__(self, name: str = "agentbranch-learn") -> None:
        self.name = name
        self._tasks: queue.Queue[tuple[Callable[..., Any], tuple]] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()  # set while no task runs
        self._idle.set()
        self._closed = False
        # before the coalescers stop: a task in flight may read through the engine
        finish_at_exit(self._finish_at_exit, order=AUDITS)

    def submit(self, task: Callable[..., Any], *args: Any) -> None:
        """Run ``task(*args)`` on the thread, after every task submitted before it."""
        if self._closed:
            return  # the process is exiting: nothing new starts
        self._tasks.put((task, args))
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    @property
    def closing(self) -> bool:
        """Whether the process is exiting (a long task stops at its next step)."""
        return self._closed

    def on_thread(self) -> bool:
        """Whether the caller is the work's own thread."""
        return threading.current_thread() is self._thread

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every task submitted so far is done; whether they were (``False``:
        ``timeout`` seconds passed first)."""
        if self.on_thread():
            return True  # (a task waiting for itself)
        if self._closed:
            return False  # (exiting: what is queued is dropped, never done)
        done = threading.Event()
        self.submit(done.set)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            task, args = self._tasks.get()
            with self._lock:  # (exit's wait sees either a task started or none)
                if self._closed:
                    return
                self._idle.clear()
            try:
                task(*args)
            except Stopped:
                pass
            except Exception as e:  # noqa: BLE001 - one failed task never stops learning
                log.warning(
                    "agentbranch.learn: %s failed: %s: %s", task.__name__, type(e).__name__, e
                )
            finally:
                self._idle.set()

    def _finish_at_exit(self, deadline: float) -> None:
        """At exit: nothing new starts, what is queued is dropped, the task in flight
        finishes (until ``deadline``), so the thread is stopped waiting on its queue."""
        import time

        with self._lock:
            self._closed = True
        try:
            while True:
                self._tasks.get_nowait()
        except queue.Empty:
            pass
        self._idle.wait(max(0.0, deadline - time.monotonic()))


__all__ = ["Stopped", "Work"]
