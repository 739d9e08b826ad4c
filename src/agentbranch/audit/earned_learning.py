"""The learning section of the earned-trust report (``Earned(..., learn=True)``): per
question, its versions (in force, on trial), the read's accuracy against the teacher
over time, the coverage it gave and the threshold in force (``learning``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentbranch.audit.earned_sources import EvidenceRow

#: Equal-width bins of the calibration error of the probability reported.
ECE_BINS = 10


@dataclass(frozen=True)
class VersionLearning:
    """One version of a question's read."""

    version: int
    key: str  #: its evidence key
    fitted_on: int  #: labels it was fitted on (0: the question as written)
    deciding_labels: int  #: labels it got while deciding
    deciding_accuracy: float  #: share of them its read agreed with (nan: none)
    trial_reads: int  #: shadow reads while on trial
    trial_accuracy: float  #: share of them that agreed with the teacher (nan: none)
    take_at: float | None  #: its threshold now (recomputed at its share)
    trust: str
    #: the level its looks test at: its share of 1 - level, less its anytime-valid
    #: test's error when it has one (``anytime_alpha``)
    level: float | None
    why: str | None = None
    #: where its anytime-valid test's walks start (``Evidence.entries``; ``None``: it has
    #: none, its looks test at its whole share) and that test's error
    entries: list[float] | None = None
    anytime_alpha: float | None = None
    #: share of the decisions its band holds (``TrustState.band_share``; ``None``: none)
    band_share: float | None = None


@dataclass(frozen=True)
class AccuracyPoint:
    """One block of labels of the deciding read, in order."""

    labels: int  #: labels up to the end of the block
    accuracy: float  #: share of the block's deciding reads the teacher agreed with
    versions: list[int]  #: the versions that decided in it
    coverage: float  #: share of the decisions the block stands for that were taken


@dataclass(frozen=True)
class QuestionLearning:
    question_id: str
    reader: str | None
    model: str | None
    labels: int  #: labels learned from (each with its labelled state)
    in_force: int  #: the version in force
    on_trial: list[int]  #: versions on trial (fed every label beside it)
    versions: list[VersionLearning] = field(default_factory=list)
    curve: list[AccuracyPoint] = field(default_factory=list)
    coverage: float = float("nan")  #: share of all decisions taken (nan: unknown)
    recent_coverage: float = float("nan")  #: in the latest block
    take_at: float | None = None  #: the version in force's threshold
    trust: str = "learning"
    why: str | None = None
    #: ``[version, labels before it]``: each time the deciding version changed
    began: list[list[int]] = field(default_factory=list)
    #: the expected calibration error of the ``probability`` reported with the labelled
    #: decisions (``ECE_BINS`` equal-width bins, weights ``1/rate``; nan: none reported)
    probability_ece: float = float("nan")
    #: labelled decisions it is measured on, and the share reported by a measured map
    probability_labels: int = 0
    probability_mapped: float = float("nan")


def _reported(rows: Sequence[EvidenceRow]) -> list[tuple[float, bool, float, bool]]:
    """``(probability reported, right, weight, by a map)`` for each labelled decision
    that recorded its read's probability: each version's records replayed in order
    through its probability fit, each label once, scored before it is counted."""
    from agentbranch.policy.earned.learn.probability import ProbabilityFit, apply

    fits: dict[str, ProbabilityFit] = {}
    seen: set[tuple[str, str]] = set()
    out = []
    for r in rows:
        rec = r.record
        if rec.probability is None or (r.group, rec.decision or rec.id) in seen:
            continue
        seen.add((r.group, rec.decision or rec.id))
        fit = fits.setdefault(r.group, ProbabilityFit())
        if rec.state is not None:  # a decision's own label (not a trial read)
            mapped = fit.in_force
            said = rec.probability if mapped is None else apply(mapped, rec.confidence)
            out.append((said, rec.correct, 1.0 / rec.rate, mapped is not None))
        fit.add(rec.confidence, rec.probability, rec.correct, 1.0 / rec.rate)
    return out


def _ece(reported: Sequence[tuple[float, bool, float, bool]]) -> float:
    total = sum(w for _, _, w, _ in reported)
    if not total:
        return float("nan")
    bins: dict[int, list[float]] = {}
    for p, right, w, _ in reported:
        b = bins.setdefault(min(int(p * ECE_BINS), ECE_BINS - 1), [0.0, 0.0])
        b[0], b[1] = b[0] + w * p, b[1] + (w if right else 0.0)
    return sum(abs(said - right) for said, right in bins.values()) / total


def _share(rows: Sequence[EvidenceRow]) -> float:
    return sum(r.correct for r in rows) / len(rows) if rows else float("nan")


def _coverage(rows: Sequence[EvidenceRow], audited: bool) -> float:
    total = sum(1.0 / r.rate for r in rows)
    if not total or not audited:
        return float("nan")
    return sum(1.0 / r.rate for r in rows if r.band == "take") / total


def _question(rows: list[EvidenceRow], reports: Mapping[str, Any]) -> QuestionLearning:
    from agentbranch.policy.earned.learn.ladder import Ladder, Rung, refit_at
    from agentbranch.policy.earned.learn.stored import recorded_anytime

    rows.sort(key=lambda r: r.order)
    # a record with its labelled state is a label of the version that decided
    deciding = [r for r in rows if r.record.state is not None]
    by_version: dict[int, list[EvidenceRow]] = {}
    for r in rows:
        by_version.setdefault(r.record.version, []).append(r)
    versions = []
    for j, mine in sorted(by_version.items()):
        q = reports.get(mine[-1].group)
        level = q.target.level if q and q.target.origin == "policy" else None
        own = [r.record for r in mine if r.group == mine[-1].group]
        anytime = None if level is None else recorded_anytime(own, level)
        labels = [r for r in mine if r.record.state is not None]
        # a version's reads without a state are trial reads (version 0 is never on trial)
        trials = [r for r in mine if r.record.state is None] if j > 0 else []
        versions.append(
            VersionLearning(
                version=j,
                key=mine[-1].group,
                fitted_on=0 if j == 0 else refit_at(j),
                deciding_labels=len(labels),
                deciding_accuracy=_share(labels),
                trial_reads=len(trials),
                trial_accuracy=_share(trials),
                take_at=None if q is None else q.take_at,
                trust="learning" if q is None else q.trust,
                level=level,
                why=None if q is None else q.why,
                entries=None if anytime is None else list(anytime[0]),
                anytime_alpha=None if anytime is None else anytime[1],
                band_share=None if q is None else q.band_share,
            )
        )
    # The version in force: the ladder's own rule (the newest that decided with a band
    # open, or a newer one fed beside it that holds a threshold now: ``Ladder.adopt``).
    ladder = Ladder()
    known = {v.version: v for v in versions}
    ladder.rungs = [Rung(j, 0 if j == 0 else refit_at(j)) for j in range(max(known) + 1)]
    opened = [r for r in deciding if r.record.take_at is not None]
    ladder.in_force = opened[-1].record.version if opened else 0
    holds = [r.index in known and known[r.index].take_at is not None for r in ladder.fed]
    shares = [known[r.index].band_share if r.index in known else None for r in ladder.fed]
    ladder.adopt(holds, shares)
    reads = ladder.deciding
    on_trial = [r.index for r in ladder.fed if r is not reads and r.index in known]
    audited = any(r.band == "take" for r in deciding) or all(r.take_at is None for r in deciding)
    block = max(10, math.ceil(len(deciding) / 10))  # 10 points, at least 10 labels each
    curve = []
    for i in range(0, len(deciding), block):
        part = deciding[i : i + block]
        curve.append(
            AccuracyPoint(
                labels=i + len(part),
                accuracy=_share(part),
                versions=sorted({r.record.version for r in part}),
                coverage=_coverage(part, audited),
            )
        )
    # Each time the deciding version changes (a version may decide again later).
    by = [r.record.version for r in deciding]
    began = [[j, i] for i, j in enumerate(by) if i == 0 or by[i - 1] != j]
    now = known.get(reads.index)
    reported = _reported(rows)
    return QuestionLearning(
        question_id=rows[-1].question_id,
        reader=rows[-1].reader,
        model=rows[-1].model,
        labels=len(deciding),
        in_force=reads.index,
        on_trial=on_trial,
        versions=versions,
        curve=curve,
        coverage=_coverage(deciding, audited),
        recent_coverage=curve[-1].coverage if curve else float("nan"),
        take_at=None if now is None else now.take_at,
        trust="learning" if now is None else now.trust,
        why=None if now is None else now.why,
        began=began,
        probability_ece=_ece(reported),
        probability_labels=len(reported),
        probability_mapped=(
            sum(m for *_, m in reported) / len(reported) if reported else float("nan")
        ),
    )


def learning(groups: Mapping[str, list[EvidenceRow]], reports: Mapping[str, Any]) -> dict:
    """Per learning question (``"id (reader, model)"``), its ``QuestionLearning``, from
    the report's rows by evidence key and its ``QuestionTrust`` per key (``reports``);
    empty when no record is a learning policy's. Each version's threshold, trust and why
    are the report's own for its evidence key (``Evidence.version`` names the version)."""
    by_question: dict[tuple, list[EvidenceRow]] = {}
    for rows in groups.values():
        for r in rows:
            if r.record is not None and r.record.version is not None:
                by_question.setdefault((r.question_id, r.reader, r.model), []).append(r)
    return {
        f"{question_id} ({reader}, {model})": _question(rows, reports)
        for (question_id, reader, model), rows in sorted(
            by_question.items(), key=lambda kv: str(kv[0])
        )
    }


__all__ = [
    "AccuracyPoint",
    "ECE_BINS",
    "QuestionLearning",
    "VersionLearning",
    "learning",
]
