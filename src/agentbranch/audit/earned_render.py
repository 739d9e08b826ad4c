"""The earned-trust report shown: a summary line per question, a rich table per question
(``--details``) and the threshold and coverage diagram (matplotlib), every wording of one
report in one place so that they say the same thing the same way."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from agentbranch.audit.earned_learning import ECE_BINS
from agentbranch.audit.earned_now import test_of
from agentbranch.audit.earned_report import EarnedReport, QuestionTrust
from agentbranch.audit.estimates import decisions_text, level_text, percent
from agentbranch.core.errors import ConfigurationError

# -- diagram --------------------------------------------------------------------------


def diagram_path(path: str | os.PathLike[str]) -> Path:
    """The file a diagram is written to: ``path``, with ``.png`` added when it has no
    extension (matplotlib would add it: the path said would not be the one written).
    An extension matplotlib cannot write is a ``ConfigurationError``."""
    out = Path(path)
    if not out.suffix:
        return out.with_name(out.name + ".png")
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if out.suffix[1:].lower() not in formats:
        raise ConfigurationError(
            f"cannot draw a diagram as {out.name}: the extension {out.suffix} is not an "
            f"image format; use one of {', '.join('.' + f for f in sorted(formats))}"
        )
    return out


def earned_diagram(report: EarnedReport, path: str | os.PathLike[str]) -> Path:
    """A PNG per report: for each question, the threshold in force and the coverage it
    gave (per slice) against decisions, drift withdrawals marked. Returns the file
    written (``diagram_path``)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    out = diagram_path(path)
    qs = list(report.questions.values())
    if not qs:
        raise ConfigurationError("no evidence to draw yet")
    learning = list(report.learning.values())
    n = len(qs) + len(learning)
    fig, axes = plt.subplots(n, 1, figsize=(7.5, 3.2 * n), squeeze=False)
    for ax, lq in zip(axes[len(qs) :, 0], learning):
        _learning_panel(ax, lq)
    versions = {v.key: v.version for lq in learning for v in lq.versions}
    for ax, q in zip(axes[:, 0], qs):
        xs = [0.0] + [p.decisions for p in q.timeline]
        _coverage_bars(ax, xs, [p.coverage for p in q.timeline], "decisions")
        # The threshold in force: a step at every change (the events), closed = a gap.
        at, x0 = None, 0.0
        for x1, then in [*((e.decisions, e.take_at) for e in q.events), (xs[-1], None)]:
            if x1 > x0 and at is None:
                ax.axvspan(x0, x1, color="0.85", alpha=0.5, label="closed")
            elif x1 > x0:
                ax.plot([x0, x1], [at, at], color="tab:blue", label="take_at")
            at, x0 = then, x1
        withdrawn = [e.decisions for e in q.events if e.kind == "withdrawn"]
        for x in withdrawn:
            ax.axvline(x, color="tab:red", linestyle="--", linewidth=1)
        now = "closed" if q.take_at is None else f"{q.take_at:g}"
        target = f"target {q.target.precision:g} at level {level_text(q.target.level)}"
        ax.set_title(f"{_name(q, versions)}: {q.trust}, take_at {now} ({target})", fontsize=9)
        handles, labels = ax.get_legend_handles_labels()
        legend = dict(zip(labels, handles))  # each label once
        if withdrawn:
            from matplotlib.lines import Line2D

            legend["withdrawn (drift)"] = Line2D([], [], color="tab:red", linestyle="--")
        ax.legend(list(legend.values()), list(legend), loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _coverage_bars(ax: Any, xs: list[float], coverage: list[float], xlabel: str) -> None:
    """The coverage of each slice ``xs[i]..xs[i + 1]`` as a bar, on axes from 0 to 1."""
    ax.bar(
        [(a + b) / 2 for a, b in zip(xs, xs[1:])],
        coverage,
        width=[b - a for a, b in zip(xs, xs[1:])],
        color="tab:green",
        alpha=0.3,
        label="coverage (share taken)",
    )
    ax.set_ylim(0, 1.02)
    ax.set_xlim(0, max(xs[-1], 1.0))
    ax.set_xlabel(xlabel)


def _learning_panel(ax: Any, lq: Any) -> None:
    """A learning question's curve: its deciding read's accuracy and coverage per block
    of labels, a line where a version began deciding."""
    xs = [0.0] + [float(p.labels) for p in lq.curve]
    coverage = [0.0 if math.isnan(p.coverage) else p.coverage for p in lq.curve]
    _coverage_bars(ax, xs, coverage, "labels learned from")
    ax.plot(
        [p.labels for p in lq.curve],
        [p.accuracy for p in lq.curve],
        marker="o",
        color="tab:purple",
        label="read's accuracy vs the teacher",
    )
    for j, at in lq.began[1:]:
        ax.axvline(at, color="0.4", linestyle=":", linewidth=1)
        ax.text(at, 0.03, f" v{j}", fontsize=7, color="0.3")
    at = "closed" if lq.take_at is None else f"take_at {lq.take_at:g}"
    ax.set_title(
        f"{lq.question_id}: learning, version {lq.in_force} in force ({lq.trust}, {at})",
        fontsize=9,
    )
    ax.legend(loc="lower right", fontsize=7)


# -- text -----------------------------------------------------------------------------


def _f(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}f}"


def _coverage(q: Any) -> str:
    """A question's (or a learning question's) coverage, overall and lately."""
    if not math.isfinite(q.coverage):
        return "unknown: no taken decision was audited (add Audit(rate=...))"
    return f"{_f(q.coverage, 2)} overall, {_f(q.recent_coverage, 2)} lately"


def _at(take_at: float | None) -> str:
    return "closed (nothing taken)" if take_at is None else f"take_at {take_at:g}"


def _name(q: QuestionTrust, versions: dict[str, int]) -> str:
    """The question's id, with its version for a learning question's version of the read."""
    return q.question_id if q.key not in versions else f"{q.question_id} v{versions[q.key]}"


def _in_force(q: QuestionTrust) -> str:
    now = f"{q.trust}, {_at(q.take_at)}"
    if q.suspended:
        return (
            f"{now}: the band this policy earned is suspended, its due audits stopped "
            "arriving (it reopens when they arrive again; see the WARNING log)"
        )
    if not q.recomputed:
        return (
            f"{now}, as recorded at the latest label (audit records are not the evidence: "
            "give the evidence store to see what the policy computes now)"
        )
    same = (q.recorded_take_at, q.recorded_trust) == (q.take_at, q.trust)
    recorded = (
        "the latest record says the same"
        if same
        else f"the latest labelled decision was made under {q.recorded_trust}, "
        f"{_at(q.recorded_take_at)}"
    )
    out = f"{now}: what the policy computes from these {q.labels} records now; {recorded}"
    if q.closed_since:
        out += (
            f"; {q.closed_since} labelled decisions since it opened were made with the band "
            "closed: the deciding process suspended it because its audits stopped arriving "
            "(see its WARNING log), or had not re-read the store yet (refresh_s)"
        )
    return out


def _target(q: QuestionTrust) -> str:
    t = q.target
    # a learning question's versions record their share of the error as their level and
    # the policy's own as the level of their drift test (``drift_level``)
    policy = (t.settings or {}).get("drift_level") if t.origin == "policy" else None
    head = f"precision {t.precision:g} at level {level_text(policy or t.level)}"
    if policy is not None and policy != t.level:
        return (
            f"{head}: the policy's own (this version's looks test at {level_text(t.level)}, "
            "its share of the error)"
        )
    if t.origin == "policy":
        return f"{head}: the policy's own"
    if t.origin == "asked":
        return f"{head}: asked (--target-precision); the records do not say the policy's"
    return (
        f"{head}: a default; the records do not say the policy's (written by an older "
        "release): ask with --target-precision"
    )


def _next_look(q: QuestionTrust) -> str:
    if q.next_look_at is None or q.epoch_labels is None:
        return ""
    return f"; next look at {q.next_look_at} labels (now {q.epoch_labels})"


def _labels(q: QuestionTrust) -> str:
    names = {"audit": "audits", "fallback": "fallback answers", "review": "reviews"}
    parts = ", ".join(f"{n} {names.get(src, src)}" for src, n in sorted(q.by_source.items()))
    out = decisions_text(q.decisions_estimate).replace(" labels ", f" labels ({parts}) ", 1)
    if q.labels_to_open is not None:
        out += f"; {_opened(q)}"
    return out


def _opened(q: QuestionTrust) -> str:
    """When the band first opened, counted in the records this report read."""
    if q.recomputed:
        return f"opened after {q.labels_to_open} labels"
    return (
        f"opened after {q.labels_to_open} records of the audit file (a sample of the "
        "labels: the evidence store counts more; give it with --evidence)"
    )


# -- the summary: one line per question --------------------------------------------------


def _when(q: QuestionTrust) -> str:
    """When the band opened, or why it is closed."""
    if q.take_at is not None:
        return "open" if q.labels_to_open is None else _opened(q)
    if q.suspended:
        return "suspended: its due audits stopped arriving"
    if q.trust == "withdrawn":
        return "withdrawn: " + (_events(q)[-1] if q.events else "drift")
    return "not shown yet" + _next_look(q)


def summary_table(report: EarnedReport) -> Any:
    """The summary as a ``rich`` table, one row per question (a learning question's: its
    version in force)."""
    from rich.table import Table

    table = Table(title="in force, per question", title_justify="left")
    for name in ("question", "in force", "take_at", "coverage (all / lately)"):
        table.add_column(name, no_wrap=True)
    table.add_column("opened, or why closed", max_width=60)
    in_force = {lq.question_id: lq for lq in report.learning.values()}
    resting = {  # a learning question's versions not in force: in the details
        v.key for lq in report.learning.values() for v in lq.versions if v.version != lq.in_force
    }
    for key, q in report.questions.items():
        if key in resting:
            continue
        lq = in_force.get(q.question_id)
        now = f"{q.trust} v{lq.in_force}" if lq is not None and lq.in_force else q.trust
        cov = f"{_f(q.coverage, 2)} / {_f(q.recent_coverage, 2)}"
        at = "-" if q.take_at is None else f"{q.take_at:g}"
        table.add_row(q.question_id, now, at, cov, _when(q))
    return table


def rows(q: QuestionTrust) -> list[tuple[str, str]]:
    """The table's rows for one question (the audit rows, if any, come after)."""
    tb, level = q.take_band, q.target.level
    # a learned version's drift test runs at its policy's level (``drift_level``)
    drift_level = (q.target.settings or {}).get("drift_level") or level
    out = [
        ("in force", _in_force(q)),
        ("target", _target(q)),
        ("why", None if q.why is None else f"{q.why}{_next_look(q)} [{test_of(q.why)}]"),
        ("what it means", q.meaning),
        ("labels", _labels(q)),
        (
            "audits since it opened",
            f"{tb.right}/{tb.n} agreed = {_f(tb.precision)} (≥ {_f(tb.lower)} at "
            f"{percent(level)}); drift e-value {tb.drift_evalue:.3g} (withdraws at "
            f"{1 / (1 - drift_level):.3g})"
            if tb.n
            else "no audited takes since the band opened"
            if q.take_at is not None
            else "none: the band is not open",
        ),
        ("coverage", _coverage(q)),
        (
            "take_at over time",
            "  ".join(
                f"{p.decisions:.0f}: {'-' if p.take_at is None else f'{p.take_at:g}'}"
                f" ({_f(p.coverage, 2)})"
                for p in q.timeline
            ),
        ),
        ("events", "\n".join(_events(q)) or "none"),
        ("what if", _what_if(q.what_if)),
    ]
    return [(name, value) for name, value in out if value is not None]


def _what_if(w: Any) -> str | None:
    if w is None:
        return None
    got = (
        "the records cannot be replayed (audit records)"
        if w.trust == "not recomputed"
        else f"{w.trust}, {_at(w.take_at)}"
    )
    return (
        f"at precision {w.precision:g} (asked with --target-precision; not the policy's, "
        f"not in force): {got}"
    )


def tables(
    report: EarnedReport, extra: dict[str, list[tuple[str, str]]] | None = None
) -> list[Any]:
    """One ``rich`` table per question; ``extra``: more rows per question id (an audit
    file's own figures)."""
    why = "(it could not be written: see the ERROR log, docs/reliability.md)"
    lost = f"{report.labels_lost} labels of this process never reached the store {why}"
    more = [("labels lost", lost)] if report.labels_lost else []
    extra = extra or {}
    out = []
    versions = {v.key: v.version for lq in report.learning.values() for v in lq.versions}
    for q in report.questions.values():
        at = "nothing taken" if q.take_at is None else f"take_at {q.take_at:g} in force"
        name = f"{_name(q, versions)}: {at} ({q.trust})"  # the one threshold in force
        out.append(_table(name, [*rows(q), *extra.get(q.question_id, []), *more]))
    for lq in report.learning.values():
        who = ", ".join(x for x in (lq.reader, lq.model) if x)
        title = f"{lq.question_id} ({who}): learning from the teacher, version {lq.in_force}"
        out.append(_table(f"{title} in force", learning_rows(lq)))
    return out


def _table(title: str, rows: list[tuple[str, str]]) -> Any:
    """A two-column ``rich`` table of ``rows`` (what, value)."""
    from rich.table import Table

    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("what", style="cyan", no_wrap=True)
    table.add_column("value", max_width=76)  # long values wrap in their cell
    for name, value in rows:
        table.add_row(name, value)
    return table


# -- learning (Earned(learn=True)) ----------------------------------------------------


def _version(v: Any) -> str:
    from agentbranch.policy.earned.learn.ladder import version_share

    made = "as written" if v.version == 0 else f"fitted on the first {v.fitted_on} labels"
    out = f"v{v.version} ({made}): {v.trust}, {_at(v.take_at)}"
    if v.level is not None:
        share = version_share(v.version)
        whole = (1.0 - v.level) + (v.anytime_alpha or 0.0)  # its looks' and its bets' error
        policy = 1.0 - whole / share
        out += (
            f", tested at level {level_text(1.0 - whole)} (its share {share:.3g} of 1 - "
            f"{level_text(policy)})"
        )
        if v.anytime_alpha is not None and v.entries:
            out += (
                f": {level_text(1.0 - v.anytime_alpha)} by an anytime-valid test walking from "
                f"{', '.join(f'{e:g}' for e in v.entries)}, {level_text(v.level)} by its looks"
            )
        elif v.anytime_alpha is not None:  # (its records disagree on the entries)
            out += ": no anytime-valid walk (its records disagree on where it starts)"
    if v.deciding_labels:
        out += f"; decided {v.deciding_labels} labels, {_f(v.deciding_accuracy, 2)} right"
    if v.trial_reads:
        out += f"; {v.trial_reads} trial reads, {_f(v.trial_accuracy, 2)} right"
    return out


def learning_rows(lq: Any) -> list[tuple[str, str]]:
    """The rows of a learning question's table."""
    now = next((v for v in lq.versions if v.version == lq.in_force), None)
    trials = [v for v in lq.versions if v.version in lq.on_trial]
    older = [v for v in lq.versions if v.version != lq.in_force and v not in trials]
    out = [
        ("labels", f"{lq.labels} labels learned from (each with its labelled state)"),
        ("in force", "-" if now is None else _version(now)),
        ("on trial", "\n".join(_version(v) for v in trials) or "none"),
        (
            "decided by",
            ", ".join(f"v{j} from label {i + 1}" for j, i in lq.began)
            if len(lq.began) > 1
            else None,
        ),
        ("earlier versions", "\n".join(_version(v) for v in older) or None),
        (
            "read vs teacher",
            f"share of the deciding read's labels the teacher agreed with, per block of "
            f"{lq.curve[0].labels} labels (labels so far: share, versions deciding): "
            + "  ".join(
                f"{p.labels}: {_f(p.accuracy, 2)} (v{'/'.join(str(j) for j in p.versions)})"
                for p in lq.curve
            )
            if lq.curve
            else "no label with its state yet",
        ),
        (
            "probability",
            f"reported with {lq.probability_labels} labelled decisions: calibration "
            f"error {_f(lq.probability_ece, 3)} ({ECE_BINS} bins, weights 1/rate); "
            f"a measured map on {_f(lq.probability_mapped, 2)} of them, the read's "
            "own probability on the rest"
            if lq.probability_labels
            else None,
        ),
        ("coverage", _coverage(lq) if lq.curve or math.isfinite(lq.coverage) else "-"),
        ("why", None if lq.why is None else f"{lq.why} [{test_of(lq.why)}]"),
    ]
    return [(name, value) for name, value in out if value is not None]


def _events(q: QuestionTrust) -> list[str]:
    return [
        f"{e.kind} at {e.decisions:.0f} decisions ({e.labels} labels): {e.reason}" for e in q.events
    ]


__all__ = [
    "summary_table",
    "diagram_path",
    "earned_diagram",
    "learning_rows",
    "rows",
    "tables",
]
