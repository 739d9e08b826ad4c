"""The audit worker and where its records go: background threads drain a bounded queue
(a full queue drops the job; whatever a job raises is logged and counted, never raised to
the run), ``Deadline`` bounds a teacher call, and sinks (``Sink``) take the records."""

from __future__ import annotations

import contextvars
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agentbranch.core.at_exit import AUDITS, finish_at_exit
from agentbranch.core.errors import ConfigurationError
from agentbranch.core.files import PRIVATE_MODE, append_regular, check_mode, kind

log = logging.getLogger("agentbranch")

Job = Callable[[], None]
_STOP = object()


class RateLimitedLog:
    """At most one WARNING per ``kind`` every ``interval_s`` (a stuck teacher fails every
    audit); the next line logged says how many were not."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def warn(self, kind: str, msg: str, *args: object) -> None:
        """Log ``msg % args`` at WARNING unless ``kind`` was logged less than
        ``interval_s`` ago (then it is counted)."""
        now = self._clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval_s:
                self._held[kind] = self._held.get(kind, 0) + 1
                return
            held = self._held.pop(kind, 0)
            self._last[kind] = now
        if held:
            msg += " (%d more like this in the last %.0f s were not logged)"
            args = (*args, held, now - last if last is not None else 0.0)
        self._log.warning(msg, *args)


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


class TeacherStuck(AuditTimeout):
    """The call was not made: an earlier call of this worker is still running past
    ``Audit(timeout=...)`` (a refusal, not timed or counted as a teacher call)."""


class Deadline:
    """Runs teacher calls on a helper daemon thread so that the worker stops waiting
    after ``timeout`` seconds (``None``: it waits). While a call given up on still runs,
    later calls from the same worker thread fail at once (``TeacherStuck``)."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._mine = threading.local()  # .stuck, .since: this worker thread's stuck call

    def call(self, fn: Callable[[], Any]) -> Any:
        if self.timeout is None:
            return fn()
        stuck = getattr(self._mine, "stuck", None)
        if stuck is not None and stuck.is_alive():
            raise TeacherStuck(
                f"the teacher has not answered a call made "
                f"{time.monotonic() - self._mine.since:.0f} s ago (Audit(timeout="
                f"{self.timeout:g})); audits fail until it does"
            )
        answer: Future[Any] = Future()

        def run() -> None:
            try:
                answer.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - handed to the worker below
                answer.set_exception(e)

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
            self._mine.stuck, self._mine.since = thread, started
            raise AuditTimeout(
                f"the teacher did not answer within {self.timeout:g} s (Audit(timeout=...))"
            )
        return answer.result()  # (raises what the call raised)


class AuditWorker:
    """A bounded queue and the ``workers`` daemon threads that drain it (started on
    first use)."""

    def __init__(self, queue_size: int, workers: int = 1) -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._workers = workers
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.stats = AuditStats()
        self.warnings = RateLimitedLog(log)
        finish_at_exit(self._finish_at_exit, order=AUDITS)

    def count(self, field: str) -> None:
        with self._lock:
            setattr(self.stats, field, getattr(self.stats, field) + 1)

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
            self._threads = [t for t in self._threads if t.is_alive()]
            while len(self._threads) < self._workers:
                k = len(self._threads)
                name = "agentbranch-audit" if k == 0 else f"agentbranch-audit-{k}"
                thread = threading.Thread(target=self._run, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)

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
                    "agentbranch.audit failed: %s: %s",
                    type(e).__name__,
                    e,
                )
            finally:
                self._queue.task_done()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued job has run; ``False`` if ``timeout`` passed first."""
        done = self._queue.all_tasks_done
        with done:
            return done.wait_for(lambda: not self._queue.unfinished_tasks, timeout)

    def _finish_at_exit(self, deadline: float) -> None:
        """Run what is queued before the process stops the daemon threads."""
        if not self._threads or self.flush(max(0.0, deadline - time.monotonic())):
            return  # an idle worker waiting on its queue is safe to stop
        log.warning(
            "agentbranch.audit: %d audit job(s) still unfinished at exit after the "
            "exit wait; they are lost (call audit.flush() before exiting to wait longer)",
            self._queue.unfinished_tasks,
        )

    def close(self, timeout: float | None = None) -> bool:
        """Run what is queued, then stop the threads; ``False`` if they did not stop in
        time. A later ``submit`` starts new threads."""
        with self._lock:
            threads = [t for t in self._threads if t.is_alive()]
        end = None if timeout is None else time.monotonic() + timeout
        try:
            for _ in threads:  # each thread takes one stop and returns
                left = None if end is None else max(0.0, end - time.monotonic())
                self._queue.put(_STOP, timeout=left)
        except queue.Full:
            return False
        for thread in threads:
            thread.join(None if end is None else max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in threads)


AuditRecord = dict[str, Any]


@runtime_checkable
class Sink(Protocol):
    """Where audit records go: anything with ``write(record)``."""

    def write(self, record: AuditRecord) -> None: ...


class JsonlSink:
    """Appends one JSON object per line to ``path`` (created with its folder), in a new
    file owner-only by default (records may hold user text; ``mode=0o640`` lets a group
    read it); a wider existing file is tightened with a WARNING (``core.files``)."""

    def __init__(self, path: str | Path, *, mode: int = PRIVATE_MODE) -> None:
        self.path = Path(path)
        self.mode = check_mode(mode, "JsonlSink")
        self._lock = threading.Lock()

    def write(self, record: AuditRecord) -> None:
        # allow_nan=False: a line the loader refuses is worse than a failed write.
        line = json.dumps(record, ensure_ascii=False, default=str, allow_nan=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_regular(
                self.path,
                line.encode("utf-8"),
                lambda mode: ConfigurationError(
                    f"audit sink {self.path} is {kind(mode)}, not a regular file; give a "
                    ".jsonl file path"
                ),
                mode=self.mode,
                private="audit file",
            )

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"


class StoreSink:
    """Puts each record into a LangGraph store under ``namespace``, keyed by its id;
    read them back with ``[item.value for item in store.search(namespace, limit=...)]``."""

    def __init__(self, store: Any, namespace: tuple[str, ...] = ("agentbranch", "audits")) -> None:
        self.store = store
        self.namespace = tuple(namespace)

    def write(self, record: AuditRecord) -> None:
        self.store.put(self.namespace, record["id"], record)


class CallbackSink:
    """Calls ``fn(record)`` for each record."""

    def __init__(self, fn: Callable[[AuditRecord], Any]) -> None:
        self.fn = fn

    def write(self, record: AuditRecord) -> None:
        self.fn(record)


def as_sinks(sink: Any) -> list[Sink]:
    """The sinks named by ``Audit(sink=...)``: a path is a ``JsonlSink``, a LangGraph
    ``BaseStore`` a ``StoreSink``, a plain callable a ``CallbackSink``, a list any mix."""
    from langgraph.store.base import BaseStore

    if sink is None:
        return []
    if isinstance(sink, str | Path):
        return [JsonlSink(sink)]
    if isinstance(sink, BaseStore):
        return [StoreSink(sink)]
    if isinstance(sink, Sink):
        return [sink]
    if callable(sink):
        return [CallbackSink(sink)]
    if isinstance(sink, Sequence):
        return [s for item in sink for s in as_sinks(item)]
    raise ConfigurationError(
        f"Audit(sink=...) got {type(sink).__name__}; give a file path (JSON Lines), a "
        "LangGraph store, a callable taking a record, or a list of them"
    )


__all__ = [
    "AuditStats",
    "RateLimitedLog",
    "AuditTimeout",
    "TeacherStuck",
    "AuditWorker",
    "Deadline",
    "Job",
    "AuditRecord",
    "CallbackSink",
    "JsonlSink",
    "Sink",
    "StoreSink",
    "as_sinks",
]
