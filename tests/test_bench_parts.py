"""``benchmarks/bench.py``'s calling-patterns and cold-start parts, in a tiny configuration:
the table and JSON shapes and the answers check (no time is asserted)."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from agentbranch_bench import cold_start
from agentbranch_bench import run as bench_run
from agentbranch_bench.pattern_part import reader_patterns
from agentbranch_bench.results import Report
from bench import app
from typer.testing import CliRunner

import agentbranch as ab

PATTERNS = [
    "1 caller",
    "threads (32)",
    "asyncio (32)",
    "graph.batch (32)",
    "graph.batch (default)",
    "graph.abatch",
    "tool (32 agent steps)",
]


def hashed(state: str, q: Any) -> dict[str, float]:
    """A distribution that depends on the state and the question."""
    weights = [
        1 + int(hashlib.sha256(f"{state}|{q.id}|{o}".encode()).hexdigest()[:6], 16) % 97
        for o in q.options
    ]
    return {o: w / sum(weights) for o, w in zip(q.options, weights)}


def main_thread_only(state: str, q: Any) -> dict[str, float]:
    """Answers one way in the caller's thread (``decide_many`` without the coalescer)
    and another in the coalescer's workers: every pattern must be caught."""
    first = 0.9 if threading.current_thread() is threading.main_thread() else 0.1
    rest = (1 - first) / (len(q.options) - 1)
    return {o: first if i == 0 else rest for i, o in enumerate(q.options)}


def _invoke_with(monkeypatch: Any, report: Report, *args: str) -> Any:
    seen: dict[str, Any] = {}

    def run(**kwargs: Any) -> Report:
        seen.update(kwargs)
        return report

    monkeypatch.setattr(bench_run, "run_bench", run)
    result = CliRunner().invoke(app, [*args])
    assert result.exit_code == 0, result.output
    return result, seen


def test_patterns_part_table_json_and_answers_check(monkeypatch):
    report = Report(seconds=1.0)
    ticks: list[str] = []
    reader = ab.ScriptedReader(default=hashed, delay_s=0.001)
    reader_patterns(report, ticks.append, reader, "scripted", quick=True)
    assert [r.detail["pattern"] for r in report.patterns] == PATTERNS
    assert all(r.detail["labels_equal_decide_many"] for r in report.patterns)
    assert all(r.value > 0 and r.detail["bound_s"] > 0 for r in report.patterns)
    targets = {r.detail["pattern"]: r.target for r in report.patterns}
    assert targets["1 caller"] == "≥ 0.90" and targets["graph.batch (default)"] is None
    assert {targets[p] for p in PATTERNS[1:] if p != "graph.batch (default)"} == {"≥ 0.95"}
    assert any("repetition 2/2" in t for t in ticks)
    # The all-in bound: every caller in flight at once, where a pattern can have that.
    all_in = {r.detail["pattern"]: r.detail["fraction_all_in"] for r in report.patterns}
    assert all_in["1 caller"] is None and all_in["graph.batch (default)"] is None
    assert all(all_in[p] > 0 for p in PATTERNS if p not in ("1 caller", "graph.batch (default)"))
    waits = {r.detail["pattern"]: r.detail["no_engine_all_in_s"] for r in report.patterns}
    assert all(waits[p] is not None for p in all_in if all_in[p] is not None)
    # how many reader calls a run took, on average (one per decision for one caller)
    reads = {r.detail["pattern"]: r.detail["reads_per_run"] for r in report.patterns}
    assert all(reads[p] >= 1 for p in PATTERNS)
    assert reads["1 caller"] == len(report.patterns[0].detail["reader_calls"][0][0].split(" + "))

    result, seen = _invoke_with(monkeypatch, report, "--quick", "--no-cold-start")
    assert seen["patterns"] is True and seen["cold_start"] is False
    out = result.stdout
    assert "calling patterns" in out and "graph.batch (default)" in out
    assert "= decide_many" in out and "differ" not in out
    assert "met" in out or "missed" in out
    assert "all in" in out and "reads" in out

    result, _ = _invoke_with(monkeypatch, report, "--json")
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert [p["detail"]["pattern"] for p in data["patterns"]] == PATTERNS
    by_name = {p["detail"]["pattern"]: p for p in data["patterns"]}
    assert by_name["graph.batch (default)"]["met"] is None
    assert isinstance(by_name["threads (32)"]["met"], bool)
    assert by_name["threads (32)"]["met"] == (by_name["threads (32)"]["value"] >= 0.95)


def test_patterns_part_reports_answers_unlike_decide_many(monkeypatch):
    report = Report()
    reader = ab.ScriptedReader(default=main_thread_only, delay_s=0.001)
    reader_patterns(report, lambda _: None, reader, "two-faced", quick=True)
    assert not any(r.detail["labels_equal_decide_many"] for r in report.patterns)
    result, _ = _invoke_with(monkeypatch, report, "--no-cold-start")
    assert result.stdout.count("✗ differ") == len(PATTERNS)


def test_cold_start_part_by_phase_table_and_json(monkeypatch):
    kind = "embedded, by phase"
    result = cold_start.measure(
        {"now": cold_start.default_tree()}, reps=1, kinds=(kind,), warmup=False
    )
    phases = result["now"][kind]["phases"]
    assert list(phases) == [
        "import",
        "build",
        *cold_start.FIRST_PHASES,
        "first",
        "second",
        "to first decision",
    ]
    assert sum(phases[p] for p in cold_start.FIRST_PHASES) <= phases["first"]
    assert "torch" not in result["now"][kind]["heavy"]  # import agentbranch stays light

    report = Report(cold_start={"reps": 1, "kinds": result["now"]})
    out, _ = _invoke_with(monkeypatch, report, "--no-patterns")
    for phase in ("import agentbranch", "import torch", "load weights", "to first decision"):
        assert phase in out.stdout
    out, _ = _invoke_with(monkeypatch, report, "--json")
    data = json.loads(out.stdout[out.stdout.index("{") :])
    assert data["cold_start"]["kinds"][kind]["phases"]["first read"] >= 0


def test_the_all_in_gate_holds_every_caller_until_the_last_is_in():
    import pytest
    from agentbranch_bench.patterns import Gate

    n = 5
    gate = Gate(n)
    passed: list[int] = []
    threads = [
        threading.Thread(target=lambda i=i: (gate.wait(20), passed.append(i))) for i in range(n - 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(0.2)
    assert passed == [] and all(t.is_alive() for t in threads)  # four in: nobody passes
    gate.wait(20)  # the fifth answers everyone, itself included
    for t in threads:
        t.join(20)
    assert sorted(passed) == list(range(n - 1))
    with pytest.raises(TimeoutError):  # a caller left alone gives up instead of hanging
        Gate(2).wait(0.01)


def test_every_coalescer_variant_sets_levers_the_coalescer_has():
    """A variant names ``LeverReader`` switches (the benchmark's coalescer, all on as the
    library is); a misspelt one would silently time the library as it is under another
    name."""
    from agentbranch_bench.levers import LeverReader
    from agentbranch_bench.patterns import VARIANTS, engine_for

    reader = ab.ScriptedReader()
    default = LeverReader(reader)
    for name, levers in VARIANTS.items():
        coalescer = engine_for(reader, levers).reads_via
        for lever, value in levers.items():
            assert hasattr(default, lever), (name, lever)
            assert getattr(coalescer, lever) == value != getattr(default, lever), (name, lever)
    straight = engine_for(reader, VARIANTS["straight"]).reads_via
    out = ab.DecisionEngine(straight).decide("x", {"q": ab.yes_no("Ready?")})
    assert out["q"].label in ("yes", "no")
    assert [why for _, why in straight.batch_closes] == ["alone"]  # nothing held
