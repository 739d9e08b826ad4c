"""The reliability diagram: accuracy against top probability per bin, as a PNG
(matplotlib is imported when a diagram is drawn)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentbranch.calibration.measures import binned, ece
from agentbranch.calibration.scored import Scored
from agentbranch.core.errors import ConfigurationError

__all__ = ["MAX_BINS", "check_bins", "reliability_diagram"]

#: The most confidence bins a report or a diagram draws.
MAX_BINS = 1000


def check_bins(bins: int) -> None:
    """``ConfigurationError`` unless ``bins`` is a whole number from 1 to ``MAX_BINS``."""
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
        raise ConfigurationError(f"bins must be a whole number from 1 to {MAX_BINS}, got {bins!r}")


def reliability_diagram(
    before: Sequence[Scored],
    after: Sequence[Scored] | None,
    path: str | Path,
    *,
    bins: int = 10,
    title: str = "Reliability",
) -> Path:
    """A PNG reliability diagram (accuracy vs top probability per bin), before and
    after calibration side by side."""
    check_bins(bins)
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    panels = [("before", before)] + ([("after", after)] if after is not None else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.6), squeeze=False)
    for ax, (name, scored) in zip(axes[0], panels):
        counts, conf, acc = zip(*binned(scored, bins))
        centers = [(i + 0.5) / bins for i in range(bins)]
        heights = [k / n if n else 0.0 for n, k in zip(counts, acc)]
        ax.bar(centers, heights, width=1 / bins, edgecolor="black", alpha=0.75, label="accuracy")
        filled = [c for c, n in zip(centers, counts) if n]
        mean_top = [p / n for n, p in zip(counts, conf) if n]
        ax.plot(filled, mean_top, "o", color="tab:red", label="mean top probability")
        ax.plot([0, 1], [0, 1], "--", color="gray", label="perfect calibration")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("top probability")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{title}: {name} (ECE {ece(scored, bins):.3f}, n={len(scored)})")
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
