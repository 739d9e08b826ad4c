"""The bench plot: the concurrency sweep and the ratios, as a PNG.

The ratios go on two panels by direction, "higher is better" (× faster, × throughput)
and "lower is better" (× time), so no axis mixes them; each bar is labelled with its
value, and its target is drawn on it. Long names wrap, and the figure is saved with
room for every label.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from agentbranch_bench.results import _TARGET, BenchResult, Report, better, target_met

__all__ = ["plot"]

#: Width, in characters, a bar's name wraps at.
LABEL_WIDTH = 34


def _bars(ax, results: list[BenchResult], title: str) -> None:
    names = ["\n".join(textwrap.wrap(r.name, LABEL_WIDTH)) for r in results]
    colors = [
        "tab:green" if met else "tab:red" if met is False else "tab:blue"
        for met in (target_met(r) for r in results)
    ]
    ys = range(len(results))
    ax.barh(list(ys), [r.value for r in results], color=colors)
    ax.set_yticks(list(ys), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("ratio (1 = no difference; green: target met, red: missed)", fontsize=8)
    for y, r in zip(ys, results):
        ax.annotate(f" {r.value:.2f}", (r.value, y), va="center", fontsize=7, annotation_clip=False)
        match = _TARGET.fullmatch(r.target or "")
        if match is not None:
            bound = float(match.group(2))
            ax.plot([bound, bound], [y - 0.4, y + 0.4], color="black", linewidth=1.2)
    low = min([r.value for r in results] + [1.0])
    high = max([r.value for r in results] + [1.0])
    ax.set_xlim(low / 1.5, high * 2.5)  # room for the value labels right of the bars


def plot(report: Report, path: Path) -> Path:
    """The concurrency sweep (decisions/s by callers) and the ratios, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratios = [r for r in report.results if r.unit != "decisions/s"]
    higher = [r for r in ratios if better(r) == "higher"]
    lower = [r for r in ratios if better(r) == "lower"]
    panels = [(rs, t) for rs, t in ((higher, "higher is better"), (lower, "lower is better")) if rs]
    rows = [max(len(rs), 1) for rs, _ in panels] or [1]
    fig = plt.figure(figsize=(14, max(5.0, 0.45 * sum(rows) + 1.5)), layout="constrained")
    grid = fig.add_gridspec(len(rows), 2, height_ratios=rows, width_ratios=[1, 1.3])
    left = fig.add_subplot(grid[:, 0])
    for name, points in report.sweep.items():
        xs = sorted(points)
        left.plot(xs, [points[x] for x in xs], marker="o", label=name)
    left.set_xscale("log", base=2)
    left.set_xlabel("concurrent callers")
    left.set_ylabel("decisions / s (higher is better)")
    left.set_title("throughput by concurrency", fontsize=10)
    if report.sweep:
        left.legend(fontsize=8)
    for i, (results, title) in enumerate(panels):
        _bars(fig.add_subplot(grid[i, 1]), results, title)
    if not report.trustworthy:
        fig.suptitle(report.load_text(), fontsize=8, color="tab:red", wrap=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
