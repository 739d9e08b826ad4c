"""``agentbranch audit report FILE``: audit records or an Earned policy's evidence, one report
per question (a fixed take_at: the audit table; Earned: the threshold in force), as tables,
JSON and a diagram."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from agentbranch.cli.common import console, exit_on_error, fmt, key_value, print_table

__all__ = ["audit_app", "more_audits_text", "report"]

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
    file: Annotated[
        Path,
        typer.Argument(
            help="Audit records (JSON Lines from Audit(sink=...)), or an Earned policy's "
            "evidence store (its JSON Lines file, SQLite file or postgresql:// URI)."
        ),
    ],
    target_precision: Annotated[
        float | None,
        typer.Option(
            help="Audits of a fixed take_at: the precision the suggested take_at must reach "
            "(default 0.9). Earned policies report at their own precision; this asks "
            "'what if' at another one."
        ),
    ] = None,
    level: Annotated[
        float | None,
        typer.Option(
            help="Confidence level of the intervals, in (0, 1) (default 0.95; an Earned "
            "policy's own level when its records say it)."
        ),
    ] = None,
    bins: Annotated[int, typer.Option(min=1, max=1000, help="Confidence bins (1-1000).")] = 10,
    diagram: Annotated[
        Path | None,
        typer.Option(
            help="Write a diagram (PNG unless the name says another image format): the "
            "reliability diagram of audit records; for an evidence store, threshold and "
            "coverage against decisions, and the learning curve of a policy that learns "
            "(with --evidence: NAME-earned.png beside it)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    details: Annotated[
        bool,
        typer.Option(
            "--details",
            help="After the summary (one line per question), every question's tables: "
            "the look that set its threshold, labels, audits, coverage over time, events, "
            "and a learning question's versions.",
        ),
    ] = False,
    evidence: Annotated[
        Path | None,
        typer.Option(
            help="An Earned policy's evidence (JSON Lines, SQLite file or postgresql:// "
            "URI): one report per question, the threshold in force from the evidence."
        ),
    ] = None,
) -> None:
    """Per question, one threshold: the one in force, why, and what the audits say.

    An Earned policy's report leads with one line per question (in force, take_at,
    coverage overall and lately, when it opened or why it is closed); --details adds
    every question's tables.

    Audits of a fixed take_at: the take band's precision (Wilson interval), agreement by
    confidence bin, the take_at reaching --target-precision and how many more audits
    would show it. FILE may also be an Earned policy's evidence store (docs/earned.md):
    then, per question, the threshold the policy computes from it now (next to the one
    recorded), the look that set it, the audits since the band opened with the drift
    test, coverage over time and events, at the policy's own precision (--target-precision
    asks 'what if'). A policy that learns (Earned(learn=True)) gets, per question, the
    versions of its read (in force, on trial), the read's accuracy against the teacher
    over time, coverage, and the threshold in force with why. Audit records of an Earned
    policy (or --evidence) give the same report, with the audits' agreement by
    confidence."""
    from agentbranch.audit.earned_sources import is_evidence_store
    from agentbranch.audit.report import audit_report, load_records

    with exit_on_error(also=(OSError,)):  # OSError: the diagram could not be written
        _check_unit("--target-precision", target_precision, closed=True)
        _check_unit("--level", level, closed=False)
        diagram = _diagram(diagram)
        shown = (target_precision, level, bins, diagram, as_json, details)
        if is_evidence_store(_uri(file)):
            _earned(_uri(file), None, file, *shown)
            return
        records = load_records(file)
        earned_policy = any(r.get("trust") in ("learning", "earned", "withdrawn") for r in records)
        if evidence is not None or earned_policy:
            _earned(records if evidence is None else _uri(evidence), records, file, *shown)
            return
        target = 0.9 if target_precision is None else target_precision
        rep = audit_report(records, target_precision=target, level=level or 0.95, bins=bins)
        if diagram is not None:
            _reliability(records, diagram, bins)
    if as_json:
        print(json.dumps(rep.as_dict(), indent=2, allow_nan=False))
        return
    if not rep.questions:
        console.print(f"{file}: no audit records yet")
        return
    for q in rep.questions.values():
        _audit_table(q, target, level or 0.95)
    if diagram is not None:
        console.print(f"reliability diagram [bold]{diagram}[/bold]", soft_wrap=True)


def _check_unit(flag: str, value: float | None, *, closed: bool) -> None:
    from agentbranch.core.errors import ConfigurationError

    if value is not None and not (0.0 < value <= 1.0 if closed else 0.0 < value < 1.0):
        span = "in (0, 1]" if closed else "strictly between 0 and 1"
        raise ConfigurationError(f"{flag} must be {span}, got {value}")


def _diagram(path: Path | None) -> Path | None:
    """The diagram file that will be written (``.png`` added when the name has no
    extension), checked before any work: a missing folder is a clear error."""
    if path is None:
        return None
    from agentbranch.audit.earned_render import diagram_path
    from agentbranch.core.files import check_writable

    if path.is_dir():
        check_writable(path, "--diagram")  # a folder is refused, not named "folder.png"
    path = diagram_path(path)
    check_writable(path, "--diagram")
    return path


def _reliability(records: list, diagram: Path, bins: int) -> None:
    from agentbranch.audit.labels import scored_examples
    from agentbranch.calibration import reliability_diagram

    examples = scored_examples(records, raw=False)
    reliability_diagram(examples, None, diagram, bins=bins, title="audits")


def _audit_table(q, target: float, level: float) -> None:  # noqa: ANN001
    """One question's audit table (a fixed take_at: with the take_at for ``target``)."""
    from agentbranch.audit.estimates import percent

    pct = percent(target)
    t, tb = q.threshold, q.take_band
    now = fmt(q.current_take_at, 2)
    audited = f"{tb.n} taken + {q.fallback_examples} fallback (take_at now {now})"
    band = "no audits of the take band yet"
    if tb.n:
        band = f"{fmt(tb.precision)}  [{fmt(tb.low)}, {fmt(tb.high)}] ({percent(level)} Wilson)"
    known = f"{fmt(t.take_at)} known" if t.take_at is not None else "not known yet"
    estimated = "; no threshold reaches it"
    if t.estimate is not None:
        estimated = f"; {fmt(t.estimate)} estimated (coverage {fmt(t.coverage, 2)})"
    rows = [("audited", audited), ("take-band precision", band)]
    rows.append((f"take_at for {pct}", known + estimated))
    if t.estimate is not None:
        rows.append(("more audits", more_audits_text(t, pct)))
    rows.append(_agreement(q))
    table = key_value(f"{q.question_id}: the engine vs the teacher", rows)
    table.columns[1].max_width = 76  # long values wrap in their cell, the rest stays
    print_table(console, table)


def _agreement(q) -> tuple[str, str]:  # noqa: ANN001
    return (
        "agreement by confidence",
        "  ".join(f"≥{b.low:.1f}: {fmt(b.agreement, 2)} ({b.n})" for b in q.bins if b.n),
    )


def _earned(
    source: str | Path | list,
    records: list | None,
    file: Path,
    target_precision: float | None,
    level: float | None,
    bins: int,
    diagram: Path | None,
    as_json: bool,
    details: bool,
) -> None:
    """An Earned policy's report, one per question: the threshold in force from
    ``source`` (its evidence store, or its audit records). With its audit ``records``,
    the audits' own figures beside it, the audit table of questions under a fixed
    take_at, and their reliability diagram (the earned one then ``NAME-earned.png``)."""
    from agentbranch.audit.earned_render import earned_diagram, summary_table, tables
    from agentbranch.audit.earned_report import earned_report
    from agentbranch.audit.report import audit_report

    rep = earned_report(source, precision=target_precision, level=level)
    earned_ids = {q.question_id for q in rep.questions.values()}
    audits = audit_report(
        records or [], target_precision=target_precision or 0.9, level=level or 0.95, bins=bins
    )
    earned_png = diagram
    if diagram is not None and records is not None:
        _reliability(records, diagram, bins)
        earned_png = diagram.with_name(diagram.stem + "-earned.png")
    drawn = earned_diagram(rep, earned_png) if earned_png is not None and rep.questions else None
    if as_json:
        out = rep.as_dict()
        if records is not None:
            audit = audits.as_dict()
            for question_id in earned_ids & set(audit["questions"]):
                del audit["questions"][question_id]["threshold"]  # one threshold: the earned one
            out = {"earned": out, "audit": audit}
        print(json.dumps(out, indent=2, allow_nan=False))
        return
    extra: dict[str, list[tuple[str, str]]] = {}  # the audits' own figures, per question
    for question_id, q in audits.questions.items():
        if question_id in earned_ids:
            taken = f"{q.take_band.n} taken + {q.fallback_examples} fallback"
            extra[question_id] = [(f"audits in {file.name}", taken), _agreement(q)]
    if not rep.questions:
        console.print("no earned-trust evidence yet")
    else:  # the summary (one line per question), then with --details every table
        for table in [summary_table(rep), *(tables(rep, extra) if details else [])]:
            print_table(console, table)
        if not details:
            console.print(
                "each question's look, labels, audits, coverage over time and events: --details",
                soft_wrap=True,
            )
    for question_id, q in audits.questions.items():
        if question_id not in earned_ids:
            _audit_table(q, target_precision or 0.9, level or 0.95)
    if diagram is not None and records is not None:
        console.print(f"reliability diagram [bold]{diagram}[/bold]", soft_wrap=True)
    if drawn is not None:
        console.print(f"threshold and coverage diagram [bold]{drawn}[/bold]", soft_wrap=True)


def _uri(source: str | Path) -> str | Path:
    """A PostgreSQL URI passed as a path lost a slash (``postgresql:/h``): restore it."""
    text = str(source)
    for scheme in ("postgresql:/", "postgres:/"):
        if text.startswith(scheme) and not text.startswith(scheme + "/"):
            return scheme + "/" + text[len(scheme) :]
    return source
