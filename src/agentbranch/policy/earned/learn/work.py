"""Learning's own thread: the work a label or a question's first ask starts (trial reads
of labelled states, store re-reads, adoption, fits, a restart's rebuild) runs here, in
the order it was asked for, so no decision waits on it.

One daemon thread per learner, started with its first task. ``wait`` returns once every
task asked for so far is done (benchmarks, tests, and an app that wants its learning
settled before it exits). Tasks left when the process exits are lost: they are trial
reads (evidence a version would have had; less evidence opens nothing) and fits a
restart makes again.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("agentbranch")


class Work:
    """A queue of tasks run one after the other on one daemon thread."""

    def __init__(self, name: str = "agentbranch-learn") -> None:
        self.name = name
        self._tasks: queue.Queue[tuple[Callable[..., Any], tuple]] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, task: Callable[..., Any], *args: Any) -> None:
        """Run ``task(*args)`` on the thread, after every task submitted before it."""
        self._tasks.put((task, args))
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def on_thread(self) -> bool:
        """Whether the caller is the work's own thread."""
        return threading.current_thread() is self._thread

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every task submitted so far is done; whether they were (``False``:
        ``timeout`` seconds passed first)."""
        if self.on_thread():
            return True  # (a task waiting for itself)
        done = threading.Event()
        self.submit(done.set)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            task, args = self._tasks.get()
            try:
                task(*args)
            except Exception as e:  # noqa: BLE001 - one failed task never stops learning
                log.warning(
                    "agentbranch.learn: %s failed: %s: %s", task.__name__, type(e).__name__, e
                )


__all__ = ["Work"]
