"""The earned-trust report: per question, the threshold in force, why, what the audits
say about it since, its coverage over time and its events (``earned_render`` shows it)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from agentbranch.audit import earned_now
from agentbranch.audit.earned_learning import learning
from agentbranch.audit.earned_sources import EvidenceRow, evidence_rows
from agentbranch.audit.estimates import DecisionsEstimate, decisions_estimate
from agentbranch.audit.report import json_safe
from agentbranch.core.errors import ConfigurationError
from agentbranch.policy.earned import DriftState, Earned, labels_lost


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
    #: in force: what the policy computes from the evidence now (``recomputed``), else
    #: (audit records) what was in force when the latest labelled decision was made
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
    #: the policy's precision and level (``target.origin``: where they come from)
    target: earned_now.Target = field(kw_only=True)
    #: in force when the latest labelled decision was made (the records say so)
    recorded_take_at: float | None = None
    recorded_trust: str | None = None
    #: ``take_at``/``trust`` were recomputed from the evidence (not just recorded)
    recomputed: bool = False
    why: str | None = None  #: the look (or withdrawal) that set the threshold in force
    epoch_labels: int | None = None  #: labels since learning last (re)started
    next_look_at: int | None = None  #: labels at which the next look runs (not earned)
    suspended: bool | None = None  #: a live ``Earned``'s audits stopped arriving
    meaning: str | None = None  #: one sentence for a take_at well below the precision
    by_source: dict[str, int] = field(default_factory=dict)  #: labels per source
    what_if: earned_now.WhatIf | None = None  #: the precision asked of the report
    #: labelled decisions made with the band closed although the evidence had it open
    #: (the deciding process suspended it: its audits stopped arriving)
    closed_since: int = 0
    #: ``decisions`` as the estimate it is (each audited take stands for ``1/rate``),
    #: with its interval (``agentbranch.audit.estimates``)
    decisions_estimate: DecisionsEstimate = field(kw_only=True)
    #: share of the decisions the band in force holds, as the epoch's labels estimate it
    #: (``TrustState.band_share``; ``None``: nothing taken, or not recomputed)
    band_share: float | None = None


@dataclass(frozen=True)
class EarnedReport:
    """``precision``/``level``: the target reported against (the policy's own when the
    records say it, ``target`` per question); ``asked``: a precision asked of the
    report, shown as a what if."""

    precision: float
    level: float
    questions: dict[str, QuestionTrust]
    asked: float | None = None
    #: per learning question (``Earned(learn=True)``): its versions, the one in force,
    #: the read's accuracy against the teacher over time (``earned_learning``); empty
    #: (and absent from ``as_dict``) for a store without learning
    learning: dict[str, Any] = field(default_factory=dict)
    #: labels this process could not store (a report of a live ``Earned``: the store
    #: never saw them); ``None`` (and absent from ``as_dict``) when the report cannot know
    labels_lost: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN and infinities become ``None``: strict JSON)."""
        out = asdict(self)
        if not out["learning"]:
            del out["learning"]
        if out["labels_lost"] is None:
            del out["labels_lost"]
        return json_safe(out)


# -- the report -----------------------------------------------------------------------


def _question(
    rows: list[EvidenceRow], tgt: earned_now.Target, windows: int, asked: tuple | None
) -> QuestionTrust:
    from scipy.stats import beta

    precision, level = tgt.precision, tgt.level
    total = sum(1.0 / r.rate for r in rows)
    taken_total = sum(1.0 / r.rate for r in rows if r.band == "take")
    edges = [total * (i + 1) / windows for i in range(windows)]
    timeline: list[TrustPoint] = []
    events: list[TrustEvent] = []
    decisions = slice_w = slice_taken = 0.0
    right = n = 0  # audited takes since the band last opened: right, all
    drift = DriftState(precision)  # the drift test over them
    labels_to_open: int | None = None
    prev: EvidenceRow | None = None
    for i, r in enumerate(rows):
        if prev is not None and r.take_at != prev.take_at:
            if r.take_at is None and r.trust == "withdrawn":
                kind = "withdrawn"
                reason = (
                    f"{right} of {n} audited takes agreed with the teacher since the band "
                    f"opened at {prev.take_at:g}"
                )
            elif r.take_at is None:
                kind, reason = "closed", f"the band closed (trust {r.trust})"
                if r.trust == "learning" and prev.trust in ("earned", "fixed"):
                    reason += (
                        " while the evidence had it open: the deciding process suspended "
                        "it because its audits stopped arriving (see its WARNING log), or "
                        "had not re-read the store yet"
                    )
            elif prev.take_at is None:
                kind, reason = "opened", f"trust {r.trust} after {i} labels"
                right = n = 0
                drift = DriftState(precision)
            else:
                kind = "lowered" if r.take_at < prev.take_at else "raised"
                reason = f"{r.trust}: from {prev.take_at:g} to {r.take_at:g}"
            events.append(TrustEvent(kind, decisions, i, r.time, r.take_at, prev.take_at, reason))
        elif prev is None and r.take_at is not None:
            events.append(TrustEvent("opened", 0.0, 0, r.time, r.take_at, None, f"trust {r.trust}"))
        if labels_to_open is None and r.trust == "earned" and r.take_at is not None:
            labels_to_open = i
        if r.band == "take":
            right, n = right + r.correct, n + 1
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
        timeline = [replace(p, coverage=nan) for p in timeline]
        taken_total = nan
    band = TakeBand(
        n,
        right,
        right / n if n else float("nan"),
        float(beta.ppf(1.0 - level, right, n - right + 1)) if right else 0.0,
        drift.evalue,  # (1.0, as it starts, while n = 0)
    )
    now = earned_now.recompute(rows, tgt)
    take_at = last.take_at if now is None else now.take_at
    closed_since = 0
    if now is not None and now.opened_at is not None:
        closed_since = sum(r.take_at is None for r in rows[now.opened_at + 1 :])
    what_if = None
    if asked is not None and tgt.origin == "policy" and asked != (precision, level):
        what_if = earned_now.what_if(rows, tgt, *asked)
    return QuestionTrust(
        question_id=last.question_id,
        key=last.group,
        reader=last.reader,
        model=last.model,
        labels=len(rows),
        decisions=total,
        decisions_estimate=decisions_estimate([1.0 / r.rate for r in rows]),
        take_at=take_at,
        trust=last.trust if now is None else now.trust,
        coverage=taken_total / total,
        recent_coverage=timeline[-1].coverage,
        labels_to_open=labels_to_open,
        take_band=band,
        timeline=timeline,
        events=events,
        target=tgt,
        recorded_take_at=last.take_at,
        recorded_trust=last.trust,
        recomputed=now is not None,
        why=None if now is None else now.why,
        epoch_labels=None if now is None else now.labels,
        next_look_at=None if now is None else now.next_look_at,
        meaning=earned_now.meaning(take_at, precision, rows),
        by_source=dict(Counter(r.source or "unknown" for r in rows)),
        what_if=what_if,
        closed_since=closed_since,
        band_share=None if now is None else now.band_share,
    )


def _looks_level(level: float, rows: list[EvidenceRow]) -> float | None:
    """The level the looks of the learned version ``rows`` are evidence of test at, for a
    policy at ``level`` (``learn.ladder.version_alphas``); ``None`` when the records name
    no version."""
    from agentbranch.policy.earned.learn.ladder import version_alphas
    from agentbranch.policy.earned.learn.stored import key_entries, key_version

    records = [r.record for r in rows if r.record is not None]
    j = key_version(records)
    if j is None:
        return None
    return 1.0 - version_alphas(level, j, key_entries(records))[0]


def earned_report(
    source: Any,
    *,
    precision: float | None = None,
    level: float | None = None,
    windows: int = 10,
) -> EarnedReport:
    """Per question (evidence key): the threshold in force and why, what the audits say
    about it since, coverage over time (``windows`` slices) and events. What each figure
    means: docs/earned_method.md, "The report in detail".

    ``source``: an evidence JSON Lines path, a SQLite file or ``postgresql://`` URI of
    the LangGraph store the evidence is in, an ``Earned``, a LangGraph ``BaseStore``
    holding evidence, an evidence store, or an iterable of evidence or audit records.
    ``precision``/``level``: the policy's own are read from the records; a precision
    given here is reported as a *what if* beside them (and used as the target only for
    records that do not say theirs).
    """
    for name, value in (("precision", precision), ("level", level)):
        if value is not None and not (
            isinstance(value, int | float) and not isinstance(value, bool) and 0.0 < value < 1.0
        ):
            raise ConfigurationError(f"{name} must be strictly between 0 and 1, got {value!r}")
    if not isinstance(windows, int) or windows < 1:
        raise ConfigurationError(f"windows must be a whole number >= 1, got {windows!r}")
    groups: dict[str, list[EvidenceRow]] = {}
    for row in evidence_rows(source):
        groups.setdefault(row.group, []).append(row)
    asked = None if precision is None else (float(precision), float(level or 0.95))
    questions = {}
    for key, rows in groups.items():
        rows.sort(key=lambda r: r.order)
        # Levels at the share of the error of the learned version the rows are evidence of.
        if isinstance(source, Earned):
            own = dict(source.settings)
            looks = _looks_level(source.level, rows) if source.learn else None
            if looks is not None:  # (its drift test runs at the policy's level)
                own.update(level=looks, drift_level=source.level)
            tgt = earned_now.Target(source.precision, own["level"], "policy", own)
        else:
            tgt = earned_now.target(rows, precision, level)
        at = None if asked is None else (asked[0], _looks_level(asked[1], rows) or asked[1])
        questions[key] = _question(rows, tgt, windows, at)
    if isinstance(source, Earned):
        # The threshold in force now: this Earned's own state, closed while its audits
        # are missing (what its ``threshold`` answers).
        for key, st in source.stored().items():
            if key in questions:
                q = questions[key]
                now = earned_now.from_state(st, source)
                held = source.audit_health.suspended(q.question_id, q.reader, q.model)
                take_at = None if held else st.take_at
                questions[key] = replace(
                    q,
                    take_at=take_at,
                    trust="learning" if held and st.take_at is not None else st.trust,
                    recomputed=True,
                    why=now.why,
                    epoch_labels=now.labels,
                    next_look_at=now.next_look_at,
                    suspended=held and st.take_at is not None,
                    meaning=earned_now.meaning(take_at, source.precision, groups[key]),
                )
    learned = learning(groups, questions)
    # Learned versions in order (v0, v1, ...), each question's together.
    versions = {v.key: v.version for lq in learned.values() for v in lq.versions}
    questions = dict(
        sorted(
            questions.items(),
            key=lambda kv: (kv[1].question_id, str(kv[1].reader), versions.get(kv[0], -1)),
        )
    )
    first = next(iter(questions.values()), None)  # (every question has its target)
    default = asked or (earned_now.DEFAULT_PRECISION, earned_now.DEFAULT_LEVEL)
    shown = default if first is None else (first.target.precision, first.target.level)
    lost = labels_lost(source) if isinstance(source, Earned) else None  # the process's own
    return EarnedReport(*shown, questions, None if asked is None else asked[0], learned, lost)


__all__ = [
    "EarnedReport",
    "QuestionTrust",
    "TakeBand",
    "TrustEvent",
    "TrustPoint",
    "earned_report",
]
