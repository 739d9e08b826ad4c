"""Spans through OpenTelemetry's tracing API (docs/metrics.md): one per decision a policy
resolves, one per teacher call (a fallback's, a child of its decision's span; an
audit's, on its own).

As with metrics (``_metrics``), the library never sets a provider or an exporter and
never imports OpenTelemetry itself: the tracer is ``get_tracer("agentbranch", version)``
on the provider the application set (``opentelemetry.trace.set_tracer_provider``) or
gave ``use_tracer_provider``. Until the application has imported the API and set a
provider, each hook returns after one check: no span, no attribute is made.

Attributes follow OpenTelemetry's semantic conventions for generative AI where one fits
(``gen_ai.operation.name``, ``gen_ai.request.model``, ``error.type``) and are
``agentbranch.*`` otherwise, named as the metrics' are. The state's text is never an
attribute unless ``use_tracer_provider(include_state=True)`` asks for it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from agentbranch.core._metrics import BAND, DECIDED_BY, ERROR, QUESTION, ROLE, TRUST

__all__ = ["Decisions", "decisions", "teacher_call", "tracing", "use_tracer_provider"]

MODEL = "gen_ai.request.model"
OPERATION = "gen_ai.operation.name"
LABEL = "agentbranch.decision.label"
CONFIDENCE = "agentbranch.decision.confidence"
TAKE_AT = "agentbranch.decision.take_at"
LATENCY = "agentbranch.decision.latency_s"  # the engine's read, as the record says
READER = "agentbranch.reader.name"
VERSION = "agentbranch.learn.version"
STATE = "agentbranch.state"
INTERRUPTED = "agentbranch.decision.interrupted"

_lock = threading.Lock()
_explicit: Any = None  # a provider given to use_tracer_provider (None: the global one)
_include_state = False
_built: tuple[Any, Any] | None = None  # (provider, tracer)
_noop: list[Any] = [None]  # the last provider found to be a stand-in (no SDK)


def use_tracer_provider(provider: Any = None, *, include_state: bool = False) -> None:
    """Send agentbranch's spans to ``provider`` (an OpenTelemetry ``TracerProvider``)
    instead of the global one the application set with
    ``opentelemetry.trace.set_tracer_provider``; ``None`` goes back to the global one.
    ``include_state=True`` adds the rendered state to each decision span
    (``agentbranch.state``); by default no span carries it."""
    global _explicit, _built, _include_state
    with _lock:
        _explicit, _built, _include_state = provider, None, bool(include_state)


def tracing() -> Any:
    """The tracer on the provider in use, or ``None`` when no span would be recorded."""
    provider = _explicit if _explicit is not None else _global_provider()
    if provider is None:
        return None
    built = _built
    if built is not None and built[0] is provider:
        return built[1]
    if provider is _noop[0]:
        return None
    api = sys.modules["opentelemetry.trace"]
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        _noop[0] = provider  # the API's stand-in: its spans record nothing
        return None
    return _build(provider)


def _global_provider() -> Any:
    """The provider the application set, or ``None`` while it set none (read without a
    call; ``get_tracer_provider`` reads the environment each time), or has not imported
    the API at all."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    provider = getattr(api, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None:  # none set yet; one named by OTEL_PYTHON_TRACER_PROVIDER loads
        return api.get_tracer_provider() if "OTEL_PYTHON_TRACER_PROVIDER" in os.environ else None
    if provider is _UNKNOWN:  # an API release that keeps it elsewhere: ask it
        return api.get_tracer_provider()
    return provider


_UNKNOWN = object()


def _build(provider: Any) -> Any:
    global _built
    from agentbranch.core._metrics import _version

    with _lock:
        if _built is None or _built[0] is not provider:
            _built = (provider, provider.get_tracer("agentbranch", _version()))
        return _built[1]


class Decisions:
    """The open spans of one resolution: one per (state, question), started when the
    resolution starts, ended with the final records' attributes."""

    def __init__(self, tracer: Any, questions: Sequence[str], states: int) -> None:
        self.tracer = tracer
        self.spans = [
            {q: tracer.start_span(f"decide {q}", attributes={QUESTION: q}) for q in questions}
            for _ in range(states)
        ]

    def span(self, index: int, question_id: str) -> Any:
        return self.spans[index][question_id]

    def finish(self, records: Sequence[Mapping[str, Mapping[str, Any]]], texts: Sequence[Any]):
        """Each span gets its record's attributes and ends."""
        for spans, recs, text in zip(self.spans, records, texts, strict=True):
            for question_id, span in spans.items():
                rec = recs.get(question_id)
                if rec is not None:
                    span.set_attributes(_attributes(rec))
                if _include_state and isinstance(text, str):
                    span.set_attribute(STATE, text)
                span.end()

    def fail(self, error: BaseException) -> None:
        """The resolution raised: every span says so and ends. A LangGraph interrupt
        (a review asked of a human) and a closed generator are not errors: the spans end
        marked ``agentbranch.decision.interrupted`` (the resumed node decides again)."""
        from opentelemetry.trace import Status, StatusCode

        # By name: this layer does not import LangGraph (GraphInterrupt is a GraphBubbleUp).
        stopped = isinstance(error, GeneratorExit) or any(
            c.__name__ == "GraphBubbleUp" for c in type(error).__mro__
        )
        for spans in self.spans:
            for span in spans.values():
                if stopped:
                    span.set_attribute(INTERRUPTED, True)
                else:
                    span.set_attribute(ERROR, type(error).__name__)
                    span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
                span.end()


def _attributes(rec: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        BAND: str(rec.get("band") or "none"),
        DECIDED_BY: str(rec.get("decided_by")),
    }
    for key, name in (("label", LABEL), ("reader", READER), ("model", MODEL)):
        if isinstance(rec.get(key), str):
            out[name] = rec[key]
    for key, name in (("confidence", CONFIDENCE), ("take_at", TAKE_AT), ("latency_s", LATENCY)):
        if isinstance(rec.get(key), int | float) and not isinstance(rec.get(key), bool):
            out[name] = float(rec[key])
    if isinstance(rec.get("trust"), str):
        out[TRUST] = rec["trust"]
    if isinstance(rec.get("reader_version"), int):
        out[VERSION] = rec["reader_version"]
    return out


def decisions(questions: Sequence[str], states: int) -> Decisions | None:
    """Spans for a resolution of ``questions`` about ``states`` states, or ``None``
    when tracing is off."""
    tracer = tracing()
    return None if tracer is None else Decisions(tracer, questions, states)


def teacher_call(
    parent: Any,
    question_id: str,
    role: str,
    model: str | None,
    duration_s: float,
    error: str | None,
) -> None:
    """One teacher call that just ended (``role``: ``"fallback"`` or ``"audit"``), as a
    span of ``duration_s`` ending now; a child of ``parent`` (a decision span) if given."""
    tracer = tracing()
    if tracer is None:
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

    end = time.time_ns()
    attrs: dict[str, Any] = {OPERATION: "chat", QUESTION: question_id, ROLE: role}
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
