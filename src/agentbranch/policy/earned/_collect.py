"""Evidence from a labelled decision: its banded record and the teacher's label become
one ``Evidence`` record (``Earned.observe_label``, the trust seam's ``observe_label``).

The resolver gives ``Earned`` every label a resolution obtained (a ``Generate`` answer
in the fallback band, a human's answer in the review band: ``resolving.collect``), the
audit worker every audited take's (``auditing.shadow``), each with the engine's first
read: the one the threshold is compared with.
"""

from __future__ import annotations

import logging
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import Question
from agentbranch.policy.config import DecisionRecord
from agentbranch.policy.earned._evidence import QuestionKey
from agentbranch.policy.earned._label_loss import LabelLostError
from agentbranch.policy.records import is_replayed

log = logging.getLogger("agentbranch")


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
        pass  # counted, and logged once per burst (agentbranch.policy.earned._label_loss)
    except Exception as e:  # noqa: BLE001 - a lost label never fails the decision
        log.warning(
            "agentbranch.earned: evidence for %r not stored: %s: %s",
            question_id,
            type(e).__name__,
            e,
        )


__all__ = ["observe_record"]
