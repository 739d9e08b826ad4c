"""Engine errors: raised, unless every question's policy chose fail-open or fail-closed."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.questions import Question
from agentbranch.policy.config import DecisionRecord, FailClosed, FailOpen, PolicyArg, policy_for
from agentbranch.policy.records import error_record

if TYPE_CHECKING:
    from agentbranch.engine.readers.base import Reader

__all__ = ["records_for_error"]

log = logging.getLogger("agentbranch")


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
        telemetry.event(
            log,
            logging.WARNING,
            "agentbranch.decision.error",
            question_id=rec["question_id"],
            decided_by=rec["decided_by"],
            label=rec["label"],
            goto=rec["goto"],
            error=rec["error"],
        )
    return records
