"""Step 1 of resolving: the threshold in force for each engine decision, and its band.

Live, the threshold is ``Policy.threshold`` (the fixed ``take_at``, or what its trust
source gives: ``agentbranch.policy.trust``). When the engine reads through a replay
cassette, the threshold of a policy whose source learns is recorded with the run and
replayed from it (``Cassette.threshold``), keyed by the question and the rendered state:
a replay bands every decision as the recording did, whatever the evidence holds by then.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentbranch.core.decisions import Decision, Decisions
from agentbranch.core.questions import Question
from agentbranch.policy.config import DecisionRecord, Policy, PolicyArg, policy_for
from agentbranch.policy.records import engine_record
from agentbranch.policy.trust import Threshold

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["ThresholdFn", "band_all", "cassette_of", "live", "thresholds_for"]

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


def band_all(
    decisions: Decisions,
    questions: Mapping[str, Question],
    policy: PolicyArg,
    thresholds: ThresholdFn = live,
) -> tuple[dict[str, DecisionRecord], dict[str, list[str]]]:
    """One record per question, and the ids still pending in the review and fallback
    bands (taken answers are final). ``thresholds`` gives the threshold in force
    (``live``, or recorded with a replay cassette: ``thresholds_for``)."""
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
