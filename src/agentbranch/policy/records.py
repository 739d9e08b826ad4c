"""Decision records: the plain dicts a resolved decision becomes (safe in graph state and
checkpoints), and what a human reviewer is shown."""

from __future__ import annotations

from typing import Any

from agentbranch.core.decisions import Decision
from agentbranch.core.questions import Question
from agentbranch.policy.config import (
    Band,
    DecisionRecord,
    FailClosed,
    FailOpen,
    Policy,
    options_of,
    question_text,
)
from agentbranch.policy.earned._state import Threshold

__all__ = ["engine_record", "error_record", "review_payload"]


def engine_record(
    decision: Decision,
    question: Question,
    *,
    band: Band,
    draws: int | None = None,
    threshold: Threshold | None = None,
) -> DecisionRecord:
    """The plain-dict record of an engine decision taken as is. ``threshold`` is the
    threshold in force (``take_at`` and ``trust`` in the record); ``reading`` is the
    decision's reading fingerprint and ``decision_id`` its identity, set by the resolver
    for ``Earned`` policies (``agentbranch.policy.earned._identity``)."""
    return {
        "question_id": decision.question_id,
        "question": question_text(decision.question_id, question),
        "type": decision.type,
        "label": decision.label,
        "options": list(decision.options),
        "probabilities": dict(decision.probabilities),
        "entropy": decision.entropy,
        "confidence": decision.confidence,
        "margin": decision.margin,
        "label_mass": decision.label_mass,
        "agreement": decision.agreement,
        "expected": decision.expected,
        "band": band,
        "take_at": threshold.take_at if threshold else None,
        "trust": threshold.trust if threshold else None,
        "decided_by": "engine",
        "engine_label": decision.label,
        "goto": None,
        "reader": decision.reader,
        "model": decision.model,
        "reading": decision.reading,
        "decision_id": None,
        "latency_s": decision.latency_s,
        "draws": draws,
        "fallback": None,
        "error": None,
    }


def error_record(
    qid: str, question: Question, error: BaseException, policy: Policy, reader: Any
) -> DecisionRecord:
    on_error = policy.on_error
    options = options_of(qid, question)
    if policy.earned is not None:
        threshold = policy.earned.threshold(
            qid, question, getattr(reader, "name", None), getattr(reader, "model", None)
        )
    else:
        threshold = Threshold(float(policy.take_at), "fixed")
    qtype = question.type
    rec: DecisionRecord = {
        "question_id": qid,
        "question": question_text(qid, question),
        "type": qtype,
        "label": on_error.label if isinstance(on_error, FailOpen) else None,
        "options": options,
        "probabilities": None,
        "entropy": None,
        "confidence": None,
        "margin": None,
        "label_mass": None,
        "agreement": None,
        "expected": None,
        "band": "error",
        "take_at": threshold.take_at,
        "trust": threshold.trust,
        "decided_by": "fail_open" if isinstance(on_error, FailOpen) else "fail_closed",
        "engine_label": None,
        "goto": on_error.node if isinstance(on_error, FailClosed) else None,
        "reader": getattr(reader, "name", None),
        "model": getattr(reader, "model", None),
        "reading": None,
        "decision_id": None,
        "latency_s": None,
        "draws": None,
        "fallback": None,
        "error": f"{type(error).__name__}: {error}",
    }
    return rec


def review_payload(rec: DecisionRecord) -> dict[str, Any]:
    """What a human reviewer sees (never the raw state)."""
    return {
        "kind": "agentbranch.review",
        "question_id": rec["question_id"],
        "question": rec["question"],
        "options": list(rec["options"]),
        "suggested": rec["engine_label"],
        "probabilities": rec["probabilities"],
        "confidence": rec["confidence"],
    }
