"""Step 2 of resolving: a human answers the decisions in the review band.

A reviewer function's answers are teacher calls: when the engine reads through a replay
cassette they are recorded and replayed with the run (keyed by the reviewer, the state
and what it was shown). LangGraph's interrupt (``review_with_interrupt``) is not: the
human's answer comes back through the graph's checkpointer and ``Command(resume=...)``,
which the replayed test gives again."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentbranch.core.errors import ConfigurationError, FallbackError
from agentbranch.core.teacher_calls import TeacherCall
from agentbranch.policy.config import DecisionRecord, ReviewFn
from agentbranch.policy.records import review_payload

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["ANSWERED_BY_THE_GRAPH", "review_all"]

#: Set on a reviewer whose answers the graph itself records and gives again on replay.
ANSWERED_BY_THE_GRAPH = "agentbranch_answered_by_the_graph"


def review_all(
    records: dict[str, DecisionRecord],
    pending: list[str],
    review: ReviewFn | None,
    engine: Engine = None,
    state: Any = None,
) -> None:
    """Ask ``review`` for each pending question id and record the validated answer
    (through ``engine``'s replay cassette, if any).

    Reviews run before any fallback: a resumed LangGraph node re-runs from its start, so a
    fallback model called before an interrupt would be called twice."""
    for question_id in pending:
        if review is None:
            raise ConfigurationError(
                f"question {question_id!r} is in the review band but no reviewer is configured"
            )
        rec = records[question_id]
        payload = review_payload(rec)
        if engine is None or getattr(review, ANSWERED_BY_THE_GRAPH, False):
            answer = review(payload)
        else:
            from agentbranch.policy.generation import ask, state_text

            call = TeacherCall(
                "review", question_id, review, {"state": state_text(state), **payload}
            )
            answer = ask(engine, call, lambda fn, shown=payload: fn(shown))
        if answer not in rec["options"]:
            raise FallbackError(
                f"question {question_id!r}: the reviewer answered {answer!r}, "
                f"not one of {rec['options']}"
            )
        rec["label"] = answer
        rec["decided_by"] = "human"
