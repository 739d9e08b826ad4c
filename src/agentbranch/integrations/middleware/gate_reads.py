"""The gate's engine reads and their bands, the way the resolver does them.

Every guarded call of a turn is read in ONE batched engine read (``decide_many``). With
``Earned(..., learn=True)`` each call is asked its question's version in force
(``agentbranch.policy.earned.learn.hooks.asked_questions``: a canvas version picks few-shot
lines per state, so each state gets its own questions in the batch), and each record
carries the version that read it and the probability it reports, so the teacher's
answer to a fallback is stored with the call's state and teaches that version. Either
way a record is banded at the threshold in force (live, or recorded when a
cassette replays) and an ``Earned`` record carries its ``decision_id`` (its labels count
once)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentbranch.core.state import render_state
from agentbranch.policy.bands import band_all
from agentbranch.policy.config import DecisionRecord, Policy
from agentbranch.policy.earned._identity import decision_identity, langgraph_thread
from agentbranch.policy.earned._in_force import thresholds_for
from agentbranch.policy.earned.learn.hooks import asked_questions, mark_versions


@dataclass
class CallRead:
    """One call's engine decisions and what was asked: the questions whose evidence
    key and threshold they are (a learning question's version in force), the version
    numbers and probability maps (empty when nothing learns)."""

    decisions: Any
    asked: Mapping[str, Any]
    versions: dict[str, int] = field(default_factory=dict)
    maps: dict[str, Any] = field(default_factory=dict)


def read_calls(
    engine: Any, questions: Mapping[str, Any], policy: Policy, states: list[Any]
) -> list[CallRead]:
    """The engine's read of every call's state, in one batch (raises what the engine
    raises)."""
    looked = [asked_questions(engine, questions, policy, s) for s in states]
    batch = engine.decide_many(states, [reads for _, _, reads, _ in looked], log_decisions=False)
    return [CallRead(d, a, v, m) for d, (a, v, _, m) in zip(batch, looked, strict=True)]


async def aread_calls(
    engine: Any, questions: Mapping[str, Any], policy: Policy, states: list[Any]
) -> list[CallRead]:
    """``read_calls`` on the event loop (a learning question's lookups, which may read
    its store, run off it)."""
    if policy.earned is not None and policy.earned.learner is not None:
        looked = await asyncio.to_thread(
            lambda: [asked_questions(engine, questions, policy, s) for s in states]
        )
    else:  # nothing to look up: no thread
        looked = [asked_questions(engine, questions, policy, s) for s in states]
    batch = await engine.adecide_many(
        states, [reads for _, _, reads, _ in looked], log_decisions=False
    )
    return [CallRead(d, a, v, m) for d, (a, v, _, m) in zip(batch, looked, strict=True)]


def band_call(engine: Any, qid: str, policy: Policy, read: CallRead, state: Any) -> DecisionRecord:
    """The banded record of question ``qid`` for one call's ``read`` of ``state``."""
    records = band_all(read.decisions, read.asked, policy, thresholds_for(engine, state))[0]
    mark_versions(records, read.versions, read.maps)
    if policy.earned is not None:
        records[qid]["decision_id"] = decision_identity(
            qid, render_state(state), langgraph_thread()
        )
    return records[qid]
