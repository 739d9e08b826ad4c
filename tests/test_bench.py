"""``agentbranch bench``: the command's plumbing (a full run takes minutes; see
docs/benchmarks.md for one)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import agentbranch_bench as bench
from agentbranch.cli import app
from agentbranch_bench import run as bench_run
from agentbranch_bench.joint import joint_vs_singles
from agentbranch_bench.timing import paired


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
    result = CliRunner().invoke(
        app, ["bench", "--json", "--quick", "--no-vllm", "--plot", str(png)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert (
        data["results"][0]["value"] == 1.5 and data["sweep"]["transformers, threads"]["4"] == 20.0
    )
    assert seen["quick"] is True and seen["vllm"] is False and seen["cpu"] is True
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_table(monkeypatch):
    monkeypatch.setattr(bench_run, "run_bench", lambda **kw: fake_report())
    result = CliRunner().invoke(app, ["bench"])
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
