"""Decision records: the plain dicts a resolved decision becomes (safe in graph state and
checkpoints), what a human reviewer is shown, and a decision's identity (which teacher
labels are labels of the same decision: ``decision_identity``)."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

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
from agentbranch.policy.trust import QuestionKey, Threshold

if TYPE_CHECKING:
    from agentbranch.engine.readers.base import Reader

__all__ = [
    "decision_identity",
    "engine_record",
    "error_record",
    "is_replayed",
    "langgraph_thread",
    "review_payload",
]


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
    for ``Earned`` policies (``decision_identity``)."""
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
    qid: str, question: Question, error: BaseException, policy: Policy, reader: Reader
) -> DecisionRecord:
    on_error = policy.on_error
    options = options_of(qid, question)
    threshold = policy.trust.in_force(QuestionKey(qid, question, reader.name, reader.model))
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
        "reader": reader.name,
        "model": reader.model,
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
    state the engine read) in LangGraph thread ``thread``.

    A node retried after a later failure, a graph resumed or re-invoked on the same thread,
    a queue that delivers a message twice: each runs the same decision again, and its
    teacher label would be evidence again. ``Earned`` counts one label per decision, so
    every decision an ``Earned`` policy makes carries an identity (``decision_id`` in its
    record, ``decision`` in its evidence):

        sha256(question id, LangGraph thread id (when the run has one), rendered state)

    * Inside a LangGraph run with a checkpointer, the thread (``configurable.thread_id``)
      scopes it: within one thread the same question asked of the same rendered state is
      one decision, however often the node runs (retries, resumes, replays and forks keep
      the thread; a re-invocation with the same input too). The node and its task id are
      deliberately not part of it: a task id changes on every re-invocation, and two nodes
      asking the same question of the same text get the same confidence and the same
      teacher answer, which is one observation, not two.
    * Without a thread (no checkpointer, or outside LangGraph), the question and the
      rendered state alone: every repeat of the same text counts once.

    Genuine repeats of the same text (another user in another thread sending the same
    words) count again across threads, because the guarantee is about the decisions the
    service takes, where a frequent text weighs as often as it comes. Within one thread, or
    without threads, a repeat cannot be told from a redelivery, so it counts once: the
    label is not lost, it is not counted twice (a duplicate would make 25 labels look like
    50 and open trust 25 do not show). The price is that without threads the test is about
    distinct texts: a text that comes often and is often wrong weighs once.
    """
    blob = json.dumps([question_id, thread, state_text], ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def is_replayed(record: dict[str, Any]) -> bool:
    """Whether a decision was replayed from a cassette (its labels are no live evidence)."""
    return str(record.get("reader") or "").startswith("replay:")
