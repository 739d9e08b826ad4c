"""The audit worker: one background thread draining a bounded queue.

``submit`` never blocks: when the queue is full the job is dropped and counted. Each job
runs on the worker's thread; whatever it raises is logged (stdlib ``logging``, logger
``"agentbranch"``) and counted, never raised to the run that queued it. At interpreter
exit the worker runs what is queued, up to ``agentbranch.core.at_exit.EXIT_WAIT_S``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from agentbranch.core.at_exit import AUDITS, finish_at_exit

log = logging.getLogger("agentbranch")

Job = Callable[[], None]
_STOP = object()


@dataclass
class AuditStats:
    """Counters of one ``Audit`` (a snapshot)."""

    sampled: int = 0  #: taken decisions picked for an audit
    queued: int = 0  #: jobs accepted by the queue (audits and fallback examples)
    dropped: int = 0  #: jobs dropped because the queue was full
    audited: int = 0  #: teacher answers recorded
    fallback_examples: int = 0  #: fallback generations recorded as labelled examples
    failed: int = 0  #: jobs that raised (teacher error, unusable reply, sink error)


class AuditWorker:
    """A bounded queue and the daemon thread that drains it (started on first use)."""

    def __init__(self, queue_size: int, name: str = "agentbranch-audit") -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._name = name
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.stats = AuditStats()
        finish_at_exit(self._finish_at_exit, order=AUDITS)

    def count(self, field: str, n: int = 1) -> None:
        with self._lock:
            setattr(self.stats, field, getattr(self.stats, field) + n)

    def submit(self, job: Job) -> bool:
        """Queue ``job``; ``False`` (and counted as dropped) when the queue is full."""
        self._ensure_started()
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            self.count("dropped")
            log.debug("agentbranch.audit: queue full, audit dropped")
            return False
        self.count("queued")
        return True

    def _ensure_started(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is _STOP:
                    return
                job()  # type: ignore[operator]
            except Exception as e:  # noqa: BLE001 - an audit never fails a run
                self.count("failed")
                log.warning("agentbranch.audit failed: %s: %s", type(e).__name__, e)
            finally:
                self._queue.task_done()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued job has run; ``False`` if ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        done = self._queue.all_tasks_done
        with done:
            while self._queue.unfinished_tasks:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                done.wait(remaining)
        return True

    def _finish_at_exit(self, deadline: float) -> None:
        """Run what is queued before the process stops the daemon thread (which would
        lose it, or abort the process inside a local teacher's native code)."""
        if self._thread is None or self.flush(max(0.0, deadline - time.monotonic())):
            return  # an idle worker waiting on its queue is safe to stop
        left = self._queue.unfinished_tasks
        log.warning(
            "agentbranch.audit: %d audit job(s) still unfinished at exit after the "
            "exit wait; they are lost (call audit.flush() before exiting to wait longer)",
            left,
        )

    def close(self, timeout: float | None = None) -> bool:
        """Run what is queued, then stop the thread; ``False`` if it did not stop in time.
        A later ``submit`` starts a new thread."""
        with self._lock:
            thread = self._thread
        if thread is None or not thread.is_alive():
            return True
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            return False
        thread.join(timeout)
        return not thread.is_alive()
