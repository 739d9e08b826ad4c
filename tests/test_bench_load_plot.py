"""`benchmarks/bench.py`: the machine's load beside the results (a loaded machine's misses
say so), and a plot that never mixes higher-better and lower-better ratios on one axis."""

from __future__ import annotations

from pathlib import Path

from agentbranch_bench import plotting
from agentbranch_bench.results import BenchResult, Report, better, loaded


def _report(load1: float) -> Report:
    r = Report(load_start={"load1": load1, "cpus": 2.0}, load_end={"load1": load1, "cpus": 2.0})
    r.results = [
        BenchResult("graph.batch vs decide_many(32)", 0.62, "× (throughput)", "≥ 0.85"),
        BenchResult("router call vs direct decide", 1.02, "× (time)", "≤ 1.05"),
        BenchResult("answer-cache hit vs miss", 180.0, "× faster"),
        BenchResult("a time ratio without a target", 1.1, "× (time)"),
    ]
    r.sweep = {"decide_many": {1: 10.0, 32: 50.0}}
    return r


def test_each_ratio_knows_which_way_is_better():
    directions = [better(r) for r in _report(0.1).results]
    assert directions == ["higher", "lower", "higher", "lower"]


def test_a_loaded_machine_says_its_results_are_not_trustworthy():
    busy = _report(15.4)
    assert loaded(busy.load_start) and not busy.trustworthy
    text = busy.load_text()
    assert "load average 15.4 at start, 15.4 at end, on 2 CPUs" in text
    assert "not trustworthy" in text and "1 target(s) missed" in text
    assert busy.as_json()["trustworthy"] is False
    quiet = _report(0.3)
    assert quiet.trustworthy and quiet.load_text() == (
        "load average 0.3 at start, 0.3 at end, on 2 CPUs"
    )
    assert quiet.as_json()["load"]["start"] == {"load1": 0.3, "cpus": 2.0}


def test_the_plot_puts_each_direction_on_its_own_axis(tmp_path: Path, monkeypatch):
    panels = []
    real = plotting._bars

    def spy(ax, results, title):
        panels.append((title, [better(r) for r in results]))
        real(ax, results, title)

    monkeypatch.setattr(plotting, "_bars", spy)
    out = plotting.plot(_report(15.4), tmp_path / "bench.png")
    assert out.stat().st_size > 10_000
    assert panels == [
        ("higher is better", ["higher", "higher"]),
        ("lower is better", ["lower", "lower"]),
    ]
