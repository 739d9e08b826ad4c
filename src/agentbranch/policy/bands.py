"""Step 1 of resolving: put each engine decision in its policy's band."""

from __future__ import annotations

from collections.abc import Mapping

from agentbranch.core.decisions import Decisions
from agentbranch.core.questions import Question
from agentbranch.policy.config import DecisionRecord, PolicyArg, policy_for
from agentbranch.policy.earned._in_force import ThresholdFn, live
from agentbranch.policy.records import engine_record

__all__ = ["band_all"]


def band_all(
    decisions: Decisions,
    questions: Mapping[str, Question],
    policy: PolicyArg,
    thresholds: ThresholdFn = live,
) -> tuple[dict[str, DecisionRecord], dict[str, list[str]]]:
    """One record per question, and the ids still pending in the review and fallback
    bands (taken answers are final). ``thresholds`` gives the threshold in force
    (``agentbranch.policy.earned._in_force``: live, or recorded with a replay cassette)."""
    records: dict[str, DecisionRecord] = {}
    pending: dict[str, list[str]] = {"review": [], "fallback": []}
    for question_id, q in questions.items():
        d = decisions[question_id]
        p = policy_for(policy, question_id)
        threshold = thresholds(question_id, q, d, p)
        band = p.band(d, threshold)
        records[question_id] = engine_record(d, q, band=band, threshold=threshold)
        if band != "take":
            pending[band].append(question_id)
    return records, pending
