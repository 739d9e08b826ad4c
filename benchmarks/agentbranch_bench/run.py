"""Running every comparison (``run_bench``) and the ``benchmarks/bench.py`` command's output:
progress on stderr, a table or JSON on stdout, the plot."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agentbranch_bench.cold_start import cold_start_part
from agentbranch_bench.cpu import cpu_part
from agentbranch_bench.encoder_speed import encoder_speed_part
from agentbranch_bench.pattern_part import embedded_patterns
from agentbranch_bench.plotting import plot
from agentbranch_bench.results import Report, machine_load, target_met, target_text
from agentbranch_bench.vllm_part import vllm_part

__all__ = ["cold_start_table", "command", "patterns_table", "run_bench"]


def run_bench(
    *,
    tick: Callable[[str], None] = lambda _: None,
    quick: bool = False,
    vllm: bool | None = None,
    vllm_model: Path | None = None,
    cpu: bool = True,
    patterns: bool = True,
    cold_start: bool = True,
) -> Report:
    """Run every comparison; ``vllm=None`` runs the vLLM part when ``vllm`` imports.
    ``patterns``: the calling patterns on each reader that runs (the embedded default
    with the CPU part; the vLLM part's reader); ``cold_start``: fresh interpreters to
    the first decision (first, while this process is still quiet)."""
    report = Report(load_start=machine_load())
    start = time.perf_counter()
    if cold_start:
        cold_start_part(report, tick, quick=quick)
    if cpu:
        cpu_part(report, tick, quick=quick)
        encoder_speed_part(report, tick, quick=quick)
        if patterns:
            embedded_patterns(report, tick, quick=quick)
    if vllm is None:
        vllm = importlib.util.find_spec("vllm") is not None
    if vllm:
        vllm_part(report, tick, model=vllm_model, quick=quick, patterns=patterns)
    else:
        report.notes.append("vLLM part skipped: vllm is not installed")
    report.seconds = time.perf_counter() - start
    report.load_end = machine_load()
    return report


@contextlib.contextmanager
def _stdout_to_stderr(on: bool) -> Iterator[None]:
    """Send file descriptor 1 to stderr meanwhile (vLLM and its engine processes log to
    stdout), so ``--json`` prints nothing but the JSON."""
    if not on:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def patterns_table(report: Report) -> Any:
    """Each reader's calling patterns: the fraction of the bound (median), the target,
    the fraction of the all-in bound (the no-engine pattern with every caller in flight
    at once, see ``agentbranch_bench.patterns``), the reader calls a run took on
    average, whether the pattern answered as ``decide_many``."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="calling patterns: fraction of the bound (median)")
    for col in ("reader", "pattern", "fraction", "target", "all in", "reads", "answers"):
        table.add_column(col, justify="right" if col in ("fraction", "all in", "reads") else "left")
    for r in report.patterns:
        met = target_met(r)
        style = "" if met is None else "green" if met else "red"
        same = r.detail["labels_equal_decide_many"]
        table.add_row(
            r.detail["reader"],
            r.detail["pattern"],
            f"{r.value:.2f}",
            Text(target_text(r) or "- (documented)", style=style),
            "-" if r.detail["fraction_all_in"] is None else f"{r.detail['fraction_all_in']:.2f}",
            "-" if r.detail.get("reads_per_run") is None else f"{r.detail['reads_per_run']:.1f}",
            Text("= decide_many" if same else "✗ differ", style="" if same else "red"),
        )
    return table


def cold_start_table(report: Report) -> Any:
    """Cold start: median seconds per phase, each kind of fresh process."""
    from rich.table import Table

    from agentbranch_bench.cold_start import rows

    reps = report.cold_start["reps"]
    table = Table(title=f"cold start: seconds, medians of {reps} fresh processes")
    for col in ("process", "phase", "seconds"):
        table.add_column(col, justify="right" if col == "seconds" else "left")
    for kind, phase, seconds in rows(report.cold_start["kinds"]):
        table.add_row(kind, phase, f"{seconds:.3f}")
    return table


def command(json_out: bool = False, plot_path: Path | None = None, **parts: Any) -> int:
    """The ``benchmarks/bench.py`` command: rich progress on stderr, a table (or JSON with
    ``json_out``) on stdout, the plot at ``plot_path``; ``parts`` are ``run_bench``'s
    (``quick``, ``vllm``, ``cpu`` ...)."""
    import json

    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Table
    from rich.text import Text

    from agentbranch.cli.common import print_table

    out, err = Console(), Console(stderr=True)
    with (
        _stdout_to_stderr(json_out),
        Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err
        ) as progress,
    ):
        task = progress.add_task("benchmarking", total=None)

        def tick(message: str) -> None:
            progress.update(task, description=message)
            progress.console.print(f"[dim]{message}[/dim]")

        report = run_bench(tick=tick, **parts)
    if plot_path is not None:
        plot(report, plot_path)
        err.print(f"plot: {plot_path}")
    # The machine's load, last (on stderr with --json): red when the timings cannot be
    # trusted, saying so beside the targets they missed.
    load_style = "" if report.trustworthy else "red"
    if json_out:
        err.print(report.load_text(), style=load_style, soft_wrap=True)
        out.print_json(json.dumps(report.as_json()))
        return 0
    table = Table(title=f"benchmarks/bench.py ({report.seconds:.0f}s)")
    for col in ("comparison", "measured", "target"):
        table.add_column(col)
    for r in report.results:
        met = target_met(r)
        style = "" if met is None else "green" if met else "red"
        table.add_row(r.name, f"{r.value:.2f} {r.unit}", Text(target_text(r), style=style))
    print_table(out, table)
    sweep = Table(title="decisions/s by concurrent callers")
    sweep.add_column("path")
    counts = sorted({n for pts in report.sweep.values() for n in pts})
    for n in counts:
        sweep.add_column(str(n), justify="right")
    for name, pts in report.sweep.items():
        sweep.add_row(name, *(f"{pts[n]:.1f}" if n in pts else "" for n in counts))
    print_table(out, sweep)
    if report.patterns:
        print_table(out, patterns_table(report))
    if report.cold_start:
        print_table(out, cold_start_table(report))
    for note in report.notes:
        out.print(f"[dim]{note}[/dim]")
    out.print(report.load_text(), style=load_style, soft_wrap=True)
    return 0
