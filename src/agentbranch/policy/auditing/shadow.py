"""The resolver's hook: queue audits of taken decisions and keep fallback generations.
On the critical path it only samples, renders the teacher's prompt and queues a job; it
never raises. Each due audit is reported to the policy's trust source (``_Outcome``)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.teacher_calls import TeacherCall, teacher_calls_of
from agentbranch.policy.auditing.config import Audit
from agentbranch.policy.auditing.worker import AuditRecord, AuditTimeout, TeacherStuck
from agentbranch.policy.trust import QuestionKey, TeacherLabel

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

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
    "decision_id",  # the decision's identity under an ``Earned`` policy (else None)
    "take_at",
    "trust",
)
#: The teacher's answer in an audit record (see ``_answered``).
_ANSWER = ("teacher_label", "agree", "teacher", "reply")


def shadow(
    engine: Engine,
    questions: Mapping[str, Any],
    policy: Any,
    records: Mapping[str, dict[str, Any]],
    state: Any,
) -> None:
    """Queue the audits and labelled examples ``records`` give rise to."""
    from agentbranch.policy.config import policy_for

    for question_id, rec in records.items():
        p = policy_for(policy, question_id)
        if p.audit is None:
            continue
        try:
            _one(engine, question_id, questions[question_id], p, rec, state)
        except Exception as e:  # noqa: BLE001 - an audit never fails a run
            log.warning(
                "agentbranch.audit: could not queue %r: %s: %s", question_id, type(e).__name__, e
            )


def _one(
    engine: Engine, question_id: str, question: Any, policy: Any, rec: dict, state: Any
) -> None:
    from agentbranch.policy.generation import model_name, state_text

    audit: Audit = policy.audit
    by = rec.get("decided_by")
    fallback = rec.get("fallback") or {}
    audited = by == "engine" or _earned_needs_label(policy, rec)
    if audited or _probe(policy, question_id, question, rec):
        calls = teacher_calls_of(engine)
        if calls is None and not audit.sample():
            return
        text = state_text(state)
        call = _call(policy, audit, question_id, question, text, rec["options"])
        # Under a replay cassette the draw is the recording's: a replay audits the
        # decisions the recording audited.
        if calls is not None and not audit.sample(calls.audited(call, text, audit.draw)):
            return
        base = _base("audit", engine, question, policy, rec, text, audit.rate)
        banded = dict(rec)
        health = _Outcome(policy, question_id, rec, probe=not audited)

        def ask() -> None:
            """On the worker: ask the teacher, then record its answer and give the label
            to an ``Earned`` policy (a probe only reports that the answer came: the
            fallback labelled that decision)."""
            reply, label = _answer(audit, engine, call, base, health)
            health.arrived()
            if not audited:
                return
            reply = str(getattr(reply, "content", reply))[:500]
            _answered(base, label, model_name(call.teacher), reply)
            audit.write(base)
            # (the state is kept only when the policy learns)
            taught = TeacherLabel(label, "audit", audit.rate, text, audit.rate)
            policy.trust.observe_label(question_id, question, banded, taught)

        if not audit.submit(ask):
            health.missing("dropped: the audit queue was full")
    elif by == "fallback" and fallback.get("kind") == "generate" and audit.fallback_examples:
        text = state_text(state) if audit.include_state else None
        record = _base("fallback", engine, question, policy, rec, text, 1.0)
        _answered(record, rec["label"], fallback.get("model"), fallback.get("reply"))
        audit.submit(lambda: audit.write(record))


def _call(
    policy: Any, audit: Audit, question_id: str, question: Any, text: str, options: Any
) -> TeacherCall:
    """The audit's teacher call: the ``Generate`` prompt to ``Audit(model=)`` or the
    policy's ``Generate`` model, held to the options where the teacher can be (a reader's
    own chat model on vLLM: its answer then always counts as a label)."""
    from agentbranch.policy.config import Generate
    from agentbranch.policy.generation import constrained_to, generation_messages

    if audit.model is not None:
        generate = Generate(audit.model, audit.instructions)
    else:  # (``Policy`` checks that an ``Audit`` without a model has a ``Generate``)
        fb = next(f for f in policy.fallbacks if isinstance(f, Generate))
        generate = Generate(fb.model, audit.instructions or fb.instructions)
    messages = generation_messages(generate, question_id, question, text)
    return TeacherCall("audit", question_id, constrained_to(generate.model, options), messages)


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


def _probe(policy: Any, question_id: str, question: Any, rec: dict) -> bool:
    """A fallback-band decision the suspended band of an ``Earned`` policy would have
    taken (confidence at or above the threshold its evidence gives)."""
    if rec.get("band") != "fallback" or rec.get("confidence") is None:
        return False
    take_at = policy.trust.suspended_take_at(
        QuestionKey(question_id, question, rec.get("reader"), rec.get("model"))
    )
    return take_at is not None and rec["confidence"] >= take_at


class _Outcome:
    """Reports one due audit to its policy's trust source; a ``probe`` feeds the health
    alone (no audit, no label: ``agentbranch.audits.probes`` counts it)."""

    def __init__(self, policy: Any, question_id: str, rec: dict, probe: bool = False) -> None:
        self.trust = policy.trust
        self.who = (question_id, rec.get("reader"), rec.get("model"))
        self.probe = probe
        telemetry.audit(question_id, "probe" if probe else "due")

    def arrived(self) -> None:
        if not self.probe:
            telemetry.audit(self.who[0], "done")
        self.trust.audit_arrived(*self.who)

    def missing(self, why: str, error: str = "dropped") -> None:
        if not self.probe:
            telemetry.audit(self.who[0], "missing", error)
        self.trust.audit_missing(*self.who, why=why)


def _base(
    kind: str, engine: Engine, question: Any, policy: Any, rec: dict, text: str | None, rate: float
) -> AuditRecord:
    calibration = engine.calibration
    temperature = calibration.temperature(rec["question_id"], rec["type"]) if calibration else 1.0
    record: AuditRecord = {
        "kind": kind,
        "id": uuid.uuid4().hex,
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        **{k: rec.get(k) for k in _COPIED},
        "options": list(rec["options"]),
        "probabilities": dict(rec["probabilities"] or {}),
        **dict.fromkeys(_ANSWER),  # filled by ``_answered`` when the teacher answers
        "rate": rate,
        "temperature": temperature,
        "spec": question.model_dump(mode="json"),
    }
    if policy.earned is not None:
        record["earned"] = policy.earned.settings  # the policy's own target, for reports
    if policy.audit.include_state and text is not None:
        record["state"] = text
    return record


def _answered(record: AuditRecord, label: str, teacher: str | None, reply: str | None) -> None:
    """Write the teacher's answer (its label, name and reply) into ``record``."""
    record.update(
        teacher_label=label, agree=label == record["engine_label"], teacher=teacher, reply=reply
    )


def _answer(
    audit: Audit, engine: Engine, call: TeacherCall, base: AuditRecord, health: _Outcome
) -> tuple[Any, str]:
    """The teacher's reply and its label (within ``audit.timeout``); a call that fails,
    times out or answers outside the options is a missing audit, and raises."""
    from agentbranch.policy.generation import ask, model_name, parse_label

    config = {"run_name": "agentbranch.audit", "tags": ["agentbranch:audit"]}
    started = time.perf_counter()
    error: str | None = None
    answered = False
    try:
        reply = audit.call_teacher(
            lambda: ask(engine, call, lambda m: m.invoke(call.input, config=config))
        )
        answered = True
        label = parse_label(reply, base["options"], source="audit teacher")
    except Exception as e:
        if isinstance(e, AuditTimeout):
            error = "teacher_stuck" if isinstance(e, TeacherStuck) else "timeout"
        else:
            error = "invalid_reply" if answered else type(e).__name__
        health.missing(f"{type(e).__name__}: {e}"[:200], error)
        raise
    finally:
        took = time.perf_counter() - started
        if error != "teacher_stuck":
            telemetry.teacher_call(call.question_id, "audit", took, error)
            teacher = model_name(call.teacher)
            telemetry.teacher_span(None, call.question_id, "audit", teacher, took, error)
        else:  # refused behind a stuck call: no call, no duration
            telemetry.teacher_refused(call.question_id, "audit")
    return reply, label


__all__ = [
    "shadow",
]
