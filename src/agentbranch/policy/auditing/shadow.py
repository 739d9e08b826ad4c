"""The resolver's hook: queue audits of taken decisions and keep fallback generations.

Runs on the critical path, so it only samples, renders the teacher's prompt for a sampled
decision and queues a job; the teacher call and the sinks run on the audit worker. It
never raises: anything unexpected is logged and the run goes on unchanged.

Under an ``Earned`` policy every audit due is reported to the policy's trust source
(``TrustSource.audit_arrived``/``audit_missing``, its audit health): arrived when the
teacher's answer was used, missing when it was dropped, timed out or failed. While a question's band is suspended for missing audits, the
decisions it would take are still sent to the teacher at the audit rate (probes: only
their arrival counts; the fallback labels those decisions).
"""

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
            _one(engine, question_id, questions[question_id], p, p.audit, rec, state)
        except Exception as e:  # noqa: BLE001 - an audit never fails a run
            log.warning(
                "agentbranch.audit: could not queue %r: %s: %s", question_id, type(e).__name__, e
            )


def _one(
    engine: Engine,
    question_id: str,
    question: Any,
    policy: Any,
    audit: Audit,
    rec: dict,
    state: Any,
) -> None:
    from agentbranch.policy.generation import state_text

    by = rec.get("decided_by")
    fallback = rec.get("fallback") or {}
    audited = by == "engine" or _earned_needs_label(policy, rec)
    if audited or _probe(policy, question_id, question, rec):
        calls = teacher_calls_of(engine)
        if calls is None and not audit.sample():
            return
        teacher, instructions = _teacher(policy, audit)
        text = state_text(state)
        call = _call(teacher, instructions, question_id, question, text, rec["options"])
        # Under a replay cassette the draw is the recording's: a replay audits the
        # decisions the recording audited.
        if calls is not None and not audit.sample(calls.audited(call, text, audit.draw)):
            return
        base = _base("audit", engine, question, policy, audit, rec, text, rate=audit.rate)
        learn = _learner(policy, question_id, question, rec, audit.rate, text) if audited else None
        health = _Outcome(policy, question_id, rec, probe=not audited)
        ask = _ask if audited else _probe_ask
        if not audit.submit(lambda: ask(audit, engine, call, base, learn, health)):
            health.missing("dropped: the audit queue was full")
    elif by == "fallback" and fallback.get("kind") == "generate" and audit.fallback_examples:
        text = state_text(state) if audit.include_state else None
        record = _base("fallback", engine, question, policy, audit, rec, text, rate=1.0)
        _answered(record, rec["label"], fallback.get("model"), fallback.get("reply"))
        audit.submit(lambda: audit.write(record))


def _call(
    teacher: Any, instructions: str | None, question_id: str, question: Any, text: str, options: Any
) -> TeacherCall:
    """The audit's teacher call: the ``Generate`` prompt, to a teacher that can hold its
    reply to the options (a reader's own chat model on vLLM) asked to (its answer then
    always counts as a label)."""
    from agentbranch.policy.config import Generate
    from agentbranch.policy.generation import constrained_to, generation_messages

    messages = generation_messages(Generate(teacher, instructions), question_id, question, text)
    return TeacherCall("audit", question_id, constrained_to(teacher, options), messages)


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
    earned = policy.earned
    if earned is None or rec.get("band") != "fallback" or rec.get("confidence") is None:
        return False
    take_at = earned.suspended_take_at(question_id, question, rec.get("reader"), rec.get("model"))
    return take_at is not None and rec["confidence"] >= take_at


class _Outcome:
    """Reports one due audit to its policy's trust source (no-op for a fixed threshold).
    A ``probe`` (a suspended band's would-be take, labelled by the fallback) feeds the
    health alone: it is no audit and leaves no label, so the audit counters skip it
    (``agentbranch.audits.probes`` counts it)."""

    def __init__(self, policy: Any, question_id: str, rec: dict, probe: bool = False) -> None:
        self.trust = policy.earned
        self.who = (question_id, rec.get("reader"), rec.get("model"))
        self.probe = probe
        telemetry.audit(question_id, "probe" if probe else "due")

    def arrived(self) -> None:
        if not self.probe:
            telemetry.audit(self.who[0], "done")
        if self.trust is not None:
            self.trust.audit_arrived(*self.who)

    def missing(self, why: str, error: str = "dropped") -> None:
        if not self.probe:
            telemetry.audit(self.who[0], "missing", error)
        if self.trust is not None:
            self.trust.audit_missing(*self.who, why=why)


def _learner(
    policy: Any, question_id: str, question: Any, rec: dict, rate: float, text: str | None = None
) -> Any:
    """What to do with the teacher's label besides the audit record: evidence for an
    ``Earned`` policy (``None`` otherwise)."""
    earned = policy.earned
    if earned is None:
        return None
    banded = dict(rec)

    def learn(label: str) -> None:
        earned.observe_label(
            question_id,
            question,
            banded,
            source="audit",
            teacher_label=label,
            rate=rate,
            state=text,  # learning hook: kept only when the policy learns
            audit_rate=rate,
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
    engine: Engine,
    question: Any,
    policy: Any,
    audit: Audit,
    rec: dict,
    text: str | None,
    *,
    rate: float,
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
    if audit.include_state and text is not None:
        record["state"] = text
    return record


def _ask(
    audit: Audit,
    engine: Engine,
    call: TeacherCall,
    base: AuditRecord,
    learn: Any = None,
    health: _Outcome | None = None,
) -> None:
    """On the worker: ask the teacher (its normal ``invoke``, through the engine's
    cassette if any), validate, record."""
    from agentbranch.policy.generation import model_name

    teacher = call.teacher
    reply, label = _answer(audit, engine, call, base, health)
    if health is not None:
        health.arrived()
    _answered(base, label, model_name(teacher), str(getattr(reply, "content", reply))[:500])
    audit.write(base)
    if learn is not None:
        learn(label)


def _answered(record: AuditRecord, label: str, teacher: str | None, reply: str | None) -> None:
    """Write the teacher's answer into ``record``: its label, whether the engine's label
    agrees, the teacher's name and (the start of) its reply."""
    record.update(
        teacher_label=label, agree=label == record["engine_label"], teacher=teacher, reply=reply
    )


def _answer(
    audit: Audit, engine: Engine, call: TeacherCall, base: AuditRecord, health: _Outcome | None
) -> tuple[Any, str]:
    """The teacher's reply and its label (within ``audit.timeout``); a call that fails,
    times out or answers outside the options is a missing audit, and raises."""
    from agentbranch.policy.generation import ask, model_name, parse_label

    config = {"run_name": "agentbranch.audit", "tags": ["agentbranch:audit"]}
    started = time.perf_counter()
    error: str | None = None
    made = True
    try:
        try:
            reply = audit.call_teacher(
                lambda: ask(engine, call, lambda m: m.invoke(call.input, config=config))
            )
        except TeacherStuck:
            error, made = "teacher_stuck", False
            raise
        except AuditTimeout:
            error = "timeout"
            raise
        except Exception as e:
            error = type(e).__name__
            raise
        try:
            label = parse_label(reply, base["options"], source="audit teacher")
        except Exception:
            error = "invalid_reply"
            raise
    except Exception as e:
        if health is not None:
            health.missing(f"{type(e).__name__}: {e}"[:200], error or type(e).__name__)
        raise
    finally:
        took = time.perf_counter() - started
        if made:
            telemetry.teacher_call(call.question_id, "audit", took, error)
            teacher = model_name(call.teacher)
            telemetry.teacher_span(None, call.question_id, "audit", teacher, took, error)
        else:  # refused behind a stuck call: no call, no duration
            telemetry.teacher_refused(call.question_id, "audit")
    return reply, label


def _probe_ask(
    audit: Audit,
    engine: Engine,
    call: TeacherCall,
    base: AuditRecord,
    learn: Any,
    health: _Outcome,
) -> None:
    """On the worker: whether the teacher answers a decision a suspended band would have
    taken (nothing is recorded: the fallback labelled that decision)."""
    _answer(audit, engine, call, base, health)
    health.arrived()


__all__ = [
    "shadow",
]
