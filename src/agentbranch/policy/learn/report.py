"""What a store says about learning, per question: labels, the versions of its read
(in the order they appeared), the one deciding last, and the read's accuracy against the
teacher over time — for ``agentbranch audit report`` and the diagram.

Works from the evidence records alone (no question objects): a record with ``state`` is
a label of the version that decided, one without it (``take_at`` null) a trial's shadow
read; a question's versions are its evidence keys in the order they first appear.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Version:
    key: str
    index: int  #: order of first appearance among the question's keys (0: as written)
    deciding_labels: int = 0  #: labels it got while deciding
    trial_reads: int = 0  #: shadow reads while on trial


@dataclass
class Learning:
    question_id: str
    labels: int = 0  #: labels with a stored state (what the question learns from)
    versions: list[Version] = field(default_factory=list)
    last_deciding: int | None = None  #: version index of the last labelled decision
    #: accuracy of the deciding read against the teacher, per window of ``window`` labels
    accuracy: list[float] = field(default_factory=list)


def summarize(records: Iterable[Any], window: int = 50) -> dict[str, Learning]:
    """Per question id, from evidence records (any order; replayed by ``order``)."""
    out: dict[str, Learning] = {}
    hits: dict[str, list[bool]] = {}
    keys: dict[str, dict[str, Version]] = {}
    for rec in sorted(records, key=lambda r: r.order):
        q = out.setdefault(rec.question_id, Learning(rec.question_id))
        known = keys.setdefault(rec.question_id, {})
        if rec.key not in known:
            known[rec.key] = Version(rec.key, len(known))
            q.versions.append(known[rec.key])
        v = known[rec.key]
        if getattr(rec, "state", None) is not None:
            q.labels += 1
            v.deciding_labels += 1
            q.last_deciding = v.index
            hits.setdefault(rec.question_id, []).append(rec.correct)
        elif rec.take_at is None and rec.band in ("fallback", "review") and v.index > 0:
            v.trial_reads += 1
    for qid, h in hits.items():
        out[qid].accuracy = [
            round(sum(h[i : i + window]) / len(h[i : i + window]), 3)
            for i in range(0, len(h), window)
        ]
    return {qid: q for qid, q in out.items() if q.labels}


def lines(summary: dict[str, Learning]) -> list[str]:
    """The learning section of a text report."""
    out = []
    for qid, q in sorted(summary.items()):
        out.append(
            f"{qid}: {q.labels} labels learned from, {len(q.versions)} versions, "
            f"version {q.last_deciding} deciding; read accuracy against the teacher per "
            f"50 labels: {', '.join(f'{a:.2f}' for a in q.accuracy)}"
        )
    return out
