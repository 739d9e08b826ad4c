"""What agentbranch tells the application: log events, metrics and spans, all silent
until the application asks (docs/metrics.md, docs/langgraph.md "Decision log").

Logs: stdlib ``logging`` under ``"agentbranch"`` (only a ``NullHandler``), structlog-shaped
events with every field also passed as ``extra=``. Metrics and spans: OpenTelemetry's API,
used only once the application has imported it, on its providers (or those given to
``use_meter_provider`` / ``use_tracer_provider``); until an SDK provider is set every hook
returns after one check. Attributes are question ids and small enumerations, never states
or labels' text (the state only with ``use_tracer_provider(include_state=True)``).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "DecisionSpans",
    "active_tracer",
    "event",
    "logger",
    "teacher_span",
    "use_meter_provider",
    "use_tracer_provider",
]

#: The package logger; modules log through it or its children (``agentbranch.canvas``).
logger = logging.getLogger("agentbranch")


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_show(v)}" for k, v in value.items()) + "}"
    text = str(value)
    return repr(text) if not text or any(c.isspace() for c in text) else text


def event(log: logging.Logger, level: int, name: str, /, **fields: Any) -> None:
    """Log the structlog-style event ``name`` with key/value ``fields`` (``None``
    values are left out of the message but kept on the record)."""
    if not log.isEnabledFor(level):
        return
    shown = " ".join(f"{k}={_show(v)}" for k, v in fields.items() if v is not None)
    log.log(level, "%s %s", name, shown, extra={"event": name, **fields}, stacklevel=2)


# -- metrics ----------------------------------------------------------------------------

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


class _Lookup:
    """One signal's provider: the one given to ``use_meter_provider`` /
    ``use_tracer_provider``, else the one the application set globally. Calling it returns
    what ``build`` made on that provider (kept per provider), or ``None`` while nothing
    would record: the API not imported, no provider set, or only the API's stand-in."""

    def __init__(self, api: str, kind: str, stand_ins: tuple[str, str], build: Any) -> None:
        self.api, self.stand_ins, self.build = api, stand_ins, build
        self.getter = f"get_{kind}_provider"
        self.lock = threading.Lock()
        self.given: Any = None
        self.built: tuple[Any, Any] | None = None  # (provider, what build made on it)
        self.noop: Any = None  # the last provider found to be a stand-in (no SDK)

    def use(self, provider: Any) -> None:
        with self.lock:
            self.given, self.built = provider, None

    def __call__(self) -> Any:
        provider = self.given
        if provider is None:
            api = sys.modules.get(self.api)
            if api is None:  # the application has not imported the API
                return None
            # the global one: the API's stand-in until one is set (or named by the
            # environment variable the getter reads)
            provider = getattr(api, self.getter)()
        built = self.built
        if built is not None and built[0] is provider:
            return built[1]
        if provider is self.noop:
            return None
        api = sys.modules[self.api]
        if isinstance(provider, tuple(getattr(api, name) for name in self.stand_ins)):
            self.noop = provider  # the API's stand-in or no-op: it would record nothing
            return None
        with self.lock:
            if self.built is None or self.built[0] is not provider:
                self.built = (provider, self.build(provider))
            return self.built[1]


#: Per question, what the last resolved decision says is in force (for the gauges).
_in_force: dict[str, dict[str, Any]] = {}


def use_meter_provider(provider: Any = None) -> None:
    """Send agentbranch's metrics to ``provider`` (an OpenTelemetry ``MeterProvider``)
    instead of the global one the application set with
    ``opentelemetry.metrics.set_meter_provider``; ``None`` goes back to the global one.
    agentbranch never sets a provider itself."""
    _instruments.use(provider)


#: The counters, by unit: instrument name (after ``agentbranch.``) and description. The
#: name's last part is the counter's key in ``_Instruments.count``.
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
    """The counters (``count``, keyed by their name's last part), the teacher-duration
    histogram and the gauges, made on one provider."""

    def __init__(self, provider: Any) -> None:
        meter = provider.get_meter("agentbranch", package_version())
        self.count: dict[str, Any] = {
            name.rpartition(".")[2]: meter.create_counter(f"agentbranch.{name}", unit, description)
            for unit, counters in _COUNTERS.items()
            for name, description in counters.items()
        }
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


def package_version() -> str:
    """agentbranch's installed version (``"0+unknown"`` in a source tree never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentbranch")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


_instruments = _Lookup(
    "opentelemetry.metrics._internal",
    "meter",
    ("_ProxyMeterProvider", "NoOpMeterProvider"),
    _Instruments,
)


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
        m.count["decisions"].add(1, attrs)
        if band == "take" and rec.get("decided_by") == "engine":
            m.count["takes"].add(1, {QUESTION: question_id})
            if rec.get("trust") == "earned":
                m.count["calls_saved"].add(1, {QUESTION: question_id})
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
    m.count["calls"].add(1, attrs)
    m.duration.record(duration_s, attrs)
    if error is not None:
        m.count["failures"].add(1, {**attrs, ERROR: error})


def _add(counter: str, attrs: dict[str, Any]) -> None:
    m = _instruments()
    if m is not None:
        m.count[counter].add(1, attrs)


def teacher_refused(question_id: str, role: str) -> None:
    """A teacher call not made because earlier ones are stuck (no call, no duration)."""
    _add("refused", {QUESTION: question_id, ROLE: role})


def label_stored(question_id: str) -> None:
    _add("stored", {QUESTION: question_id})


def label_lost(question_id: str) -> None:
    _add("lost", {QUESTION: question_id})


def audit(question_id: str, outcome: str, error: str | None = None) -> None:
    """A due audit: ``outcome`` is ``"due"``, ``"done"`` or ``"missing"``; ``"probe"``:
    a probe of a suspended band sent (no audit: it leaves no label)."""
    if outcome in ("due", "done", "probe"):
        _add("probes" if outcome == "probe" else outcome, {QUESTION: question_id})
    else:
        _add("missing", {QUESTION: question_id, ERROR: error or "unknown"})


# -- observable gauges (read at collection) ---------------------------------------------


def _gauge(read: Callable[[dict[str, Any]], Iterable[tuple[float, dict[str, str]]]]) -> Any:
    """A gauge's callback: ``read`` gives the values (and their attributes) of what is in
    force for each question."""

    def observe(options: Any) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        for question_id, now in list(_in_force.items()):
            for value, attrs in read(now):
                yield Observation(value, {QUESTION: question_id, **attrs})

    return observe


_thresholds = _gauge(lambda now: [] if now["take_at"] is None else [(float(now["take_at"]), {})])
_trusts = _gauge(lambda now: [(int(now["trust"] == trust), {TRUST: trust}) for trust in TRUSTS])
_versions = _gauge(lambda now: [(now["version"], {})] if isinstance(now["version"], int) else [])


# -- spans ------------------------------------------------------------------------------

MODEL = "gen_ai.request.model"
#: The span attributes a decision record's text fields and number fields give.
_TEXTS = {
    "label": "agentbranch.decision.label",
    "reader": "agentbranch.reader.name",
    "model": MODEL,
    "trust": TRUST,
}
_NUMBERS = {
    "confidence": "agentbranch.decision.confidence",
    "take_at": "agentbranch.decision.take_at",
    "latency_s": "agentbranch.decision.latency_s",  # the engine's read, as the record says
}

_include_state = False


def use_tracer_provider(provider: Any = None, *, include_state: bool = False) -> None:
    """Send agentbranch's spans to ``provider`` (an OpenTelemetry ``TracerProvider``)
    instead of the global one the application set with
    ``opentelemetry.trace.set_tracer_provider``; ``None`` goes back to the global one.
    ``include_state=True`` adds the rendered state to each decision span
    (``agentbranch.state``); by default no span carries it."""
    global _include_state
    active_tracer.use(provider)
    _include_state = bool(include_state)


#: The tracer on the provider in use, or ``None`` when no span would be recorded.
active_tracer = _Lookup(
    "opentelemetry.trace",
    "tracer",
    ("ProxyTracerProvider", "NoOpTracerProvider"),
    lambda provider: provider.get_tracer("agentbranch", package_version()),
)


class DecisionSpans:
    """The open spans of one resolution: one per (state, question) while tracing is on
    (else none), started when the resolution starts, ended with the final records'
    attributes."""

    def __init__(self, questions: Sequence[str], states: int) -> None:
        tracer = active_tracer()
        questions = questions if tracer is not None else ()
        self.spans = [
            {q: tracer.start_span(f"decide {q}", attributes={QUESTION: q}) for q in questions}
            for _ in range(states)
        ]

    def finish(self, records: Sequence[Mapping[str, Mapping[str, Any]]], texts: Sequence[Any]):
        """Each span gets its record's attributes and ends."""
        for spans, recs, text in zip(self.spans, records, texts, strict=True):
            for question_id, span in spans.items():
                rec = recs.get(question_id)
                if rec is not None:
                    span.set_attributes(_attributes(rec))
                if _include_state and isinstance(text, str):
                    span.set_attribute("agentbranch.state", text)
                span.end()

    def fail(self, error: BaseException) -> None:
        """The resolution raised: every span says so and ends. A LangGraph interrupt
        (a review asked of a human) and a closed generator are not errors: the spans end
        marked ``agentbranch.decision.interrupted`` (the resumed node decides again)."""
        if not any(self.spans):  # tracing is off
            return
        from opentelemetry.trace import Status, StatusCode

        # By name: this layer does not import LangGraph (GraphInterrupt is a GraphBubbleUp).
        stopped = isinstance(error, GeneratorExit) or any(
            c.__name__ == "GraphBubbleUp" for c in type(error).__mro__
        )
        for spans in self.spans:
            for span in spans.values():
                if stopped:
                    span.set_attribute("agentbranch.decision.interrupted", True)
                else:
                    span.set_attribute(ERROR, type(error).__name__)
                    span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
                span.end()


def _attributes(rec: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        BAND: str(rec.get("band") or "none"),
        DECIDED_BY: str(rec.get("decided_by")),
    }
    out.update({name: rec[key] for key, name in _TEXTS.items() if isinstance(rec.get(key), str)})
    for key, name in _NUMBERS.items():
        if isinstance(rec.get(key), int | float) and not isinstance(rec.get(key), bool):
            out[name] = float(rec[key])
    if isinstance(rec.get("reader_version"), int):
        out["agentbranch.learn.version"] = rec["reader_version"]
    return out


def teacher_span(
    parent: Any,
    question_id: str,
    role: str,
    model: str | None,
    duration_s: float,
    error: str | None,
) -> None:
    """One teacher call that just ended (``role``: ``"fallback"`` or ``"audit"``), as a
    span of ``duration_s`` ending now; a child of ``parent`` (a decision span) if given."""
    tracer = active_tracer()
    if tracer is None:
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

    end = time.time_ns()
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", QUESTION: question_id, ROLE: role}
    if model:
        attrs[MODEL] = model
    span = tracer.start_span(
        f"chat {model}" if model else "chat",
        context=set_span_in_context(parent) if parent is not None else None,
        kind=SpanKind.CLIENT,  # a call to a model, as the GenAI conventions have it
        attributes=attrs,
        start_time=end - int(duration_s * 1e9),
    )
    if error is not None:
        span.set_attribute(ERROR, error)
        span.set_status(Status(StatusCode.ERROR))
    span.end(end_time=end)
