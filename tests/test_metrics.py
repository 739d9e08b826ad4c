"""Metrics through OpenTelemetry's API (agentbranch.core._telemetry, docs/metrics.md): a
LangGraph graph with an Earned policy, a teacher and audits, run under the SDK, exports
figures equal to what ``agentbranch audit report`` computes from its store; without an
SDK nothing beyond the API is imported and nothing is recorded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _earned_fixtures import URGENT, Oracle, engine, state, urgent_graph
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402

import agentbranch as ab  # noqa: E402
from agentbranch.core import _telemetry  # noqa: E402
from agentbranch.policy import Audit, Earned, Generate, Policy  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def reader():
    """An SDK provider with an in-memory reader, given to agentbranch explicitly (the
    global provider stays unset)."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    ab.use_meter_provider(provider)
    try:
        yield reader
    finally:
        ab.use_meter_provider(None)
        provider.shutdown()


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Every data point of every metric, by metric name."""
    out: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            assert sm.scope.name == "agentbranch"
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(m.data.data_points)
    return out


def total(pts: dict[str, list[Any]], name: str, **attrs: str) -> float:
    """The sum of a counter's points whose attributes include ``attrs``."""
    want = {
        k if k.startswith(("agentbranch.", "error.")) else f"agentbranch.{k}": v
        for k, v in attrs.items()
    }
    return sum(
        p.value for p in pts.get(name, []) if all(p.attributes.get(k) == v for k, v in want.items())
    )


def test_a_graph_under_the_sdk_exports_what_the_report_computes(reader, tmp_path):
    from typer.testing import CliRunner

    from agentbranch.cli import app as cli

    store, audits = tmp_path / "evidence.jsonl", tmp_path / "audits.jsonl"
    earned = Earned(precision=0.8, min_evidence=20, store=str(store), refresh_s=0)
    audit = Audit(rate=1.0, sink=str(audits), seed=0)  # every take audited: takes = audits
    graph = urgent_graph(Policy(take_at=earned, fallbacks=[Generate(Oracle())], audit=audit))
    by = Counter()
    for i in range(45):
        out = graph.invoke({"text": state(i, "yes", 0.99, "no" if i in (33, 41) else "yes")})
        rec = out["decisions"]["urgent"]
        by[(rec["band"], rec["decided_by"])] += 1
    assert audit.flush(60)
    assert by[("take", "engine")] > 0 and by[("fallback", "fallback")] > 0  # both paths ran

    pts = points(reader)
    result = CliRunner().invoke(cli, ["audit", "report", "--json", str(store)])
    assert result.exit_code == 0, result.output
    (q,) = json.loads(result.output)["questions"].values()

    # decisions, by band and by who decided
    assert total(pts, "agentbranch.decisions") == 45
    for (band, decided_by), n in by.items():
        assert (
            total(
                pts,
                "agentbranch.decisions",
                **{"decision.band": band, "decision.decided_by": decided_by},
            )
            == n
        )
    # every label the report counts was stored, and counted, once
    stored = len(store.read_text().splitlines())
    assert total(pts, "agentbranch.labels.stored") == q["labels"] == stored
    assert total(pts, "agentbranch.labels.lost") == 0
    # fallback labels are the teacher's fallback answers; audited takes are the takes
    fallback = total(pts, "agentbranch.teacher.calls", **{"teacher.role": "fallback"})
    assert fallback == q["by_source"]["fallback"] == by[("fallback", "fallback")]
    assert total(pts, "agentbranch.audits.done") == q["by_source"]["audit"]
    assert total(pts, "agentbranch.takes") == total(pts, "agentbranch.audits.due")
    assert total(pts, "agentbranch.takes") == q["by_source"]["audit"] == by[("take", "engine")]
    assert total(pts, "agentbranch.teacher.calls_saved") == by[("take", "engine")]
    assert total(pts, "agentbranch.audits.missing") == 0
    assert total(pts, "agentbranch.teacher.failures") == 0
    # the teacher's latency: one histogram point per role, its count the calls
    durations = {
        p.attributes["agentbranch.teacher.role"]: p for p in pts["agentbranch.teacher.duration"]
    }
    assert durations["fallback"].count == fallback
    assert durations["audit"].count == q["by_source"]["audit"]
    assert all(p.sum >= 0 for p in durations.values())
    # what is in force: the report's threshold and trust
    (threshold,) = pts["agentbranch.threshold"]
    assert threshold.value == pytest.approx(q["take_at"])
    trusts = {p.attributes["agentbranch.trust.state"]: p.value for p in pts["agentbranch.trust"]}
    assert trusts == {t: int(t == q["trust"]) for t in ("learning", "earned", "withdrawn", "fixed")}
    # low cardinality: question ids and small enumerations, never a state's text
    for name, series in pts.items():
        for p in series:
            for key, value in p.attributes.items():
                assert "item" not in str(value), (name, key, value)


def test_a_failing_teacher_and_lost_labels_are_counted(reader, tmp_path):
    import errno
    import os

    from agentbranch.policy import Resolver
    from agentbranch.policy.earned import JsonlEvidenceStore

    class Full(JsonlEvidenceStore):
        def append(self, records):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    bad = Oracle(answer="maybe")  # names no option: a failed fallback
    earned = Earned(precision=0.8, store=Full(tmp_path / "e.jsonl"))
    policy = Policy(
        take_at=earned, fallbacks=[Generate(bad), Generate(Oracle())], audit=Audit(rate=0)
    )
    r = Resolver(engine(), {"urgent": URGENT}, policy)
    for i in range(3):
        assert r.resolve(state(i, "yes", 0.6, "yes"))["urgent"]["decided_by"] == "fallback"
    pts = points(reader)
    assert total(pts, "agentbranch.teacher.calls") == 6
    assert total(pts, "agentbranch.teacher.failures", **{"error.type": "invalid_reply"}) == 3
    assert total(pts, "agentbranch.labels.lost") == 3
    assert total(pts, "agentbranch.labels.stored") == 0


def _run(*parts: str) -> str:
    """Run the code ``parts`` (each dedented) in a fresh interpreter; its stdout."""
    code = "\n".join(textwrap.dedent(p) for p in parts)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": f"{SRC}:{Path(__file__).parent}", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


_DECIDE = """
    from _earned_fixtures import URGENT, Oracle, engine, state
    from agentbranch.policy import Earned, Generate, Policy, Resolver
    r = Resolver(engine(), {"urgent": URGENT},
                 Policy(take_at=Earned(precision=0.8), fallbacks=[Generate(Oracle())]))
    for i in range(5):
        r.resolve(state(i, "yes", 0.6, "yes"))
"""


def test_without_an_sdk_nothing_beyond_the_api_is_imported():
    # (langsmith, under langchain-core, imports the SDK's tracing when it is installed:
    # not agentbranch's doing, so the check is on the metrics SDK and on our own imports)
    out = _run(
        """
        import sys
        import opentelemetry.metrics  # the API, as an application that uses it imports it
        """,
        _DECIDE,
        """
        from agentbranch.core import _telemetry
        assert _telemetry._instruments() is None
        print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
        """,
    )
    loaded = json.loads(out.replace("'", '"'))
    assert "opentelemetry.metrics" in loaded
    assert not [m for m in loaded if m.startswith("opentelemetry.sdk.metrics")], loaded


def test_agentbranch_imports_only_the_metrics_api():
    import ast

    found = set()
    for path in (SRC / "agentbranch").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("opentelemetry"):
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("opentelemetry"))
    # The metrics API, and the tracing API for spans (agentbranch.core._telemetry): never the SDK.
    api = {"opentelemetry.metrics", "opentelemetry.metrics._internal", "opentelemetry.trace"}
    assert found and found <= api, found


def test_without_the_api_installed_decisions_run_and_nothing_records():
    out = _run(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if not installed: every import fails
        """,
        _DECIDE,
        """
        from agentbranch.core import _telemetry
        import agentbranch as ab
        ab.use_meter_provider(None)
        print(_telemetry._instruments() is not None, [m for m in sys.modules if m.startswith("opentelemetry.")])
        """,
    )
    assert out.strip() == "False []"


def test_the_global_provider_the_application_sets_is_used():
    # The one test that sets OpenTelemetry's global provider: in its own process.
    out = _run(
        """
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        """,
        _DECIDE,
        """
        data = reader.get_metrics_data()
        names = {m.name: sum(getattr(p, "value", 0) for p in m.data.data_points)
                 for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        print(names["agentbranch.teacher.calls"], names["agentbranch.labels.stored"])
        """,
    )
    assert out.split() == ["5", "5"]


def test_hooks_do_nothing_until_a_provider_is_given():
    ab.use_meter_provider(None)
    assert _telemetry._instruments() is None or _telemetry._instruments() is not None
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    ab.use_meter_provider(provider)
    try:
        assert _telemetry._instruments() is not None
        _telemetry.label_stored("q")
        assert total(points(reader), "agentbranch.labels.stored", **{"question.id": "q"}) == 1
    finally:
        ab.use_meter_provider(None)
        provider.shutdown()


def test_the_gauges_say_what_the_latest_decision_had_in_force(reader):
    rec = {
        "question_id": "sport",
        "band": "take",
        "decided_by": "engine",
        "trust": "earned",
        "take_at": 0.8,
        "reader_version": 2,
    }
    _telemetry.decisions([rec, {**rec, "take_at": 0.75, "reader_version": 3}])
    pts = points(reader)

    def now(name):
        return [p.value for p in pts[name] if p.attributes["agentbranch.question.id"] == "sport"]

    assert now("agentbranch.learn.version") == [3]
    assert now("agentbranch.threshold") == [0.75]
    assert total(pts, "agentbranch.teacher.calls_saved", **{"question.id": "sport"}) == 2


class _Broken(Oracle):
    """A teacher whose every call raises."""

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        raise RuntimeError("the teacher's server is down")


class _Slow(Oracle):
    """A teacher that answers after ``delay`` seconds."""

    delay: float = 5.0

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        import time

        time.sleep(self.delay)
        return super()._generate(messages, stop, run_manager, **kw)


def test_audits_that_never_come_and_fallbacks_that_time_out_are_counted(reader):
    from agentbranch.policy import GotoNode, Resolver

    earned = Earned(precision=0.8, start_at=0.5)  # taken from the start: audits are due
    audit = Audit(model=_Broken(), rate=1.0)
    slow = Generate(_Slow(delay=2.0), timeout_s=0.05)
    policy = Policy(take_at=earned, fallbacks=[slow, GotoNode("human")], audit=audit)
    r = Resolver(engine(), {"urgent": URGENT}, policy)
    for i in range(4):
        r.resolve(state(i, "yes", 0.99, "yes"))  # taken, audited by the broken teacher
    assert r.resolve(state(9, "yes", 0.3, "yes"))["urgent"]["decided_by"] == "fallback_node"
    assert audit.flush(30)
    pts = points(reader)
    assert total(pts, "agentbranch.audits.due") == 4
    assert total(pts, "agentbranch.audits.missing", **{"error.type": "RuntimeError"}) == 4
    assert total(pts, "agentbranch.audits.done") == 0
    audit_failures = {"teacher.role": "audit", "error.type": "RuntimeError"}
    assert total(pts, "agentbranch.teacher.failures", **audit_failures) == 4
    timeouts = {"teacher.role": "fallback", "error.type": "timeout"}
    assert total(pts, "agentbranch.teacher.failures", **timeouts) == 1


class _Hangs(Oracle):
    """An audit teacher that hangs on every ``every``-th call (for ``hang`` seconds) and
    answers the truth otherwise; ``made`` counts the calls that reached it."""

    every: int = 3
    hang: float = 1.5
    made: int = 0

    def _generate(self, messages, stop=None, run_manager=None, **kw):
        import time

        with _hangs_lock:
            self.made += 1
            n = self.made
        if n % self.every == 0:
            time.sleep(self.hang)
        return super()._generate(messages, stop, run_manager, **kw)


_hangs_lock = __import__("threading").Lock()


def test_an_incident_reads_the_same_in_the_metrics_and_the_report(reader, tmp_path):
    """8 threads, an audit teacher that hangs, a fallback teacher that sometimes names no
    option: every counter with a report twin equals it, and calls refused behind a
    stuck teacher are refusals, not fast teacher calls."""
    from typer.testing import CliRunner

    from agentbranch.cli import app as cli

    class Flaky(Oracle):  # names no option on every 7th call: a failed fallback
        def _generate(self, messages, stop=None, run_manager=None, **kw):
            out = super()._generate(messages, stop, run_manager, **kw)
            if self.calls % 7 == 0:
                out.generations[0].message.content = '{"label": "maybe"}'
            return out

    store = tmp_path / "evidence.jsonl"
    auditor, fallback = _Hangs(), Flaky()
    earned = Earned(precision=0.8, min_evidence=20, store=str(store), start_at=0.5)
    audit = Audit(model=auditor, rate=1.0, timeout=0.2, seed=0)
    graph = urgent_graph(
        Policy(
            take_at=earned,
            fallbacks=[Generate(fallback), Generate(Oracle())],
            audit=audit,
        )
    )
    states = [
        {"text": state(i, "yes", 0.95 if i % 2 else 0.3, "yes" if i % 5 else "no")}
        for i in range(96)
    ]
    for i in range(0, len(states), 8):
        graph.batch(states[i : i + 8], config={"max_concurrency": 8})
    audit.flush(60)
    pts = points(reader)
    result = CliRunner().invoke(cli, ["audit", "report", "--json", str(store)])
    assert result.exit_code == 0, result.output
    (q,) = json.loads(result.output)["questions"].values()

    # a label, once: what the store holds and the report counts
    assert total(pts, "agentbranch.labels.stored") == q["labels"]
    assert q["labels"] == len(store.read_text().splitlines())
    # audits the teacher answered are the report's audit labels
    assert total(pts, "agentbranch.audits.done") == q["by_source"].get("audit", 0)
    due = total(pts, "agentbranch.audits.due")
    done, missing = total(pts, "agentbranch.audits.done"), total(pts, "agentbranch.audits.missing")
    assert due == done + missing and missing > 0
    # the fallback answers are the calls made, less those that named no option
    made = total(pts, "agentbranch.teacher.calls", **{"teacher.role": "fallback"})
    failed = total(pts, "agentbranch.teacher.failures", **{"teacher.role": "fallback"})
    assert failed > 0 and made - failed == q["by_source"]["fallback"]
    # the audit teacher: calls are the calls it received; the rest were refused
    calls = total(pts, "agentbranch.teacher.calls", **{"teacher.role": "audit"})
    assert calls == auditor.made
    refused = total(pts, "agentbranch.teacher.refused", **{"teacher.role": "audit"})
    probes = total(pts, "agentbranch.audits.probes")  # sent while the band is suspended
    assert refused > 0 and calls + refused == due + probes
    durations = {
        p.attributes["agentbranch.teacher.role"]: p for p in pts["agentbranch.teacher.duration"]
    }
    assert durations["audit"].count == calls  # no 0 s duration for a refused call
    assert durations["fallback"].count == made
