"""The audit worker: one background thread draining a bounded queue.

``submit`` never blocks: when the queue is full the job is dropped and counted. Each job
runs on the worker's thread; whatever it raises is logged (stdlib ``logging``, logger
``"agentbranch"``, at most one WARNING a minute per kind of trouble: ``ratelimit``) and
counted, never raised to the run that queued it. ``Deadline`` bounds a teacher call. At
interpreter exit the worker runs what is queued, up to
``agentbranch.core.at_exit.EXIT_WAIT_S``.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentbranch.core.at_exit import AUDITS, finish_at_exit
from agentbranch.policy.auditing.ratelimit import RateLimitedLog

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
    timed_out: int = 0  #: teacher calls given up after ``Audit(timeout=...)`` (also failed)


class AuditTimeout(TimeoutError):
    """The audit teacher did not answer within ``Audit(timeout=...)``."""


class Deadline:
    """Runs teacher calls on a helper daemon thread so that the worker stops waiting
    after ``timeout`` seconds (``None``: it waits, on its own thread). A call given up
    on keeps its thread until it returns; while it does, later calls fail at once
    instead of starting more threads behind a stuck teacher."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._stuck: threading.Thread | None = None
        self._stuck_since = 0.0

    def call(self, fn: Callable[[], Any]) -> Any:
        if self.timeout is None:
            return fn()
        if self._stuck is not None:
            if self._stuck.is_alive():
                raise AuditTimeout(
                    f"the teacher has not answered a call made "
                    f"{time.monotonic() - self._stuck_since:.0f} s ago (Audit(timeout="
                    f"{self.timeout:g})); audits fail until it does"
                )
            self._stuck = None
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - handed to the worker below
                box["error"] = e

        thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(run,),
            name="agentbranch-audit-teacher",
            daemon=True,
        )
        started = time.monotonic()
        thread.start()
        thread.join(self.timeout)
        if thread.is_alive():
            self._stuck, self._stuck_since = thread, started
            raise AuditTimeout(
                f"the teacher did not answer within {self.timeout:g} s (Audit(timeout=...))"
            )
        if "error" in box:
            raise box["error"]
        return box["value"]


class AuditWorker:
    """A bounded queue and the daemon thread that drains it (started on first use)."""

    def __init__(self, queue_size: int, name: str = "agentbranch-audit") -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._name = name
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.stats = AuditStats()
        #: WARNINGs of this worker's troubles, at most one a minute per kind.
        self.warnings = RateLimitedLog(log)
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
            self.warnings.warn(
                "dropped",
                "agentbranch.audit: an audit was dropped: its queue (Audit(queue_size=%d)) "
                "is full, so the teacher answers slower than audits are due, or not at all; "
                "audits that never come count against earned trust",
                self._queue.maxsize,
            )
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
                if isinstance(e, AuditTimeout):
                    self.count("timed_out")
                self.warnings.warn(
                    f"failed:{type(e).__name__}",
                    "agentbranch.audit failed: %s: %s", type(e).__name__, e
                )
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
