"""Step 2 of resolving: a human answers the decisions in the review band."""

from __future__ import annotations

from agentbranch.core.errors import ConfigurationError, FallbackError
from agentbranch.policy.config import DecisionRecord, ReviewFn
from agentbranch.policy.records import review_payload


def review_all(
    records: dict[str, DecisionRecord], pending: list[str], review: ReviewFn | None
) -> None:
    """Ask ``review`` for each pending question id and record the validated answer.

    Reviews run before any fallback: a resumed LangGraph node re-runs from its start, so a
    fallback model called before an interrupt would be called twice."""
    for qid in pending:
        if review is None:
            raise ConfigurationError(
                f"question {qid!r} is in the review band but no reviewer is configured"
            )
        rec = records[qid]
        answer = review(review_payload(rec))
        if answer not in rec["options"]:
            raise FallbackError(
                f"question {qid!r}: the reviewer answered {answer!r}, not one of {rec['options']}"
            )
        rec["label"] = answer
        rec["decided_by"] = "human"
