"""`benchmarks/bench.py`: the command's plumbing (a full run takes minutes; see
docs/benchmarks.md for one)."""

from __future__ import annotations

import json

import agentbranch_bench as bench
import pytest
from _cli_checks import assert_clear_error
from agentbranch_bench import run as bench_run
from agentbranch_bench.joint import joint_vs_singles
from agentbranch_bench.timing import paired
from bench import app
from typer.testing import CliRunner


def fake_report() -> bench.Report:
    report = bench.Report(seconds=1.0)
    report.results.append(bench.BenchResult("a vs b", 1.5, "× faster", "≥ 1", {"a_s": 0.1}))
    report.sweep["transformers, threads"] = {1: 10.0, 4: 20.0}
    report.notes.append("vLLM part skipped: vllm is not installed")
    return report


def test_bench_json_and_plot(monkeypatch, tmp_path):
    seen = {}

    def run(**kwargs):
        seen.update(kwargs)
        kwargs["tick"]("working")
        return fake_report()

    monkeypatch.setattr(bench_run, "run_bench", run)
    png = tmp_path / "bench.png"
    result = CliRunner().invoke(app, ["--json", "--quick", "--no-vllm", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert (
        data["results"][0]["value"] == 1.5 and data["sweep"]["transformers, threads"]["4"] == 20.0
    )
    assert seen["quick"] is True and seen["vllm"] is False and seen["cpu"] is True
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_table(monkeypatch):
    monkeypatch.setattr(bench_run, "run_bench", lambda **kw: fake_report())
    result = CliRunner().invoke(app, [])
    assert result.exit_code == 0
    assert "a vs b" in result.stdout and "1.50 × faster" in result.stdout


def test_paired_alternates_and_takes_medians():
    calls = []
    a, b = paired(lambda: calls.append("a"), lambda: calls.append("b"), 3)
    assert calls == ["a", "b"] * 4 and a >= 0 and b >= 0


def test_joint_vs_singles_reads_both_ways_and_reports_the_tokens(tiny_model_dir):
    import agentbranch as ab

    tiny_reader = ab.TransformersReader.from_pretrained(tiny_model_dir)
    report = bench.Report()
    joint_vs_singles(report, lambda _: None, tiny_reader, "tiny", 1)
    (result,) = report.results
    assert result.name == "one joint 3-question read vs 3 single reads (tiny DiffusionGemma)"
    assert result.value > 0 and result.detail["pairs"] == 1
    # The joint prompt carries the state once, the singles three times.
    assert 0 < result.detail["joint_prompt_tokens"] < result.detail["single_prompt_tokens"]


# -- bad input and the table -----------------------------------------------------------------


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def test_bench_refuses_a_plot_it_cannot_write_before_measuring(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_run, "run_bench", lambda **kw: pytest.fail("measured anyway"))
    result = run("--plot", str(tmp_path / "missing" / "b.png"))
    assert_clear_error(result, "error: --plot", "does not exist")


def test_bench_table_marks_each_target_met_or_missed(monkeypatch):
    report = bench.Report(seconds=1.0)
    report.results += [
        bench.BenchResult("fast path vs slow path", 1.5, "× faster", "≥ 1"),
        bench.BenchResult("router vs direct", 1.2, "× (time)", "≤ 1.05"),
        bench.BenchResult("engine, 8 callers (threads)", 1.2, "×", "≥ 3 at 32"),
        bench.BenchResult("engine, 32 callers (threads)", 3.2, "×", "≥ 3 at 32"),
        bench.BenchResult("cache hit vs miss", 9.0, "× faster", None),
    ]
    monkeypatch.setattr(bench_run, "run_bench", lambda **kw: report)
    result = CliRunner().invoke(app, [])
    assert result.exit_code == 0
    lines = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│" in line}
    assert "≥ 1 ✓ met" in lines["fast path vs slow path"]
    assert "≤ 1.05 ✗ missed" in lines["router vs direct"]
    assert "≥ 3 at 32 ✓ met" in lines["engine, 32 callers (threads)"]
    assert "met" not in lines["engine, 8 callers (threads)"]  # the target is for 32
    data = json.loads(CliRunner().invoke(app, ["--json"]).stdout)
    assert [r["met"] for r in data["results"]] == [True, False, None, True, None]


def test_bench_refuses_a_vllm_model_that_is_not_a_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(bench_run, "run_bench", lambda **kw: pytest.fail("measured anyway"))
    result = run("--vllm-model", str(tmp_path / "nope"))
    assert_clear_error(result, "error: --vllm-model", "is not a folder")
