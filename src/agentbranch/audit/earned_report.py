"""The earned-trust report: per question, the threshold that was in force over time, the
coverage it gave, the take band's precision with its bound, and drift events.

Input: the evidence an ``Earned`` policy keeps (``Earned(store=...)``: a JSON Lines file,
any LangGraph ``BaseStore``, or the ``Earned`` object itself), or audit records
(``Audit(sink=...)``) of an ``Earned`` policy, which carry the same ``take_at`` and
``trust``. Every record is one teacher label for one decision and says the threshold in
force when that decision was made, so the report shows what *was* in force, whatever
settings the policy had; nothing is recomputed.

* **decisions**: each record stands for ``1/rate`` decisions (a fallback-band label for
  one, an audited take for ``1/rate``), so ``decisions`` counts the traffic the records
  stand for and **coverage** is the share of it taken by the engine (over the whole
  history, and in ``windows`` equal slices of it for the timeline).
* **take-band precision**: audited takes since the band last opened that agreed with the
  teacher, with a one-sided Clopper–Pearson lower bound at ``level``. It describes the
  audits (one look); the guarantee is the policy's (docs/earned.md). Beside it, the drift
  test's e-value on those audits (the band is withdrawn when it reaches ``1/(1-level)``).
* **events**: the band ``opened`` (trust earned, or a hand-chosen ``start_at``),
  ``lowered``, ``raised`` (by a replica's or a re-estimate's change) or ``withdrawn``
  (drift), at the decision count and time of the first record made under the new
  threshold.

Precision is agreement with the teacher: it measures the engine against the teacher.

Over 500 lines: it loads every evidence source (JSON Lines, SQLite, PostgreSQL,
records), builds the per-question report and renders its table and diagram; those three
jobs are to become three modules in the planned layout restructuring.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from agentbranch.audit.report import json_safe
from agentbranch.core.errors import ConfigurationError, InvalidFileError

#: What an evidence record's ``schema`` field says.
EVIDENCE_SCHEMA = "agentbranch.earned/1"
_TRUSTS = ("learning", "earned", "withdrawn", "fixed")


@dataclass(frozen=True)
class _Row:
    """One teacher label, from an evidence record or an audit record."""

    group: str  # the evidence key (audit records: question id, reader, model)
    question_id: str
    reader: str | None
    model: str | None
    time: str
    order: tuple[str, str]
    band: str  # "take" or not
    rate: float
    correct: bool
    take_at: float | None
    trust: str


@dataclass(frozen=True)
class TrustPoint:
    """One slice of a question's history: the decisions up to its end, the threshold in
    force at its end (``None``: closed) and the share of its decisions taken."""

    decisions: float
    time: str
    take_at: float | None
    trust: str
    coverage: float


@dataclass(frozen=True)
class TrustEvent:
    kind: str  # "opened" | "lowered" | "raised" | "withdrawn" | "closed"
    decisions: float  # decisions (records' 1/rate) before it
    labels: int  # labels before it
    time: str
    take_at: float | None
    was: float | None
    reason: str


@dataclass(frozen=True)
class TakeBand:
    """Audited takes since the band last opened."""

    n: int
    right: int
    precision: float  # nan when n = 0
    lower: float  # one-sided Clopper–Pearson lower bound at the report's level
    drift_evalue: float  # the drift test's e-value (withdrawal at 1/(1 - level))


@dataclass(frozen=True)
class QuestionTrust:
    question_id: str
    key: str
    reader: str | None
    model: str | None
    labels: int
    decisions: float
    #: in force when the latest labelled decision was made (from an ``Earned``: now)
    take_at: float | None
    trust: str
    #: share of all decisions taken; nan when the band was open but no taken decision
    #: was audited (taken decisions then leave no record: add ``Audit(rate=...)``)
    coverage: float
    recent_coverage: float  # in the latest slice (nan as above)
    labels_to_open: int | None  # labels before the band first opened by earning it
    take_band: TakeBand
    timeline: list[TrustPoint] = field(default_factory=list)
    events: list[TrustEvent] = field(default_factory=list)


@dataclass(frozen=True)
class EarnedReport:
    precision: float
    level: float
    questions: dict[str, QuestionTrust]

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN becomes ``None``)."""
        return json_safe(asdict(self))


# -- input ----------------------------------------------------------------------------


def is_evidence_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file whose first non-empty line is an evidence
    record (what ``Earned(store="....jsonl")`` writes) rather than an audit record.
    Reads at most the first 1 MiB; FIFOs, devices and directories are not opened."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        with p.open("rb") as f:
            head = f.read(1 << 20)
    except OSError:
        return False
    for raw in head.splitlines():
        if raw.strip():
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError):  # the audit loader says what is wrong
                return False
            return isinstance(obj, dict) and obj.get("schema") == EVIDENCE_SCHEMA
    return False


_SQLITE_MAGIC = b"SQLite format 3\x00"
_POSTGRES = ("postgres://", "postgresql://")


def is_evidence_store(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names evidence the report can open: an evidence JSON Lines
    file, a SQLite database file (LangGraph ``SqliteStore``) or a PostgreSQL URI
    (``postgresql://...``, LangGraph ``PostgresStore``)."""
    if str(target).startswith(_POSTGRES):
        return True
    return is_evidence_file(target) or _is_sqlite(Path(target))


def _is_sqlite(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        with path.open("rb") as f:
            return f.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def _check_sqlite_store(path: str) -> None:
    """A SQLite file without LangGraph's ``store`` table is somebody else's database:
    an error, and it stays untouched (opening it as a store would create tables)."""
    import sqlite3

    try:
        con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = con.execute(
                "select 1 from sqlite_master where type = 'table' and name = 'store'"
            ).fetchone()
        finally:
            con.close()
    except sqlite3.Error as e:
        raise ConfigurationError(f"cannot read evidence from {path}: {e}") from None
    if not found:
        raise ConfigurationError(
            f"cannot read evidence from {path}: it is a SQLite database but not a LangGraph "
            "store (no 'store' table); give the file Earned(store=SqliteStore...) writes to"
        )


def _database_rows(target: str) -> list[_Row]:
    """Rows of the evidence in a SQLite file or a PostgreSQL database (LangGraph's
    stores, as ``Earned(store=SqliteStore/PostgresStore)`` wrote them)."""
    if target.startswith(_POSTGRES):
        try:
            from langgraph.store.postgres import PostgresStore
        except ImportError:
            raise ConfigurationError(
                "reading a PostgreSQL evidence store needs langgraph-checkpoint-postgres: "
                "pip install langgraph-checkpoint-postgres"
            ) from None
        opener: Any = PostgresStore
    else:
        from langgraph.store.sqlite import SqliteStore

        _check_sqlite_store(target)
        opener = SqliteStore
    try:
        with opener.from_conn_string(target) as store:
            return _rows(store)
    except ConfigurationError:
        raise
    except Exception as e:  # noqa: BLE001 - a database that is not a LangGraph store
        raise ConfigurationError(
            f"cannot read evidence from {target}: {type(e).__name__}: {e}; give the "
            "database Earned(store=SqliteStore/PostgresStore) writes to"
        ) from None


def _from_evidence(rec: Any) -> _Row:
    return _Row(
        rec.key,
        rec.question_id,
        rec.reader,
        rec.model,
        rec.time,
        rec.order,
        rec.band,
        rec.rate,
        rec.correct,
        rec.take_at,
        rec.trust,
    )


def _from_audit(rec: Mapping[str, Any], where: str) -> _Row | None:
    """An audit record as a row; ``None`` for records of a fixed policy or without a
    teacher label (nothing about earned trust in them)."""
    trust = rec.get("trust")
    if trust not in _TRUSTS or trust == "fixed" and rec.get("take_at") is None:
        return None
    if not rec.get("teacher_label") or rec.get("confidence") is None:
        return None
    rate = rec.get("rate") or 1.0
    if not (isinstance(rate, int | float) and 0 < rate <= 1):
        raise ConfigurationError(f"{where}: rate must be in (0, 1], got {rate!r}")
    qid = str(rec["question_id"])
    reader, model = rec.get("reader"), rec.get("model")
    time = str(rec.get("time") or "")
    return _Row(
        f"{qid} ({reader}, {model})",
        qid,
        reader,
        model,
        time,
        (time, str(rec.get("id") or "")),
        "take" if rec.get("band") == "take" else str(rec.get("band")),
        float(rate),
        rec["teacher_label"] == rec.get("engine_label"),
        rec.get("take_at"),
        str(trust),
    )


def _rows(source: Any) -> list[_Row]:
    """Rows from an evidence file, an ``Earned``, an evidence store, a LangGraph store,
    or records (evidence records, their dicts, or audit records)."""
    from agentbranch.policy.earned import Earned
    from agentbranch.policy.evidence import Evidence
    from agentbranch.policy.evidence_store import (
        JsonlEvidenceStore,
        LangGraphEvidenceStore,
        as_store,
    )

    if isinstance(source, str) and source.startswith(_POSTGRES):
        return _database_rows(source)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if _is_sqlite(path):
            return _database_rows(str(path))
        if not path.is_file():
            raise ConfigurationError(
                f"no evidence file at {path}; Earned(store='...jsonl') writes one"
            )
        if not is_evidence_file(path):
            from agentbranch.audit.report import load_records

            return _rows(load_records(path))
        source = JsonlEvidenceStore(path)
    if isinstance(source, Earned):
        source = source.evidence
    try:
        from langgraph.store.base import BaseStore
    except ImportError:  # pragma: no cover - langgraph is a dependency
        BaseStore = ()  # type: ignore[assignment,misc]
    if isinstance(source, BaseStore):
        source = as_store(source)
    if isinstance(source, JsonlEvidenceStore | LangGraphEvidenceStore) or (
        callable(getattr(source, "keys", None)) and callable(getattr(source, "load", None))
    ):
        return [_from_evidence(r) for k in source.keys() for r in source.load(k)]
    if isinstance(source, bytes | Mapping):
        raise ConfigurationError(f"cannot report on {type(source).__name__}")
    rows = []
    for i, rec in enumerate(source):
        if isinstance(rec, Evidence):
            rows.append(_from_evidence(rec))
        elif isinstance(rec, Mapping) and rec.get("schema") == EVIDENCE_SCHEMA:
            try:
                rows.append(_from_evidence(Evidence.model_validate(rec)))
            except ValueError as e:
                raise InvalidFileError(f"record {i} is not an evidence record: {e}") from None
        elif isinstance(rec, Mapping):
            from agentbranch.audit.report import check_record

            row = _from_audit(check_record(rec, f"record {i}"), f"record {i}")
            if row is not None:
                rows.append(row)
        else:
            raise ConfigurationError(
                f"record {i}: expected an evidence or audit record, got {type(rec).__name__}"
            )
    return rows


# -- the report -----------------------------------------------------------------------


def _lower_bound(right: int, n: int, level: float) -> float:
    if n == 0 or right == 0:
        return 0.0
    from scipy.stats import beta

    return float(beta.ppf(1.0 - level, right, n - right + 1))


def _change(was: float | None, now: float | None, trust: str) -> str:
    if now is None:
        return "withdrawn" if trust == "withdrawn" else "closed"
    if was is None:
        return "opened"
    return "lowered" if now < was else "raised"


def _question(rows: list[_Row], precision: float, level: float, windows: int) -> QuestionTrust:
    from agentbranch.policy.thresholds import Drift

    total = sum(1.0 / r.rate for r in rows)
    taken_total = sum(1.0 / r.rate for r in rows if r.band == "take")
    edges = [total * (i + 1) / windows for i in range(windows)]
    timeline: list[TrustPoint] = []
    events: list[TrustEvent] = []
    decisions = slice_w = slice_taken = 0.0
    right = wrong = 0  # audited takes since the band last opened
    drift = Drift(precision)  # the drift test over them
    labels_to_open: int | None = None
    prev: _Row | None = None
    for i, r in enumerate(rows):
        if prev is not None and r.take_at != prev.take_at:
            kind = _change(prev.take_at, r.take_at, r.trust)
            if kind == "withdrawn":
                n = right + wrong
                reason = (
                    f"{right} of {n} audited takes agreed with the teacher since the band "
                    f"opened at {prev.take_at:g}"
                )
            elif kind == "opened":
                reason = f"trust {r.trust} after {i} labels"
            elif kind == "closed":
                reason = f"the band closed (trust {r.trust})"
            else:
                reason = f"{r.trust}: from {prev.take_at:g} to {r.take_at:g}"
            events.append(TrustEvent(kind, decisions, i, r.time, r.take_at, prev.take_at, reason))
            if kind == "opened":
                right = wrong = 0
                drift = Drift(precision)
        elif prev is None and r.take_at is not None:
            events.append(TrustEvent("opened", 0.0, 0, r.time, r.take_at, None, f"trust {r.trust}"))
        if labels_to_open is None and r.trust == "earned" and r.take_at is not None:
            labels_to_open = i
        if r.band == "take":
            right, wrong = right + r.correct, wrong + (not r.correct)
            drift.add(r.correct)
        w = 1.0 / r.rate
        decisions += w
        slice_w += w
        slice_taken += w if r.band == "take" else 0.0
        if decisions >= edges[len(timeline)] - 1e-9 or i == len(rows) - 1:
            timeline.append(
                TrustPoint(decisions, r.time, r.take_at, r.trust, slice_taken / slice_w)
            )
            slice_w = slice_taken = 0.0
        prev = r
    last = rows[-1]
    if taken_total == 0 and any(r.take_at is not None for r in rows):
        # Taken decisions were never audited: they are not in the records at all.
        nan = float("nan")
        timeline = [TrustPoint(p.decisions, p.time, p.take_at, p.trust, nan) for p in timeline]
        taken_total = nan
    n = right + wrong
    band = TakeBand(
        n,
        right,
        right / n if n else float("nan"),
        _lower_bound(right, n, level),
        drift.evalue if n else 1.0,
    )
    return QuestionTrust(
        question_id=last.question_id,
        key=last.group,
        reader=last.reader,
        model=last.model,
        labels=len(rows),
        decisions=total,
        take_at=last.take_at,
        trust=last.trust,
        coverage=taken_total / total if total else 0.0,
        recent_coverage=timeline[-1].coverage if timeline else 0.0,
        labels_to_open=labels_to_open,
        take_band=band,
        timeline=timeline,
        events=events,
    )


def earned_report(
    source: Any, *, precision: float = 0.9, level: float = 0.95, windows: int = 10
) -> EarnedReport:
    """Per question (evidence key): the threshold in force over time, coverage, the take
    band's precision with its bound and drift events (see the module docstring).

    ``source``: an evidence JSON Lines path, a SQLite file or ``postgresql://`` URI of
    the LangGraph store the evidence is in, an ``Earned``, a LangGraph ``BaseStore``
    holding evidence, an evidence store, or an iterable of evidence or audit records."""
    for name, value in (("precision", precision), ("level", level)):
        if not (isinstance(value, int | float) and 0.0 < value < 1.0):
            raise ConfigurationError(f"{name} must be strictly between 0 and 1, got {value!r}")
    if not isinstance(windows, int) or windows < 1:
        raise ConfigurationError(f"windows must be a whole number >= 1, got {windows!r}")
    groups: dict[str, list[_Row]] = {}
    for row in _rows(source):
        groups.setdefault(row.group, []).append(row)
    questions = {
        key: _question(sorted(rows, key=lambda r: r.order), precision, level, windows)
        for key, rows in groups.items()
    }
    from agentbranch.policy.earned import Earned

    if isinstance(source, Earned):
        # The threshold in force now, under this Earned's settings (the records only say
        # what was in force at the latest labelled decision).
        for key, st in source.stored().items():
            if key in questions:
                questions[key] = replace(questions[key], take_at=st.take_at, trust=st.trust)
    return EarnedReport(precision, level, questions)


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
            f"{q.labels} labels standing for {q.decisions:.0f} decisions"
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
