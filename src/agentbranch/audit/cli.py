"""``agentbranch audit report FILE``: the audit report as a table, JSON and a diagram."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

audit_app = typer.Typer(
    name="audit",
    help="Shadow audits: how often the decisions the engine takes agree with a teacher.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
err = Console(stderr=True)


def _f(x: float | None, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def more_audits_text(t, pct: str) -> str:  # noqa: ANN001 - a report.TakeAt
    """The "more audits" row: the count, and what it counts."""
    if t.more_audits == 0:
        return f"none: {_f(t.estimate)} is known to reach {pct}"
    if t.more_audits is None:
        return (
            f"cannot be shown: the decisions at {_f(t.estimate)} agree exactly {pct} of the "
            "time, so no number of audits would lift the interval above it"
        )
    precision = t.at_estimate.precision if t.at_estimate is not None else float("nan")
    return (
        f"≈{t.more_audits:,} more labelled records (audits and fallback examples, in "
        f"today's mix) would show that take_at {_f(t.estimate)} reaches {pct}, if its "
        f"precision ({_f(precision)}) holds"
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
) -> None:
    """Per question: the take band's precision (Wilson interval), agreement by confidence
    bin, the take_at reaching --target-precision and how many more audits would show it."""
    from agentbranch.audit.labels import scored_examples
    from agentbranch.audit.report import audit_report, load_records
    from agentbranch.errors import AgentBranchError
    from agentbranch.filetext import check_writable

    try:
        if diagram is not None:
            check_writable(diagram, "--diagram")
        records = load_records(file)
        rep = audit_report(records, target_precision=target_precision, level=level, bins=bins)
        if diagram is not None:
            from agentbranch.calibrate import reliability_diagram

            reliability_diagram(
                scored_examples(records, raw=False), None, diagram, bins=bins, title="audits"
            )
    except AgentBranchError as e:
        err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except OSError as e:  # the diagram could not be written after all (disk full, ...)
        err.print(f"[red]error:[/red] {e}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps(rep.as_dict(), indent=2))
        return
    from agentbranch.tables import key_value, print_table

    pct = f"{target_precision:.0%}"
    for qid, q in rep.questions.items():
        t, tb = q.threshold, q.take_band
        rows = [
            (
                "audited",
                f"{tb.n} taken + {q.fallback_examples} fallback "
                f"(take_at now {_f(q.current_take_at, 2)})",
            ),
            (
                "take-band precision",
                f"{_f(tb.precision)}  [{_f(tb.low)}, {_f(tb.high)}] ({level:.0%} Wilson)"
                if tb.n
                else "no audits of the take band yet",
            ),
            (
                f"take_at for {pct}",
                (f"{_f(t.take_at)} known" if t.take_at is not None else "not known yet")
                + (
                    f"; {_f(t.estimate)} estimated (coverage {_f(t.coverage, 2)})"
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
                "  ".join(f"≥{b.low:.1f}: {_f(b.agreement, 2)} ({b.n})" for b in q.bins if b.n),
            )
        )
        table = key_value(f"{qid}: the engine vs the teacher", rows)
        table.columns[1].max_width = 76  # long values wrap in their cell, the rest stays
        print_table(console, table)
    if diagram is not None:
        console.print(f"reliability diagram [bold]{diagram}[/bold]")
