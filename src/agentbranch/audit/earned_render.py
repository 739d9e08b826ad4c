"""The earned-trust report shown: a rich table per question and the threshold and
coverage diagram (matplotlib)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from agentbranch.audit.earned_report import EarnedReport, QuestionTrust
from agentbranch.audit.estimates import decisions_text
from agentbranch.core.errors import ConfigurationError

# -- diagram --------------------------------------------------------------------------


def earned_diagram(report: EarnedReport, path: str | os.PathLike[str]) -> Path:
    """A PNG per report: for each question, the threshold in force and the coverage it
    gave (per slice) against decisions, drift withdrawals marked."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    qs = list(report.questions.values())
    if not qs:
        raise ConfigurationError("no evidence to draw yet")
    fig, axes = plt.subplots(len(qs), 1, figsize=(7.5, 3.2 * len(qs)), squeeze=False)
    for ax, q in zip(axes[:, 0], qs):
        xs = [0.0] + [p.decisions for p in q.timeline]
        ax.bar(
            [(a + b) / 2 for a, b in zip(xs, xs[1:])],
            [p.coverage for p in q.timeline],
            width=[b - a for a, b in zip(xs, xs[1:])],
            color="tab:green",
            alpha=0.3,
            label="coverage (share taken)",
        )
        # The threshold in force: a step at every change (the events), closed = a gap.
        at, x0, steps = None, 0.0, []
        for e in q.events:
            steps.append((x0, e.decisions, at))
            at, x0 = e.take_at, e.decisions
        steps.append((x0, xs[-1], at))
        first_line = first_gap = True
        for a, b, t in steps:
            if b <= a:
                continue
            if t is None:
                ax.axvspan(a, b, color="0.85", alpha=0.5, label="closed" if first_gap else None)
                first_gap = False
            else:
                ax.plot([a, b], [t, t], color="tab:blue", label="take_at" if first_line else None)
                first_line = False
        for e in q.events:
            if e.kind == "withdrawn":
                ax.axvline(e.decisions, color="tab:red", linestyle="--", linewidth=1)
        ax.set_ylim(0, 1.02)
        ax.set_xlim(0, max(xs[-1], 1.0))
        ax.set_xlabel("decisions")
        ax.set_title(
            f"{q.question_id}: {q.trust}, take_at "
            f"{'closed' if q.take_at is None else f'{q.take_at:g}'} "
            f"(target {report.precision:g} at level {report.level:g})",
            fontsize=9,
        )
        handles, labels = ax.get_legend_handles_labels()
        if any(e.kind == "withdrawn" for e in q.events):
            from matplotlib.lines import Line2D

            handles.append(Line2D([], [], color="tab:red", linestyle="--"))
            labels.append("withdrawn (drift)")
        ax.legend(handles, labels, loc="lower right", fontsize=7)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# -- text -----------------------------------------------------------------------------


def _f(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def render(report: EarnedReport, console: Any) -> None:
    """The report as ``rich`` tables on ``console`` (what ``agentbranch audit report``
    prints)."""
    from rich.table import Table

    if not report.questions:
        console.print("no earned-trust evidence yet")
        return
    for q in report.questions.values():
        tb = q.take_band
        table = Table(
            title=f"{q.question_id}: earned trust (target {report.precision:g})",
            show_header=False,
        )
        table.add_column("what", style="cyan")
        table.add_column("value")
        table.add_row("reader / model", f"{q.reader} / {q.model}")
        table.add_row(
            "at the latest label",
            f"{q.trust}, take_at {'closed' if q.take_at is None else f'{q.take_at:g}'}",
        )
        table.add_row(
            "evidence",
            (
                decisions_text(q.decisions_estimate)
                if q.decisions_estimate is not None
                else f"{q.labels} labels standing for {q.decisions:.0f} decisions"
            )
            + ("" if q.labels_to_open is None else f"; opened after {q.labels_to_open} labels"),
        )
        table.add_row(
            "coverage",
            f"{_f(q.coverage, 2)} overall, {_f(q.recent_coverage, 2)} lately"
            if not math.isnan(q.coverage)
            else "unknown: no taken decision was audited (add Audit(rate=...))",
        )
        table.add_row(
            "take-band precision",
            f"{tb.right}/{tb.n} = {_f(tb.precision)} (≥ {_f(tb.lower)} at "
            f"{report.level:.0%}, audits since the band opened); drift e-value "
            f"{tb.drift_evalue:.3g} (withdraws at {1 / (1 - report.level):.3g})"
            if tb.n
            else "no audited takes since the band opened",
        )
        table.add_row(
            "take_at over time",
            "  ".join(
                f"{p.decisions:.0f}: {'-' if p.take_at is None else f'{p.take_at:g}'}"
                f" ({_f(p.coverage, 2)})"
                for p in q.timeline
            ),
        )
        table.add_row("events", "\n".join(_events(q)) or "none")
        console.print(table)


def _events(q: QuestionTrust) -> list[str]:
    return [
        f"{e.kind} at {e.decisions:.0f} decisions ({e.labels} labels): {e.reason}" for e in q.events
    ]
