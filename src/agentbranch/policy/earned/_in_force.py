"""The threshold in force for each decision, and what a replay cassette makes of it.

Live, it is ``Policy.threshold`` (the fixed ``take_at``, or what ``Earned`` has earned).
When the engine reads through a replay cassette, an ``Earned`` policy's threshold is
recorded with the run and replayed from it (``Cassette.threshold``), keyed by the
question and the rendered state: a replay bands every decision as the recording did,
whatever the evidence store holds by then.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentbranch.core.decisions import Decision
from agentbranch.core.questions import Question
from agentbranch.policy.config import Policy
from agentbranch.policy.earned._state import Threshold

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

#: ``threshold(question_id, question, decision, policy)``: the threshold in force.
ThresholdFn = Callable[[str, Question, Decision, Policy], Threshold]


def live(question_id: str, question: Question, decision: Decision, policy: Policy) -> Threshold:
    return policy.threshold(question_id, question, decision)


def cassette_of(engine: Engine) -> Any:
    """The replay cassette the engine's reader (or a reader it wraps) reads through."""
    for reader in engine.reader.chain():
        if reader.cassette is not None:
            return reader.cassette
    return None


def thresholds_for(engine: Engine, state: Any) -> ThresholdFn:
    """The threshold source for one resolution of ``state``."""
    cassette = cassette_of(engine)
    if cassette is None:
        return live
    from agentbranch.policy.generation import state_text

    text = state_text(state)

    def recorded(
        question_id: str, question: Question, decision: Decision, policy: Policy
    ) -> Threshold:
        if policy.earned is None:
            return live(question_id, question, decision, policy)
        blob = json.dumps([question_id, question.model_dump(mode="json"), text], sort_keys=True)
        key = "earned:" + hashlib.sha256(blob.encode()).hexdigest()[:24]

        def now() -> dict[str, Any]:
            t = live(question_id, question, decision, policy)
            return {"take_at": t.take_at, "trust": t.trust}

        got = cassette.threshold(key, now)
        return Threshold(got["take_at"], got["trust"])

    return recorded


def is_replayed(record: dict[str, Any]) -> bool:
    """Whether a decision was replayed from a cassette (its labels are no live evidence)."""
    return str(record.get("reader") or "").startswith("replay:")


__all__ = [
    "ThresholdFn",
    "cassette_of",
    "is_replayed",
    "live",
    "thresholds_for",
]
