"""The audit report: how often the engine's taken decisions agree with the teacher
(``audit_report``; what each figure means: docs/audit.md, "Read the report").
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

# load_records stays importable from here.
from agentbranch.calibration.diagram import check_bins
from agentbranch.core.audit_records import check_records, load_records  # noqa: F401
from agentbranch.core.errors import ConfigurationError

Record = Mapping[str, Any]


# -- statistics ---------------------------------------------------------------------


def wilson(hits: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``hits / n`` (``(0, 1)`` when n = 0).
    ``n`` may be an effective (non-integer) sample size."""
    if n <= 0:
        return 0.0, 1.0
    p = hits / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def audits_needed(precision: float, target: float, z: float = 1.96) -> int | None:
    """The smallest sample size at which an observed ``precision`` has a Wilson lower
    bound ≥ ``target``; ``None`` when ``precision <= target`` (no number of audits
    shows that it reaches the target)."""
    if precision <= target:
        return None

    def ok(n: int) -> bool:
        return wilson(precision * n, n, z)[0] >= target

    hi = 1
    while not ok(hi):
        hi *= 2
    lo = hi // 2  # not enough (or 0): the answer is in (lo, hi]
    return lo + 1 + bisect.bisect_left(range(lo + 1, hi + 1), True, key=ok)


# -- report -------------------------------------------------------------------------


@dataclass(frozen=True)
class Precision:
    """A (weighted) share of agreement with its Wilson interval."""

    precision: float  # nan when n = 0
    low: float
    high: float
    n: int  # records counted
    n_effective: float  # Kish's effective sample size (= n when unweighted)


@dataclass(frozen=True)
class ConfidenceBin:
    low: float
    high: float
    n: int
    agreement: float  # weighted; nan when empty


@dataclass(frozen=True)
class TakeAt:
    """Thresholds on confidence for a target precision (see ``audit_report``)."""

    target_precision: float
    take_at: float | None  # lowest threshold known (lower bound) to reach the target
    estimate: float | None  # lowest threshold whose point estimate reaches it
    at_estimate: Precision | None  # precision of the decisions kept at ``estimate``
    coverage: float  # share of the audited bands' traffic kept at ``estimate``
    more_audits: int | None  # records more to know ``estimate`` if it holds (0: known; None: never)


@dataclass(frozen=True)
class QuestionAudit:
    question_id: str
    audits: int  # kind="audit" records (the take band's: ``take_band.n``)
    fallback_examples: int  # kind="fallback" records
    current_take_at: float | None  # the policy's take_at in the latest record
    take_band: Precision  # the audited taken decisions
    bins: list[ConfidenceBin]
    threshold: TakeAt


@dataclass(frozen=True)
class AuditReport:
    target_precision: float
    level: float
    questions: dict[str, QuestionAudit]

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe (NaN becomes ``None``)."""
        return json_safe(asdict(self))


def json_safe(obj: Any) -> Any:
    """``obj`` with NaN and infinities as ``None`` and tuples as lists: strict JSON
    (``json.dumps(..., allow_nan=False)``) that any parser reads."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj


def _weight(rec: Record) -> float:
    return 1.0 / float(rec["rate"]) if rec["kind"] == "audit" else 1.0


def _from_sums(n: int, w: float, w2: float, hits: float, z: float) -> Precision:
    if n == 0 or w <= 0:
        return Precision(float("nan"), 0.0, 1.0, 0, 0.0)
    n_eff = w * w / w2
    p = hits / w
    low, high = wilson(p * n_eff, n_eff, z)
    return Precision(p, low, high, n, n_eff)


def _take_at(items: Sequence[tuple[float, bool, float]], target: float, z: float) -> TakeAt:
    ranked = sorted(items, key=lambda x: -x[0])
    total_w = sum(x[2] for x in ranked)
    known = estimate = None
    at_estimate: Precision | None = None
    k_estimate = 0
    w = w2 = hits = 0.0
    for k, (conf, agree, weight) in enumerate(ranked, 1):
        w, w2, hits = w + weight, w2 + weight * weight, hits + (weight if agree else 0.0)
        if k < len(ranked) and ranked[k][0] == conf:
            continue  # a threshold keeps every tie
        prec = _from_sums(k, w, w2, hits, z)
        if prec.precision >= target:
            estimate, at_estimate, k_estimate = conf, prec, k
        if prec.low >= target:
            known = conf
    if estimate is None or at_estimate is None:
        return TakeAt(target, known, None, None, 0.0, None)
    coverage = sum(x[2] for x in ranked[:k_estimate]) / total_w
    known_at = known is not None and known <= estimate
    needed = 0 if known_at else audits_needed(at_estimate.precision, target, z)
    more: int | None = None
    if needed is not None:  # at the current mix, a share k/len of new records lands in it
        more = math.ceil(max(0.0, needed - at_estimate.n_effective) * len(ranked) / k_estimate)
    return TakeAt(target, known, estimate, at_estimate, coverage, more)


def _bins(items: Sequence[tuple[float, bool, float]], bins: int) -> list[ConfidenceBin]:
    groups: list[list[tuple[float, bool, float]]] = [[] for _ in range(bins)]
    for it in items:
        groups[min(bins - 1, int(it[0] * bins))].append(it)
    out = []
    for i, g in enumerate(groups):
        w = sum(x[2] for x in g)
        agreement = sum(x[2] for x in g if x[1]) / w if w else float("nan")
        out.append(ConfidenceBin(i / bins, (i + 1) / bins, len(g), agreement))
    return out


def audit_report(
    records: Iterable[Record],
    *,
    target_precision: float = 0.9,
    level: float = 0.95,
    bins: int = 10,
) -> AuditReport:
    """Per question, from audit records: the take band's precision with a Wilson
    interval, agreement by confidence bin, and the ``take_at`` reaching
    ``target_precision`` (``TakeAt``; docs/audit.md). Each record is weighted by
    ``1/rate`` (intervals use Kish's effective sample size).
    """
    if not (isinstance(target_precision, int | float) and 0.0 < target_precision <= 1.0):
        raise ConfigurationError(f"target_precision must be in (0, 1], got {target_precision}")
    check_bins(bins)
    if not 0.0 < level < 1.0:
        raise ConfigurationError(f"the confidence level must be in (0, 1), got {level}")
    z = NormalDist().inv_cdf(0.5 + level / 2)  # two-sided: 0.95 -> 1.96
    by_q: dict[str, list[Record]] = defaultdict(list)
    for rec in check_records(records):
        by_q[rec["question_id"]].append(rec)
    questions: dict[str, QuestionAudit] = {}
    for question_id, recs in by_q.items():
        # (the schema guarantees a confidence and both labels)
        items = [
            (float(r["confidence"]), r["teacher_label"] == r["engine_label"], _weight(r))
            for r in recs
        ]
        # the take band's audits, each counted once (unweighted)
        agreed = [
            agree
            for (_, agree, _), r in zip(items, recs)
            if r["kind"] == "audit" and r.get("band") == "take"
        ]
        n = len(agreed)
        questions[question_id] = QuestionAudit(
            question_id=question_id,
            audits=sum(r["kind"] == "audit" for r in recs),
            fallback_examples=sum(r["kind"] == "fallback" for r in recs),
            current_take_at=recs[-1].get("take_at"),
            take_band=_from_sums(n, n, n, sum(agreed), z),
            bins=_bins(items, bins),
            threshold=_take_at(items, target_precision, z),
        )
    return AuditReport(target_precision, level, questions)


__all__ = [
    "AuditReport",
    "ConfidenceBin",
    "Precision",
    "QuestionAudit",
    "Record",
    "TakeAt",
    "audit_report",
    "audits_needed",
    "json_safe",
    "wilson",
]
