"""The learning benchmarks run, in tiny configurations (no time or number is asserted):
``bench_learning_speed.py`` on the embedded reader, and ``learning.py``'s stream runner
on two short synthetic questions (the public sets are an optional install)."""

from __future__ import annotations

import sys

import _learn_streams as ls
import numpy as np
import pytest
from _bench_scripts import run_benchmark

from agentbranch.policy.earned import Earned
from agentbranch.policy.earned.learn import ladder as ld


def test_the_speed_benchmark_runs_every_label_count() -> None:
    args = ("--rounds", "1", "--batch", "2", "--labels", "0", "100")
    done = run_benchmark("bench_learning_speed.py", *args)
    assert done.returncode == 0, done.stderr
    assert "100 labels:" in done.stdout and "decisions/s" in done.stdout


def test_the_ladder_runner_learns_only_from_labels_before_each_fit() -> None:
    rng = np.random.default_rng(0)
    n = 300
    conf = rng.random(n)
    base = ls.Read(conf, rng.random(n) < conf, conf)
    seen: list[np.ndarray] = []

    def fit(j: int, train: np.ndarray) -> ls.Read:
        seen.append(train)
        return ls.Read(np.ones(n), np.ones(n, bool), np.ones(n))  # a perfect version

    run = ls.run_ladder(Earned(precision=0.9, level=0.95), base, rng.random(n), 0.2, fit)
    assert [len(t) for t in seen][:2] == [ld.refit_at(1), ld.refit_at(2)]  # at the refit points
    assert all(t.max() < n for t in seen)
    took = np.flatnonzero(run.taken & (run.version > 0))
    assert len(took) and run.labels_before[took[0]] > 32 + 10  # tested after its fit
    assert run.taken[-1] and run.version[-1] > 0  # the perfect version takes once in force


def test_the_canvas_lines_benchmark_reads_what_the_learner_would_show() -> None:
    """``canvas_lines.py`` (its reads need vLLM and a real model: not run here) builds
    the three variants it compares: the written question, the most recent labelled
    states as lines, and each state's nearest labelled states."""
    from types import SimpleNamespace

    import canvas_lines as cl
    from _learn_fixtures import COOKING, QUESTION, SPORT

    texts = [t for pair in zip(SPORT, COOKING) for t in pair]  # labelled alternately
    labels = ["yes", "no"] * len(SPORT)
    task = SimpleNamespace(id="sport", question=QUESTION)
    test = ["The goalkeeper saved a penalty", "Simmer the onions in butter"]
    got = cl.variants(task, texts, labels, test)
    assert got["written"] == [QUESTION, QUESTION]
    recent = got["recent"][0].examples
    assert recent["yes"] == SPORT[-4:] and recent["no"] == COOKING[-4:]  # the latest four
    first, second = (q.examples for q in got["nearest"])
    assert first["yes"][0] == "Their goalkeeper saved a penalty in the cup semi-final"
    assert second["no"][0] == "Simmer the onions in butter until soft, then add the rice"
    assert first != second  # chosen per state


def test_the_path_benchmark_refuses_bad_study_options_before_reading_anything(
    monkeypatch, capsys
) -> None:
    """The script in its own process once; the other refusals through its ``main`` here
    (the same parser and checks, without a fresh interpreter importing torch each)."""
    import learning_path as lp

    done = run_benchmark("learning_path.py", "--audit-rate", "0", timeout=300)
    assert done.returncode == 2, done.stderr
    assert "--audit-rate must be in (0, 1]" in done.stderr and "Traceback" not in done.stderr
    for flags, said in (
        (["--audit-rate", "1.5"], "--audit-rate must be in (0, 1]"),
        (["--versions-scale", "-1"], "--versions-scale must be above 0"),
        (["--no-correction", "--versions-apart"], "one at a time"),
        (["--versions-apart", "--versions-scale", "3"], "one at a time"),
    ):
        monkeypatch.setattr(sys, "argv", ["learning_path.py", *flags])
        with pytest.raises(SystemExit) as refused:
            lp.main()
        assert refused.value.code == 2, flags
        assert said in capsys.readouterr().err, flags


def test_the_type_one_benchmark_runs_each_variant_and_restores_the_split(tmp_path) -> None:
    out = tmp_path / "type1.txt"
    done = run_benchmark("learning_type1.py", "--seeds", "3", "--streams", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = out.read_text().splitlines()[2:]
    assert [r.split()[0] for r in rows] == ["shipped", "apart", "none"]
    for r in rows:
        share = float(r.split()[2])
        assert 0.0 <= share <= 1.0
    refused = run_benchmark("learning_type1.py", "--streams", "0", timeout=300)
    assert refused.returncode == 2 and "--streams must be at least 1" in refused.stderr


def test_the_type_one_benchmark_leaves_the_library_split_as_it_found_it() -> None:
    import learning_type1 as t1

    shipped, streams = ld.version_share, t1.sim.STREAMS
    t1.wrong_share("none", seed=5, streams=1)
    assert ld.version_share is shipped
    assert t1.sim.STREAMS == streams


def test_the_templated_streams_are_distinct_messages_and_say_which_read_cannot_open() -> None:
    """``learning_path.templated``: every message distinct (a repeated one would be a
    repeat of a labelled decision, no new label), every answer drawn, the same streams
    on every run; the bare questions are the ones whose written read cannot open."""
    import learning_path as lp

    streams = lp.templated()
    assert [items for _, items in streams] == [items for _, items in lp.templated()]
    bare = set()
    for task, items in streams:
        texts = [t for t, _ in items]
        assert len(set(texts)) == len(texts) == 300, task.id
        assert {y for _, y in items} == set(lp.TEMPLATED[task.id][1]), task.id
        if ld.base_share("embedded", task.id, task.question) == ld.BARE_BASE:
            bare.add(task.id)
    assert bare == {"tmpl.refund", "tmpl.cancel", "tmpl.urgency"}
