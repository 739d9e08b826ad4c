"""Decision records: the plain dicts a resolved decision becomes (safe in graph state and
checkpoints), the fail-open/fail-closed records of an engine error, what a human reviewer
is shown, and a decision's identity (which teacher labels are labels of the same
decision: ``decision_identity``)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.decisions import Decision
from agentbranch.core.questions import Question
from agentbranch.policy.config import (
    Band,
    DecisionRecord,
    FailClosed,
    FailOpen,
    Policy,
    PolicyArg,
    options_of,
    policy_for,
    question_text,
)
from agentbranch.policy.trust import QuestionKey, Threshold

if TYPE_CHECKING:
    from agentbranch.engine.readers.base import Reader

__all__ = [
    "decision_identity",
    "engine_record",
    "error_record",
    "is_replayed",
    "langgraph_thread",
    "records_for_error",
    "review_payload",
]


#: Every decision record's fields, in order; ``None`` where a record has no value.
_FIELDS = (
    "question_id question type label options probabilities entropy confidence margin "
    "label_mass agreement expected band take_at trust decided_by engine_label goto reader "
    "model reading decision_id latency_s draws fallback error"
).split()


#: The fields an engine record takes from its decision as they are.
_FROM_DECISION = set(
    "question_id type label options probabilities entropy confidence margin label_mass "
    "agreement expected reader model reading latency_s".split()
)


def _record(**fields: Any) -> DecisionRecord:
    record: DecisionRecord = dict.fromkeys(_FIELDS)
    record.update(fields)
    return record


def engine_record(
    decision: Decision,
    question: Question,
    *,
    band: Band,
    draws: int | None = None,
    threshold: Threshold | None = None,
) -> DecisionRecord:
    """The plain-dict record of an engine decision taken as is. ``threshold`` is the
    threshold in force (``take_at`` and ``trust`` in the record); ``decision_id`` is its
    identity, set by the resolver for ``Earned`` policies (``decision_identity``)."""
    return _record(
        **decision.model_dump(include=_FROM_DECISION),
        question=question_text(decision.question_id, question),
        band=band,
        take_at=threshold.take_at if threshold else None,
        trust=threshold.trust if threshold else None,
        decided_by="engine",
        engine_label=decision.label,
        draws=draws,
    )


def error_record(
    qid: str, question: Question, error: BaseException, policy: Policy, reader: Reader
) -> DecisionRecord:
    """The record of a decision the engine failed on, by the policy's ``on_error``."""
    on_error = policy.on_error
    threshold = policy.trust.in_force(QuestionKey(qid, question, reader.name, reader.model))
    return _record(  # what ``on_error`` decides first; the record keeps ``_FIELDS``' order
        band="error",
        error=f"{type(error).__name__}: {error}",
        decided_by="fail_open" if isinstance(on_error, FailOpen) else "fail_closed",
        label=on_error.label if isinstance(on_error, FailOpen) else None,
        goto=on_error.node if isinstance(on_error, FailClosed) else None,
        take_at=threshold.take_at,
        trust=threshold.trust,
        question_id=qid,
        question=question_text(qid, question),
        type=question.type,
        options=options_of(qid, question),
        reader=reader.name,
        model=reader.model,
    )


def records_for_error(
    error: BaseException, questions: Mapping[str, Question], policy: PolicyArg, reader: Reader
) -> dict[str, DecisionRecord]:
    """The fail-open/fail-closed records for ``error``; re-raises it when any question's
    policy does not handle this kind of error."""
    records = {}
    for question_id, q in questions.items():
        p = policy_for(policy, question_id)
        on_error = p.on_error
        if not isinstance(on_error, FailOpen | FailClosed) or not isinstance(
            error, on_error.errors
        ):
            raise error
        records[question_id] = error_record(question_id, q, error, p, reader)
    for rec in records.values():
        logged = {k: rec[k] for k in ("question_id", "decided_by", "label", "goto", "error")}
        telemetry.event(telemetry.logger, logging.WARNING, "agentbranch.decision.error", **logged)
    return records


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


def langgraph_thread() -> str | None:
    """The thread id of the LangGraph run this call is part of (``None`` outside a run,
    or when the run has no thread)."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except Exception:  # noqa: BLE001 - outside a runnable context (RuntimeError) or no langgraph
        return None
    thread = (config.get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


def decision_identity(question_id: str, state_text: str, thread: str | None = None) -> str:
    """The identity of the decision on ``question_id`` about ``state_text`` (the rendered
    state the engine read) in LangGraph thread ``thread``: a retried node, a resumed graph
    or a redelivered message is the same decision, so ``Earned`` counts its teacher label
    once (docs/earned_method.md, "What counts as one label": why neither the node nor its
    task id is part of it)."""
    blob = json.dumps([question_id, thread, state_text], ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def is_replayed(record: dict[str, Any]) -> bool:
    """Whether a decision was replayed from a cassette (its labels are no live evidence)."""
    return str(record.get("reader") or "").startswith("replay:")
