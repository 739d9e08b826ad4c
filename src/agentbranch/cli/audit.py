"""``agentbranch audit report FILE``: the audit report as a table, JSON and a diagram."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentbranch.cli.common import console, err, fmt

audit_app = typer.Typer(
    name="audit",
    help="Shadow audits: how often the decisions the engine takes agree with a teacher.",
    no_args_is_help=True,
    add_completion=False,
)


def more_audits_text(t, pct: str) -> str:  # noqa: ANN001 - a report.TakeAt
    """The "more audits" row: the count, and what it counts."""
    if t.more_audits == 0:
        return f"none: {fmt(t.estimate)} is known to reach {pct}"
    if t.more_audits is None:
        return (
            f"cannot be shown: the decisions at {fmt(t.estimate)} agree exactly {pct} of the "
            "time, so no number of audits would lift the interval above it"
        )
    precision = t.at_estimate.precision if t.at_estimate is not None else float("nan")
    return (
        f"≈{t.more_audits:,} more labelled records (audits and fallback examples, in "
        f"today's mix) would show that take_at {fmt(t.estimate)} reaches {pct}, if its "
        f"precision ({fmt(precision)}) holds"
    )


@audit_app.command()
def report(
    file: Annotated[Path, typer.Argument(help="Audit records (JSON Lines from Audit(sink=...)).")],
    target_precision: Annotated[
        float, typer.Option(help="Precision the suggested take_at must reach, in (0, 1].")
    ] = 0.9,
    level: Annotated[
        float, typer.Option(help="Confidence level of the intervals, in (0, 1).")
    ] = 0.95,
    bins: Annotated[int, typer.Option(min=1, max=1000, help="Confidence bins (1-1000).")] = 10,
    diagram: Annotated[
        Path | None, typer.Option(help="Write a reliability diagram PNG (vs the teacher).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    evidence: Annotated[
        Path | None,
        typer.Option(
            help="An Earned policy's evidence (JSON Lines, SQLite file or postgresql:// "
            "URI): add its earned trust."
        ),
    ] = None,
) -> None:
    """Per question: the take band's precision (Wilson interval), agreement by confidence
    bin, the take_at reaching --target-precision and how many more audits would show it.
    FILE may also be an Earned policy's evidence store (docs/earned.md; a JSON Lines
    file, a SQLite file or a postgresql:// URI of a LangGraph store): then, per
    question, the earned threshold over time, its coverage, the take band's precision
    with its bound and drift events (--diagram: threshold and coverage against
    decisions)."""
    from agentbranch.audit.earned_sources import is_evidence_store
    from agentbranch.audit.labels import scored_examples
    from agentbranch.audit.report import audit_report, load_records
    from agentbranch.core.errors import AgentBranchError
    from agentbranch.core.files import check_writable

    if is_evidence_store(_uri(file)):
        _earned(_uri(file), target_precision, level, diagram, as_json)
        return
    try:
        if diagram is not None:
            check_writable(diagram, "--diagram")
        records = load_records(file)
        rep = audit_report(records, target_precision=target_precision, level=level, bins=bins)
        if diagram is not None:
            from agentbranch.calibration import reliability_diagram

            reliability_diagram(
                scored_examples(records, raw=False), None, diagram, bins=bins, title="audits"
            )
    except AgentBranchError as e:
        err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except OSError as e:  # the diagram could not be written after all (disk full, ...)
        err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    earned_diagram = diagram.with_name(diagram.stem + "-earned.png") if diagram else None
    if as_json and evidence is not None:
        _earned(evidence, target_precision, level, earned_diagram, True, audit=rep.as_dict())
        return
    if as_json:
        print(json.dumps(rep.as_dict(), indent=2))
        return
    from agentbranch.cli.tables import key_value, print_table

    if not rep.questions:
        console.print(f"{file}: no audit records yet")
        if evidence is not None:
            _earned(evidence, target_precision, level, earned_diagram, False)
        return
    pct = f"{target_precision:.0%}"
    for qid, q in rep.questions.items():
        t, tb = q.threshold, q.take_band
        rows = [
            (
                "audited",
                f"{tb.n} taken + {q.fallback_examples} fallback "
                f"(take_at now {fmt(q.current_take_at, 2)})",
            ),
            (
                "take-band precision",
                f"{fmt(tb.precision)}  [{fmt(tb.low)}, {fmt(tb.high)}] ({level:.0%} Wilson)"
                if tb.n
                else "no audits of the take band yet",
            ),
            (
                f"take_at for {pct}",
                (f"{fmt(t.take_at)} known" if t.take_at is not None else "not known yet")
                + (
                    f"; {fmt(t.estimate)} estimated (coverage {fmt(t.coverage, 2)})"
                    if t.estimate is not None
                    else "; no threshold reaches it"
                ),
            ),
        ]
        if t.estimate is not None:
            rows.append(("more audits", more_audits_text(t, pct)))
        rows.append(
            (
                "agreement by confidence",
                "  ".join(f"≥{b.low:.1f}: {fmt(b.agreement, 2)} ({b.n})" for b in q.bins if b.n),
            )
        )
        table = key_value(f"{qid}: the engine vs the teacher", rows)
        table.columns[1].max_width = 76  # long values wrap in their cell, the rest stays
        print_table(console, table)
    if diagram is not None:
        console.print(f"reliability diagram [bold]{diagram}[/bold]")
    if evidence is not None:
        _earned(evidence, target_precision, level, earned_diagram, False)
    elif any(r.get("trust") in ("learning", "earned", "withdrawn") for r in records):
        # An Earned policy's audits: the thresholds that were in force.
        from agentbranch.audit.earned_render import render
        from agentbranch.audit.earned_report import earned_report

        render(earned_report(records, precision=target_precision, level=level), console)


def _uri(source: str | Path) -> str | Path:
    """A PostgreSQL URI passed as a path lost a slash (``postgresql:/h``): restore it."""
    text = str(source)
    for scheme in ("postgresql:/", "postgres:/"):
        if text.startswith(scheme) and not text.startswith(scheme + "/"):
            return scheme + "/" + text[len(scheme) :]
    return source


def _earned(
    file: str | Path,
    precision: float,
    level: float,
    diagram: Path | None,
    as_json: bool,
    audit: dict | None = None,
) -> None:
    """The earned-trust report of an evidence store (after the audit report, if any)."""
    from agentbranch.audit.earned_render import earned_diagram, render
    from agentbranch.audit.earned_report import earned_report
    from agentbranch.core.errors import AgentBranchError

    try:
        rep = earned_report(_uri(file), precision=precision, level=level)
        if diagram is not None and rep.questions:
            earned_diagram(rep, diagram)
    except AgentBranchError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    if as_json:
        out = rep.as_dict() if audit is None else {"audit": audit, "earned": rep.as_dict()}
        print(json.dumps(out, indent=2))
        return
    render(rep, console)
    if diagram is not None and rep.questions:
        console.print(f"threshold and coverage diagram [bold]{diagram}[/bold]")
