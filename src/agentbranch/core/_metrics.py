"""Metrics through OpenTelemetry's API (docs/metrics.md): what the engine takes, what the
teacher costs, whether labels are stored and audits arrive, the trust in force.

The API (``opentelemetry-api``, the ``metrics`` extra) is optional and the library never
sets a provider or an exporter: the meter is ``opentelemetry.metrics.get_meter
("agentbranch", version)`` on the application's provider (or the one given to
``use_meter_provider``). agentbranch never imports OpenTelemetry itself (its import
takes a fifth of a second): it uses the API once the application has imported it, as it
does to set its provider. Until then, and while no SDK provider is set, every hook
returns after one check: no instrument is made, no attribute built. Each fact is counted
in one place (where its record is logged); attributes are question ids and a few small
enumerations (band, who decided, role, error type), never states or labels' text.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["enabled", "use_meter_provider"]

#: Attribute names (OpenTelemetry style: lowercase, dot-namespaced).
QUESTION = "agentbranch.question.id"
BAND = "agentbranch.decision.band"
DECIDED_BY = "agentbranch.decision.decided_by"
ROLE = "agentbranch.teacher.role"
TRUST = "agentbranch.trust.state"
ERROR = "error.type"

TRUSTS = ("learning", "earned", "withdrawn", "fixed")
#: Teacher latency buckets (seconds): a fast local model to a slow remote one.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

_lock = threading.Lock()
_explicit: Any = None  # a provider given to use_meter_provider (None: the global one)
_built: tuple[Any, Any] | None = None  # (provider, _Instruments)
_noop: list[Any] = [None]  # the last provider found to be a stand-in (no SDK)
#: Per question, what the last resolved decision says is in force (for the gauges).
_in_force: dict[str, dict[str, Any]] = {}


def use_meter_provider(provider: Any = None) -> None:
    """Send agentbranch's metrics to ``provider`` (an OpenTelemetry ``MeterProvider``)
    instead of the global one the application set with
    ``opentelemetry.metrics.set_meter_provider``; ``None`` goes back to the global one.
    agentbranch never sets a provider itself."""
    global _explicit, _built
    with _lock:
        _explicit, _built = provider, None


#: The counters, by unit: instrument name (after ``agentbranch.``) and description. The
#: name's last part is the attribute of ``_Instruments`` that holds the counter.
_COUNTERS = {
    "{decision}": {
        "decisions": "Decisions resolved",
        "takes": "Decisions the engine's read took",
    },
    "{call}": {
        "teacher.calls_saved": (
            "Decisions taken above an earned threshold (each one a teacher call saved)"
        ),
        "teacher.calls": "Calls of a teacher model",
        "teacher.failures": "Teacher calls that failed, timed out or named no option",
        "teacher.refused": (
            "Teacher calls not made: earlier calls are still running past their timeout"
        ),
    },
    "{label}": {
        "labels.stored": "Teacher labels stored",
        "labels.lost": "Teacher labels lost: the store could not be written",
    },
    "{audit}": {
        "audits.due": "Audits sampled (due)",
        "audits.done": "Due audits the teacher answered",
        "audits.missing": "Due audits that never came",
        "audits.probes": (
            "Probes sent while a band is suspended (the fallback labels those decisions)"
        ),
    },
}


class _Instruments:
    # The counters of ``_COUNTERS``, set by name.
    decisions: Any
    takes: Any
    calls_saved: Any
    calls: Any
    failures: Any
    refused: Any
    stored: Any
    lost: Any
    due: Any
    done: Any
    missing: Any
    probes: Any

    def __init__(self, provider: Any) -> None:
        meter = provider.get_meter("agentbranch", _version())
        for unit, counters in _COUNTERS.items():
            for name, description in counters.items():
                counter = meter.create_counter(f"agentbranch.{name}", unit, description)
                setattr(self, name.rpartition(".")[2], counter)
        self.duration = meter.create_histogram(
            "agentbranch.teacher.duration",
            "s",
            "Duration of teacher calls",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        g = meter.create_observable_gauge
        g("agentbranch.threshold", [_thresholds], "1", "The take threshold in force")
        g("agentbranch.trust", [_trusts], "1", "1 for the trust state in force, else 0")
        g(
            "agentbranch.learn.version",
            [_versions],
            "{version}",
            "The learned version of the read deciding",
        )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentbranch")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def _instruments() -> _Instruments | None:
    """The instruments on the provider in use, or ``None`` when nothing would record."""
    provider = _explicit if _explicit is not None else _global_provider()
    if provider is None:
        return None
    built = _built
    if built is not None and built[0] is provider:
        return built[1]
    if provider is _noop[0]:
        return None
    if _is_noop(sys.modules["opentelemetry.metrics"], provider):
        _noop[0] = provider  # a no-op provider: instruments would record nothing
        return None
    return _build(provider)


def _global_provider() -> Any:
    """The provider the application set globally, or ``None`` while it set none (read
    without a call: the API's own ``get_meter_provider`` reads the environment each
    time). ``None`` too when the application has not imported the API at all."""
    internal = sys.modules.get("opentelemetry.metrics._internal")
    if internal is None:
        return None
    provider = getattr(internal, "_METER_PROVIDER", _UNKNOWN)
    if provider is None:  # none set yet; one named by OTEL_PYTHON_METER_PROVIDER loads
        return internal.get_meter_provider() if _env_provider() else None
    if provider is _UNKNOWN:  # an API release that keeps it elsewhere: ask it
        return sys.modules["opentelemetry.metrics"].get_meter_provider()
    return provider


@functools.cache
def _env_provider() -> bool:
    return "OTEL_PYTHON_METER_PROVIDER" in os.environ


_UNKNOWN = object()


def _is_noop(api: Any, provider: Any) -> bool:
    """Whether ``provider`` is the API's own stand-in (no SDK set yet) or its no-op."""
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    return isinstance(provider, _ProxyMeterProvider | api.NoOpMeterProvider)


def _build(provider: Any) -> _Instruments:
    global _built
    with _lock:
        if _built is None or _built[0] is not provider:
            _built = (provider, _Instruments(provider))
        return _built[1]


def enabled() -> bool:
    """Whether metrics are recorded (the API is installed and an SDK provider set)."""
    return _instruments() is not None


# -- hooks (each fact in one place) ----------------------------------------------------


def decisions(records: Iterable[Mapping[str, Any]]) -> None:
    """Resolved decision records, as logged (``agentbranch.decision`` events)."""
    m = _instruments()
    if m is None:
        return
    for rec in records:
        question_id = str(rec.get("question_id"))
        band = rec.get("band") or "none"
        attrs = {QUESTION: question_id, BAND: band, DECIDED_BY: str(rec.get("decided_by"))}
        m.decisions.add(1, attrs)
        if band == "take" and rec.get("decided_by") == "engine":
            m.takes.add(1, {QUESTION: question_id})
            if rec.get("trust") == "earned":
                m.calls_saved.add(1, {QUESTION: question_id})
        if rec.get("trust") is not None:
            _in_force[question_id] = {
                "take_at": rec.get("take_at"),
                "trust": rec.get("trust"),
                "version": rec.get("reader_version"),
            }


def teacher_call(question_id: str, role: str, duration_s: float, error: str | None) -> None:
    """One teacher call (``role``: ``"fallback"`` or ``"audit"``) and how it ended."""
    m = _instruments()
    if m is None:
        return
    attrs = {QUESTION: question_id, ROLE: role}
    m.calls.add(1, attrs)
    m.duration.record(duration_s, attrs)
    if error is not None:
        m.failures.add(1, {**attrs, ERROR: error})


def teacher_refused(question_id: str, role: str) -> None:
    """A teacher call not made because earlier ones are stuck (no call, no duration)."""
    m = _instruments()
    if m is not None:
        m.refused.add(1, {QUESTION: question_id, ROLE: role})


def label_stored(question_id: str) -> None:
    m = _instruments()
    if m is not None:
        m.stored.add(1, {QUESTION: question_id})


def label_lost(question_id: str) -> None:
    m = _instruments()
    if m is not None:
        m.lost.add(1, {QUESTION: question_id})


def audit(question_id: str, outcome: str, error: str | None = None) -> None:
    """A due audit: ``outcome`` is ``"due"``, ``"done"`` or ``"missing"``; ``"probe"``:
    a probe of a suspended band sent (no audit: it leaves no label)."""
    m = _instruments()
    if m is None:
        return
    attrs = {QUESTION: question_id}
    if outcome == "due":
        m.due.add(1, attrs)
    elif outcome == "done":
        m.done.add(1, attrs)
    elif outcome == "probe":
        m.probes.add(1, attrs)
    else:
        m.missing.add(1, {**attrs, ERROR: error or "unknown"})


# -- observable gauges (read at collection) ---------------------------------------------


def _thresholds(options: Any) -> Iterable[Any]:
    from opentelemetry.metrics import Observation

    for question_id, now in list(_in_force.items()):
        if now["take_at"] is not None:
            yield Observation(float(now["take_at"]), {QUESTION: question_id})


def _trusts(options: Any) -> Iterable[Any]:
    from opentelemetry.metrics import Observation

    for question_id, now in list(_in_force.items()):
        for trust in TRUSTS:
            yield Observation(
                1 if now["trust"] == trust else 0, {QUESTION: question_id, TRUST: trust}
            )


def _versions(options: Any) -> Iterable[Any]:
    from opentelemetry.metrics import Observation

    for question_id, now in list(_in_force.items()):
        if isinstance(now["version"], int):
            yield Observation(now["version"], {QUESTION: question_id})
