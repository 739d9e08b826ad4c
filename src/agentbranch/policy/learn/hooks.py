"""Where the resolver meets learning (only for questions whose policy is
``Earned(..., learn=True)``; everything else passes through unchanged)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentbranch.policy.config import PolicyArg, policy_for


def learner_of(policy: PolicyArg, qid: str) -> Any:
    earned = policy_for(policy, qid).earned
    return None if earned is None else earned.learner


def asked_questions(
    engine: Any, questions: Mapping[str, Any], policy: PolicyArg
) -> tuple[dict[str, Any], dict[str, int]]:
    """The questions to ask the engine (each learning question's version in force) and
    the version of each learning question."""
    asked: dict[str, Any] = dict(questions)
    versions: dict[str, int] = {}
    reader = getattr(engine, "reader", None)
    name, model = getattr(reader, "name", None), getattr(reader, "model", None)
    for qid, q in questions.items():
        learner = learner_of(policy, qid)
        if learner is None:
            continue
        learner.bind(engine)
        asked[qid], versions[qid] = learner.asked(qid, q, name, model)
    return asked, versions


def mark_versions(records: dict[str, dict[str, Any]], versions: Mapping[str, int]) -> None:
    """Record the version of the read that decided (``reader_version``), for audits
    that label it later and for replays."""
    for qid, j in versions.items():
        if qid in records:
            records[qid]["reader_version"] = j
