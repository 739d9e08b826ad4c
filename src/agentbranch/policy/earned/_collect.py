"""Collecting evidence for ``Earned`` policies from resolved decisions.

The resolver keeps the banded records (``snapshot``) before review and fallbacks run,
then ``collect`` turns every label the policy obtained — a ``Generate`` answer in the
fallback band, a human's answer in the review band — into one evidence record, with the
engine's first read (the one the threshold is compared with). Audited takes reach
``Earned`` from the audit worker (``agentbranch.policy.auditing.shadow``) through ``observe``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import Question
from agentbranch.policy.config import DecisionRecord, PolicyArg, policy_for
from agentbranch.policy.earned._evidence import QuestionKey
from agentbranch.policy.earned._in_force import is_replayed
from agentbranch.policy.label_loss import LabelLostError

log = logging.getLogger("agentbranch")


def snapshot(records: Mapping[str, DecisionRecord], policy: PolicyArg) -> dict[str, DecisionRecord]:
    """Copies of the banded records of questions whose policy is ``Earned``."""
    return {
        question_id: dict(rec)
        for question_id, rec in records.items()
        if policy_for(policy, question_id).earned is not None
    }


def label_of(final: DecisionRecord) -> tuple[str, str] | None:
    """``(source, teacher label)`` when the resolution gave a label, else ``None``."""
    fallback = final.get("fallback") or {}
    if final.get("decided_by") == "fallback" and fallback.get("kind") == "generate":
        return "fallback", final["label"]
    if final.get("decided_by") == "human":
        return "review", final["label"]
    return None


def observe_record(
    earned: Any,
    question_id: str,
    question: Question,
    banded: DecisionRecord,
    *,
    source: str,
    teacher_label: str,
    rate: float,
    decision: str | None = None,
    state: Any = None,
    audit_rate: float | None = None,
) -> None:
    """One evidence record for the banded decision ``banded`` (its first read), keyed
    with its reading fingerprint (``banded["reading"]``) and carrying its identity
    (``decision``, default ``banded["decision_id"]``: labels of one decision count
    once). A store that is not an evidence store raises; any other write failure is
    logged. ``state``: the state read, kept with the label when the policy learns
    (``learn=True``), and ``audit_rate`` the share of taken decisions the policy audits
    (what the learner's anytime-valid test needs to weigh the label, ``Evidence.floor``)."""
    if banded.get("confidence") is None or banded.get("engine_label") is None:
        return
    if is_replayed(banded):
        return  # a replayed decision is no live traffic
    band = banded["band"] if banded["band"] in ("take", "fallback", "review") else "fallback"
    learning = {}  # learning hook (agentbranch.policy.earned.learn): the state and the version
    if getattr(earned, "learner", None) is not None:
        from agentbranch.policy.generation import state_text

        text = state if isinstance(state, str) or state is None else state_text(state)
        read = (banded.get("probabilities") or {}).get(banded["engine_label"])
        learning = {
            "state": text,
            "version": banded.get("reader_version"),
            "probability": read,
            "audit_rate": audit_rate,
        }
    try:
        earned.observe(
            QuestionKey(
                question_id,
                question,
                banded.get("reader"),
                banded.get("model"),
                banded.get("reading"),
            ),
            teacher_label,
            source=source,
            band=band,
            confidence=banded["confidence"],
            options=banded["options"],
            engine_label=banded["engine_label"],
            rate=rate,
            take_at=banded.get("take_at"),
            trust=banded.get("trust") or "learning",
            decision=decision if decision is not None else banded.get("decision_id"),
            **learning,
        )
    except ConfigurationError:
        raise
    except LabelLostError:
        pass  # counted, and logged once per burst (agentbranch.policy.label_loss)
    except Exception as e:  # noqa: BLE001 - a lost label never fails the decision
        log.warning(
            "agentbranch.earned: evidence for %r not stored: %s: %s",
            question_id,
            type(e).__name__,
            e,
        )


def collect(
    questions: Mapping[str, Question],
    policy: PolicyArg,
    banded: Mapping[str, DecisionRecord],
    final: Mapping[str, DecisionRecord],
    state: Any = None,
) -> None:
    """Store the labels the resolution of ``final`` gave (see module docstring); with
    ``state`` (the state read), a learning policy keeps it with the label."""
    for question_id, first in banded.items():
        got = label_of(final[question_id])
        if got is None:
            continue
        chosen = policy_for(policy, question_id)
        earned = chosen.earned
        observe_record(
            earned,
            question_id,
            questions[question_id],
            first,
            source=got[0],
            teacher_label=got[1],
            rate=1.0,
            state=state,
            audit_rate=chosen.audit.rate if chosen.audit is not None else 0.0,
        )


__all__ = [
    "collect",
    "label_of",
    "observe_record",
    "snapshot",
]
