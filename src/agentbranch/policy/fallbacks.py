"""Step 3 of resolving: the fallbacks of one uncertain decision, in order.

Written once, as steps (``agentbranch.policy.steps``) that yield each engine or model
call; ``run_sync`` and ``run_async`` drive them on either path."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from agentbranch.core import _metrics as metrics
from agentbranch.core import _tracing as tracing
from agentbranch.core.errors import FallbackError
from agentbranch.core.questions import Question
from agentbranch.policy.config import DecisionRecord, Generate, MoreDraws, Policy
from agentbranch.policy.generation import (
    Expired,
    agenerate,
    fallback_record,
    generate,
    generation_messages,
    model_name,
    parse_label,
    state_text,
)
from agentbranch.policy.records import engine_record
from agentbranch.policy.steps import Call, Steps, run_async, run_sync
from agentbranch.policy.trust import Threshold

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

log = logging.getLogger("agentbranch")

__all__ = ["Call", "Steps", "fallback_steps", "run_async", "run_sync"]


def fallback_steps(
    engine: Engine,
    qid: str,
    question: Question,
    policy: Policy,
    rec: DecisionRecord,
    state: Any,
    span: Any = None,
) -> Steps[DecisionRecord]:
    """Run ``policy.fallbacks`` for question ``qid`` until one resolves it; ``span``, the
    decision's OpenTelemetry span, is the parent of each teacher call's."""
    asked = {qid: question}
    errors: list[str] = []
    threshold = Threshold(rec.get("take_at"), rec.get("trust") or "fixed")
    for fb in policy.fallbacks:
        if isinstance(fb, MoreDraws):
            reader = fb.engine or engine
            decisions = yield Call(
                reader.decide, reader.adecide, state, asked, draws=fb.draws, log_decisions=False
            )
            d = decisions[qid]
            rec = engine_record(d, question, band="fallback", draws=fb.draws, threshold=threshold)
            if policy.band(d, threshold) == "take":
                rec["fallback"] = {"kind": "more_draws", "draws": fb.draws}
                return rec
        elif isinstance(fb, Generate):
            messages = generation_messages(fb, qid, question, state_text(state))
            started, teacher = time.perf_counter(), model_name(fb.model)
            try:
                reply = yield Call(generate, agenerate, engine, fb, qid, messages, rec["options"])
            except Exception as e:  # counted where it was raised (generation._raising)
                took = time.perf_counter() - started
                tracing.teacher_call(span, qid, "fallback", teacher, took, type(e).__name__)
                raise
            took = time.perf_counter() - started
            if isinstance(reply, Expired):  # a failed fallback: the next one runs
                if reply.made:
                    metrics.teacher_call(qid, "fallback", took, "timeout")
                    tracing.teacher_call(span, qid, "fallback", teacher, took, "timeout")
                else:  # refused behind stuck calls: no call, no duration
                    metrics.teacher_refused(qid, "fallback")
                log.warning("agentbranch: question %r: %s", qid, reply.message)
                errors.append(reply.message)
                continue
            try:
                label = parse_label(reply, rec["options"])
            except FallbackError as e:
                metrics.teacher_call(qid, "fallback", took, "invalid_reply")
                tracing.teacher_call(span, qid, "fallback", teacher, took, "invalid_reply")
                errors.append(str(e))
                continue
            metrics.teacher_call(qid, "fallback", took, None)
            tracing.teacher_call(span, qid, "fallback", teacher, took, None)
            return fallback_record(rec, label, fb.model, reply)
        else:
            out = dict(rec)
            out.update(goto=fb.node, decided_by="fallback_node")
            out["fallback"] = {"kind": "goto", "node": fb.node}
            return out
    raise FallbackError(
        f"question {qid!r}: confidence {rec['confidence']:.3f} is below take_at="
        f"{threshold.take_at} ({threshold.trust}) and no fallback resolved it: " + "; ".join(errors)
    )
