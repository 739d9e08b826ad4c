"""The bench plot: the concurrency sweep and the ratios, as a PNG."""

from __future__ import annotations

from pathlib import Path

from agentbranch_bench.results import Report


def plot(report: Report, path: Path) -> Path:
    """The concurrency sweep (decisions/s by callers) and the ratios, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for name, points in report.sweep.items():
        xs = sorted(points)
        left.plot(xs, [points[x] for x in xs], marker="o", label=name)
    left.set_xscale("log", base=2)
    left.set_xlabel("concurrent callers")
    left.set_ylabel("decisions / s")
    left.set_title("throughput by concurrency")
    left.legend(fontsize=8)
    ratios = [r for r in report.results if r.unit != "decisions/s"]
    right.barh([r.name for r in ratios], [r.value for r in ratios], color="tab:blue")
    right.axvline(1.0, color="grey", linewidth=0.8)
    right.set_xscale("log")
    right.set_xlabel("ratio (see docs/benchmarks.md for each direction)")
    right.tick_params(axis="y", labelsize=7)
    right.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
