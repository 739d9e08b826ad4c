"""The resolver's hook: queue audits of taken decisions and keep fallback generations.

Runs on the critical path, so it only samples, renders the teacher's prompt for a sampled
decision and queues a job; the teacher call and the sinks run on the audit worker. It
never raises: anything unexpected is logged and the run goes on unchanged.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from agentbranch.policy.auditing.config import Audit
from agentbranch.policy.auditing.sinks import AuditRecord

log = logging.getLogger("agentbranch")

#: Decision-record fields copied into every audit record.
_COPIED = (
    "question_id",
    "question",
    "type",
    "options",
    "probabilities",
    "entropy",
    "confidence",
    "margin",
    "label_mass",
    "agreement",
    "band",
    "decided_by",
    "engine_label",
    "reader",
    "model",
    "draws",
)


def shadow(
    engine: Any,
    questions: Mapping[str, Any],
    policy: Any,
    records: Mapping[str, dict[str, Any]],
    state: Any,
) -> None:
    """Queue the audits and labelled examples ``records`` give rise to."""
    from agentbranch.policy.config import policy_for

    for qid, rec in records.items():
        p = policy_for(policy, qid)
        if p.audit is None:
            continue
        try:
            _one(engine, qid, questions[qid], p, p.audit, rec, state)
        except Exception as e:  # noqa: BLE001 - an audit never fails a run
            log.warning("agentbranch.audit: could not queue %r: %s: %s", qid, type(e).__name__, e)


def _one(
    engine: Any, qid: str, question: Any, policy: Any, audit: Audit, rec: dict, state: Any
) -> None:
    from agentbranch.policy.generation import state_text

    by = rec.get("decided_by")
    fallback = rec.get("fallback") or {}
    if by == "engine" or _earned_needs_label(policy, rec):
        if not audit.sample():
            return
        teacher, instructions = _teacher(policy, audit)
        text = state_text(state)
        base = _base("audit", engine, question, policy, audit, rec, text, rate=audit.rate)
        learn = _learner(policy, qid, question, rec, audit.rate, text)
        audit.submit(lambda: _ask(audit, teacher, instructions, qid, question, text, base, learn))
    elif by == "fallback" and fallback.get("kind") == "generate" and audit.fallback_examples:
        text = state_text(state) if audit.include_state else None
        record = _base("fallback", engine, question, policy, audit, rec, text, rate=1.0)
        record.update(
            teacher_label=rec["label"],
            agree=rec["label"] == rec["engine_label"],
            teacher=fallback.get("model"),
            reply=fallback.get("reply"),
        )
        audit.submit(lambda: audit.write(record))


def _earned_needs_label(policy: Any, rec: dict) -> bool:
    """An ``Earned`` policy without ``Generate``: the audit teacher also samples the
    fallback band (at the audit rate), or nothing below the threshold is ever labelled."""
    from agentbranch.policy.config import Generate

    return (
        policy.earned is not None
        and rec.get("band") == "fallback"
        and rec.get("engine_label") is not None
        and not any(isinstance(f, Generate) for f in policy.fallbacks)
    )


def _learner(
    policy: Any, qid: str, question: Any, rec: dict, rate: float, text: str | None = None
) -> Any:
    """What to do with the teacher's label besides the audit record: evidence for an
    ``Earned`` policy (``None`` otherwise)."""
    earned = policy.earned
    if earned is None:
        return None
    from agentbranch.policy.learning import observe_record

    banded = dict(rec)

    def learn(label: str) -> None:
        observe_record(
            earned,
            qid,
            question,
            banded,
            source="audit",
            teacher_label=label,
            rate=rate,
            state=text,  # learning hook: kept only when the policy learns
        )

    return learn


def _teacher(policy: Any, audit: Audit) -> tuple[Any, str | None]:
    from agentbranch.policy.config import Generate

    if audit.model is not None:
        return audit.model, audit.instructions
    for fb in policy.fallbacks:
        if isinstance(fb, Generate):
            return fb.model, audit.instructions or fb.instructions
    raise AssertionError("Policy checks that an Audit without a model has a Generate fallback")


def _base(
    kind: str,
    engine: Any,
    question: Any,
    policy: Any,
    audit: Audit,
    rec: dict,
    text: str | None,
    *,
    rate: float,
) -> AuditRecord:
    calibration = getattr(engine, "calibration", None)
    temperature = calibration.temperature(rec["question_id"], rec["type"]) if calibration else 1.0
    record: AuditRecord = {
        "kind": kind,
        "id": uuid.uuid4().hex,
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }
    record.update({k: rec.get(k) for k in _COPIED})
    record["options"] = list(rec["options"])
    record["probabilities"] = dict(rec["probabilities"] or {})
    record.update(
        teacher_label=None,
        agree=None,
        teacher=None,
        reply=None,
        rate=rate,
        temperature=temperature,
        take_at=rec.get("take_at"),
        trust=rec.get("trust"),
        spec=question.model_dump(mode="json"),
    )
    if audit.include_state and text is not None:
        record["state"] = text
    return record


def _ask(
    audit: Audit,
    teacher: Any,
    instructions: str | None,
    qid: str,
    question: Any,
    text: str,
    base: AuditRecord,
    learn: Any = None,
) -> None:
    """On the worker: ask the teacher (its normal ``invoke``), validate, record."""
    from agentbranch.policy.config import Generate
    from agentbranch.policy.generation import generation_messages, model_name, parse_label

    messages = generation_messages(Generate(teacher, instructions), qid, question, text)
    reply = teacher.invoke(
        messages, config={"run_name": "agentbranch.audit", "tags": ["agentbranch:audit"]}
    )
    label = parse_label(reply, base["options"], source="audit teacher")
    base.update(
        teacher_label=label,
        agree=label == base["engine_label"],
        teacher=model_name(teacher),
        reply=str(getattr(reply, "content", reply))[:500],
    )
    audit.write(base)
    if learn is not None:
        learn(label)
