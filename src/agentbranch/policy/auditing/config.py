"""``Audit``: shadow a sampled share of taken decisions with a teacher model."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.errors import ConfigurationError, timeout_seconds
from agentbranch.policy.auditing.worker import (
    AuditRecord,
    AuditStats,
    AuditWorker,
    Deadline,
    Job,
    as_sinks,
)

log = logging.getLogger("agentbranch")

#: The smallest labelling probability an audit or an evidence record may carry: a label
#: stands for at most 1/MIN_RATE = 10,000 decisions, so the weights stay meaningful.
MIN_RATE = 1e-4

AUDIT_EVENT = "agentbranch.audit"
#: The most teacher calls an ``Audit`` makes at once (``workers``).
MAX_WORKERS = 64
#: The fields of an audit record its log event carries.
_LOGGED = tuple("kind question_id engine_label teacher_label agree confidence band teacher".split())


@dataclass(frozen=True, eq=False)
class Audit:
    """Shadow audits for a policy: ``Policy(take_at=0.8, ..., audit=Audit(rate=0.05))``.

    A share ``rate`` of the decisions the engine takes is also asked of the teacher on a
    background worker; audits never delay, change or fail a run (docs/audit.md). Under an
    ``Earned`` policy, due audits that never come suspend the band (docs/earned_method.md).

    Args:
        model: the teacher (a LangChain chat model or Runnable, asked as ``Generate``
            asks); ``None`` uses the policy's ``Generate`` fallback model.
        rate: the share of taken decisions audited, 0 or in [``MIN_RATE``, 1].
        sink: where records go: a JSON Lines path, a LangGraph store, a callable, an
            object with ``write(record)``, or a list of them (``as_sinks``).
        seed / rng: make sampling reproducible (``rng`` is a ``random.Random``).
        queue_size: audits waiting for the teacher before new ones are dropped.
        workers: teacher calls made at once (1 to ``MAX_WORKERS``).
        timeout: seconds one teacher call may take; ``None`` waits for ever.
        instructions: the teacher's system prompt prefix (as ``Generate(instructions=)``).
        fallback_examples: also record each answer of the ``Generate`` fallback.
        include_state: keep the rendered state in each record (off: no user text).

    ``flush()`` waits for queued audits, ``stats`` counts them, ``close()`` stops the worker.
    """

    model: Any = None
    rate: float = 0.05
    sink: Any = None
    seed: int | None = None
    rng: random.Random | None = None
    queue_size: int = 256
    instructions: str | None = None
    fallback_examples: bool = True
    include_state: bool = False
    timeout: float | None = 60.0
    workers: int = 1

    def __post_init__(self) -> None:
        if (
            not isinstance(self.rate, int | float)
            or isinstance(self.rate, bool)
            or not (self.rate == 0.0 or MIN_RATE <= self.rate <= 1.0)
        ):
            raise ConfigurationError(
                f"Audit(rate=...) must be 0 or in [{MIN_RATE:g}, 1] (each audit stands for "
                f"1/rate decisions), got {self.rate!r}"
            )
        if self.queue_size < 1:
            raise ConfigurationError(f"Audit(queue_size=...) must be >= 1, got {self.queue_size}")
        w = self.workers
        if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= MAX_WORKERS:
            raise ConfigurationError(
                f"Audit(workers=...) must be a whole number from 1 to {MAX_WORKERS} (teacher "
                f"calls made at once), got {w!r}"
            )
        if self.model is not None and not callable(getattr(self.model, "invoke", None)):
            raise ConfigurationError(
                f"Audit(model=...) must be a LangChain chat model (with invoke), got "
                f"{type(self.model).__name__}"
            )
        t = timeout_seconds(self.timeout, "Audit(timeout=...)")
        object.__setattr__(self, "_deadline", Deadline(t))
        object.__setattr__(self, "_rng", self.rng or random.Random(self.seed))
        object.__setattr__(self, "_sinks", as_sinks(self.sink))
        object.__setattr__(self, "_worker", AuditWorker(self.queue_size, workers=w))

    # -- used by the resolver (critical path: cheap, never blocking) --------------------

    def sample(self, recorded: bool | None = None) -> bool:
        """Draw whether the next taken decision is audited (counted when it is); a replayed
        decision is audited when the recording audited it (``recorded``)."""
        hit = self.draw() if recorded is None else recorded
        if hit:
            self._worker.count("sampled")  # type: ignore[attr-defined]
        return hit

    def draw(self) -> bool:
        """One draw at ``rate`` (not counted; ``sample`` counts)."""
        worker: AuditWorker = self._worker  # type: ignore[attr-defined]
        with worker._lock:
            return self._rng.random() < self.rate  # type: ignore[attr-defined]

    def submit(self, job: Job) -> bool:
        """Queue a job for the worker; ``False`` when the queue is full (dropped)."""
        return self._worker.submit(job)  # type: ignore[attr-defined]

    # -- used on the worker's thread ----------------------------------------------------

    def call_teacher(self, fn: Any) -> Any:
        """``fn()`` (the teacher's ``invoke``), given up after ``timeout`` seconds."""
        return self._deadline.call(fn)  # type: ignore[attr-defined]

    def write(self, record: AuditRecord) -> None:
        """Send one record to every sink and to the log. A failing sink is logged; the
        others still get the record."""
        self._worker.count("audited" if record["kind"] == "audit" else "fallback_examples")  # type: ignore[attr-defined]
        for sink in self._sinks:  # type: ignore[attr-defined]
            try:
                sink.write(record)
            except Exception as e:  # noqa: BLE001 - a sink never fails a run
                self._worker.count("failed")  # type: ignore[attr-defined]
                self._worker.warnings.warn(  # type: ignore[attr-defined]
                    f"sink:{id(sink)}",
                    "agentbranch.audit: sink %r failed: %s: %s",
                    sink,
                    type(e).__name__,
                    e,
                )
        telemetry.event(log, logging.INFO, AUDIT_EVENT, **{k: record[k] for k in _LOGGED})

    # -- for the application ------------------------------------------------------------

    @property
    def stats(self) -> AuditStats:
        """A snapshot of the counters."""
        worker: AuditWorker = self._worker  # type: ignore[attr-defined]
        with worker._lock:
            return AuditStats(**vars(worker.stats))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued audits are recorded; ``False`` if ``timeout`` passed first."""
        return self._worker.flush(timeout)  # type: ignore[attr-defined]

    def close(self, timeout: float | None = None) -> bool:
        """Record what is queued and stop the worker thread."""
        return self._worker.close(timeout)  # type: ignore[attr-defined]

    def __copy__(self) -> Audit:
        return self  # one queue, one worker and one set of sinks, however it is copied

    def __deepcopy__(self, memo: dict) -> Audit:
        return self

    def __repr__(self) -> str:
        model = type(self.model).__name__ if self.model is not None else "<Generate model>"
        return f"Audit(model={model}, rate={self.rate}, sinks={self._sinks!r})"  # type: ignore[attr-defined]


__all__ = [
    "AUDIT_EVENT",
    "Audit",
    "MAX_WORKERS",
    "MIN_RATE",
]
