"""``benchmarks/bench_encoder_speed.py`` runs, in a tiny configuration (no time is
asserted): decide_many and sentence-transformers' encode on each text set."""

from __future__ import annotations

from _bench_scripts import run_benchmark


def test_the_encoder_benchmark_races_both_on_every_text_set() -> None:
    done = run_benchmark("bench_encoder_speed.py", "--texts", "3", "--reps", "1")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[2:]}
    assert set(rows) == {"short", "mixed", "long"}
    for row in rows.values():
        assert float(row[4]) > 0  # the ratio decide_many / encode


def test_the_text_sets_have_the_lengths_they_promise() -> None:
    from agentbranch_bench.encoder_speed import token_counts
    from agentbranch_bench.mixed_texts import long_texts, mixed_texts, short_texts

    mixed = token_counts(mixed_texts(300))
    assert 30 <= sorted(mixed)[150] <= 42 and 1 <= sum(n > 256 for n in mixed) <= 10
    assert len(set(mixed_texts(300))) == 300 and mixed_texts(50) == mixed_texts(50)
    assert max(token_counts(short_texts(20))) < 32
    assert sorted(token_counts(long_texts(20)))[10] > 200


def test_agentbranch_bench_reports_the_mixed_length_row() -> None:
    from agentbranch_bench.encoder_speed import encoder_speed_part
    from agentbranch_bench.results import Report

    report = Report()
    ticks: list[str] = []
    encoder_speed_part(report, ticks.append, quick=True, texts=4)
    (row,) = report.results
    assert "mixed-length" in row.name and row.target == "≤ 1.2" and row.value > 0
    assert row.detail["ratio"] == row.value and len(row.detail["ratios"]) == 2
    assert ticks and "mixed lengths" in ticks[0]
