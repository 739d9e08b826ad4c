"""Spans through OpenTelemetry's tracing API (agentbranch.core._telemetry, docs/metrics.md),
exported by the SDK's InMemorySpanExporter: one span per decision with its band, who
decided, confidence, take_at, version and latency; a fallback's teacher call a child of
it; an audit's teacher call on its own; never the state's text unless asked; and nothing
made without the application's provider."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _earned_fixtures import URGENT, Oracle, engine, state, urgent_graph
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

import agentbranch as ab
from agentbranch.policy import Audit, Earned, Generate, Policy
from agentbranch.policy.resolving import Resolver

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def exporter():
    """An SDK provider exporting to memory, given to agentbranch explicitly (the global
    provider stays unset)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ab.use_tracer_provider(provider)
    try:
        yield exporter
    finally:
        ab.use_tracer_provider(None)
        provider.shutdown()


def by_name(exporter):
    return {s.name: s for s in exporter.get_finished_spans()}


def resolver(policy):
    return Resolver(engine(), {"urgent": URGENT}, policy)


def test_a_take_is_one_span_with_its_attributes(exporter):
    rec = resolver(Policy(take_at=0.5, fallbacks=[Generate(Oracle())])).resolve(
        state(1, "yes", 0.99, "yes")
    )["urgent"]
    (span,) = exporter.get_finished_spans()
    assert span.name == "decide urgent" and span.instrumentation_scope.name == "agentbranch"
    a = span.attributes
    assert a["agentbranch.question.id"] == "urgent"
    assert a["agentbranch.decision.band"] == "take"
    assert a["agentbranch.decision.decided_by"] == "engine"
    assert a["agentbranch.decision.label"] == "yes"
    assert a["agentbranch.decision.confidence"] == pytest.approx(rec["confidence"])
    assert a["agentbranch.decision.take_at"] == 0.5
    assert a["agentbranch.decision.latency_s"] == pytest.approx(rec["latency_s"])
    assert a["gen_ai.request.model"] == "scripted-model"
    assert a["agentbranch.reader.name"] == "scripted"
    assert span.status.status_code == StatusCode.UNSET and span.end_time >= span.start_time


def test_a_fallback_has_a_child_span_for_the_teacher_call(exporter):
    rec = resolver(Policy(take_at=0.9, fallbacks=[Generate(Oracle())])).resolve(
        state(2, "yes", 0.55, "no")
    )["urgent"]
    assert rec["decided_by"] == "fallback" and rec["label"] == "no"
    spans = by_name(exporter)
    decision, teacher = spans["decide urgent"], spans["chat Oracle"]
    assert decision.attributes["agentbranch.decision.band"] == "fallback"
    assert decision.attributes["agentbranch.decision.decided_by"] == "fallback"
    assert decision.attributes["agentbranch.decision.label"] == "no"
    assert teacher.parent is not None and teacher.parent.span_id == decision.context.span_id
    assert teacher.context.trace_id == decision.context.trace_id
    assert teacher.kind == SpanKind.CLIENT
    assert teacher.attributes["gen_ai.operation.name"] == "chat"
    assert teacher.attributes["gen_ai.request.model"] == "Oracle"
    assert teacher.attributes["agentbranch.teacher.role"] == "fallback"
    assert decision.start_time <= teacher.start_time <= teacher.end_time <= decision.end_time


def test_a_teacher_that_fails_marks_both_spans(exporter):
    class Broken(Oracle):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            raise RuntimeError("the teacher is down")

    with pytest.raises(RuntimeError, match="the teacher is down"):
        resolver(Policy(take_at=0.9, fallbacks=[Generate(Broken())])).resolve(
            state(3, "yes", 0.55, "no")
        )
    spans = by_name(exporter)
    decision, teacher = spans["decide urgent"], spans["chat Broken"]
    assert teacher.attributes["error.type"] == "RuntimeError"
    assert teacher.status.status_code == StatusCode.ERROR
    assert teacher.parent.span_id == decision.context.span_id
    assert decision.status.status_code == StatusCode.ERROR
    assert decision.attributes["error.type"] == "RuntimeError"


def test_no_span_carries_the_state_unless_asked(exporter):
    text = state(4, "yes", 0.55, "no")
    r = resolver(Policy(take_at=0.9, fallbacks=[Generate(Oracle())]))
    r.resolve(text)
    spans = exporter.get_finished_spans()
    assert len(spans) == 2
    for span in spans:
        for value in span.attributes.values():
            assert "item 4" not in str(value)
    provider = TracerProvider()
    asked = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(asked))
    ab.use_tracer_provider(provider, include_state=True)
    r.resolve(text)
    decision = by_name(asked)["decide urgent"]
    assert decision.attributes["agentbranch.state"] == text
    assert "agentbranch.state" not in by_name(asked)["chat Oracle"].attributes


def test_an_earned_decision_says_its_trust(exporter, tmp_path):
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0, store=str(tmp_path / "e.jsonl"))
    r = resolver(Policy(take_at=earned, fallbacks=[Generate(Oracle())]))
    r.resolve(state(5, "yes", 0.99, "yes"))
    decision = by_name(exporter)["decide urgent"]
    assert decision.attributes["agentbranch.trust.state"] == "learning"
    assert decision.attributes["agentbranch.decision.decided_by"] == "fallback"
    assert "agentbranch.decision.take_at" not in decision.attributes  # nothing earned yet


def test_an_audit_teacher_call_is_a_span_of_its_own(exporter):
    audit = Audit(rate=1.0, seed=0)
    r = resolver(Policy(take_at=0.5, fallbacks=[Generate(Oracle())], audit=audit))
    r.resolve(state(6, "yes", 0.99, "no"))
    assert audit.flush(30)
    spans = exporter.get_finished_spans()
    (decision,) = [s for s in spans if s.name == "decide urgent"]
    assert decision.attributes["agentbranch.decision.band"] == "take"
    (teacher,) = [s for s in spans if s.name == "chat Oracle"]
    assert teacher.attributes["agentbranch.teacher.role"] == "audit"
    assert teacher.parent is None  # it runs after the decision, on the audit worker


def test_several_states_at_once_get_one_span_each(exporter):
    import asyncio

    from agentbranch.policy.resolving import resolve_many, run_async

    steps = resolve_many(
        engine(),
        {"urgent": URGENT},
        Policy(take_at=0.5, fallbacks=[Generate(Oracle())]),
        [state(i, "yes", 0.99, "yes") for i in range(3)],
        review=lambda out: None,
    )
    out = asyncio.run(run_async(steps))
    assert len(out) == 3
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["decide urgent"] * 3
    assert len({s.context.span_id for s in spans}) == 3


def test_without_the_api_installed_decisions_run_and_nothing_is_traced():
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["opentelemetry"] = None  # as if not installed: every import fails
        sys.path.insert(0, {str(SRC)!r})
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from agentbranch.core import _telemetry
        from agentbranch.policy import Generate, Policy
        from agentbranch.policy.resolving import Resolver
        from _earned_fixtures import URGENT, Oracle, engine, state
        r = Resolver(engine(), {{"urgent": URGENT}}, Policy(take_at=0.9, fallbacks=[Generate(Oracle())]))
        print(r.resolve(state(1, "yes", 0.55, "no"))["urgent"]["decided_by"], _telemetry.active_tracer())
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fallback None"


def test_without_a_provider_nothing_is_made():
    # A fresh process: the API imported, no provider set; the tracer is never built.
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(SRC)!r})
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import opentelemetry.trace
        from agentbranch.core import _telemetry
        from agentbranch.policy import Generate, Policy
        from agentbranch.policy.resolving import Resolver
        from _earned_fixtures import URGENT, Oracle, engine, state
        r = Resolver(engine(), {{"urgent": URGENT}}, Policy(take_at=0.9, fallbacks=[Generate(Oracle())]))
        r.resolve(state(1, "yes", 0.55, "no"))
        assert _telemetry.active_tracer() is None and _telemetry.active_tracer.built is None
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_in_a_graph_under_the_apps_span_and_a_review_interrupt_is_no_error(exporter):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    policy = Policy(take_at=0.9, review_below=0.9)  # every unsure answer asks a human
    app = urgent_graph(policy, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    tracer = ab.core._telemetry.active_tracer()  # the app's own tracer, on the same provider
    with tracer.start_as_current_span("handle ticket") as request:
        out = app.invoke({"text": state(7, "yes", 0.55, "no")}, cfg)
        assert "__interrupt__" in out
        assert app.invoke(Command(resume="no"), cfg)["out"] == "queue"
    decisions = [s for s in exporter.get_finished_spans() if s.name == "decide urgent"]
    assert len(decisions) == 2  # the interrupted run, and the resumed node deciding again
    first, second = decisions
    assert first.attributes["agentbranch.decision.interrupted"] is True
    assert first.status.status_code == StatusCode.UNSET and "error.type" not in first.attributes
    assert second.attributes["agentbranch.decision.band"] == "review"
    assert second.attributes["agentbranch.decision.decided_by"] == "human"
    for span in decisions:
        assert span.context.trace_id == request.get_span_context().trace_id
