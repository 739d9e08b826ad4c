"""Where the resolver meets learning (only for questions whose policy is
``Earned(..., learn=True)``; everything else passes through unchanged)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agentbranch.core.state import render_state
from agentbranch.policy.config import PolicyArg, policy_for
from agentbranch.policy.in_force import cassette_of
from agentbranch.policy.learn import nearest, replayed

log = logging.getLogger("agentbranch")


def learner_of(policy: PolicyArg, qid: str) -> Any:
    earned = policy_for(policy, qid).earned
    return None if earned is None else earned.learner


def reading_of(engine: Any, qid: str, question: Any) -> str | None:
    """The reading fingerprint ``engine``'s decision of ``question`` will carry
    (``Engine.reading_for``; ``None``, the defaults', for an engine without it)."""
    reading_for = getattr(engine, "reading_for", None)
    return reading_for(qid, question) if callable(reading_for) else None


def asked_questions(
    engine: Any, questions: Mapping[str, Any], policy: PolicyArg, state: Any = None
) -> tuple[dict[str, Any], dict[str, int], dict[str, Any]]:
    """The questions of each learning question's version in force (the evidence key and
    threshold are theirs), the version of each, and the questions to read ``state``
    with: a canvas version's with the labelled states nearest ``state`` as few-shot
    lines (``nearest``). Under a replay cassette the version recorded for this decision
    (``replayed``), whatever the store holds now."""
    asked: dict[str, Any] = dict(questions)
    reads: dict[str, Any] = dict(questions)
    versions: dict[str, int] = {}
    learners = {qid: learner_of(policy, qid) for qid in questions}
    if not any(learners.values()):
        return asked, versions, reads  # (no learning: nothing rendered, nothing looked up)
    reader = getattr(engine, "reader", None)
    name, model = getattr(reader, "name", None), getattr(reader, "model", None)
    try:
        text = None if state is None else render_state(state)
    except Exception:  # noqa: BLE001 - the engine's read says what is wrong with it
        text = None
    cassette = None if state is None else cassette_of(engine)
    for qid, q in questions.items():
        learner = learners[qid]
        if learner is None:
            continue
        learner.bind(engine)

        def live(qid: str = qid, q: Any = q, learner: Any = learner) -> tuple[Any, int, Any]:
            version, j = learner.asked(qid, q, name, model, reading_of(engine, qid, q))
            pool = nearest.question_pool(version)
            if pool is None or text is None:
                return version, j, version
            try:
                picked = pool.pick([text])[0]
            except Exception as e:  # noqa: BLE001 - the written question decides instead
                log.warning(
                    "agentbranch.learn: could not pick few-shot lines for %r (%s: %s); "
                    "the question as written decides, at its own threshold",
                    qid,
                    type(e).__name__,
                    e,
                )
                return q, 0, q
            return version, j, nearest.read_question(version, picked)

        if cassette is None or text is None:
            asked[qid], versions[qid], reads[qid] = live()
        else:
            asked[qid], versions[qid], reads[qid] = replayed.version(cassette, qid, q, text, live)
    return asked, versions, reads


def mark_versions(records: dict[str, dict[str, Any]], versions: Mapping[str, int]) -> None:
    """Record the version of the read that decided (``reader_version``), for audits
    that label it later and for replays."""
    for qid, j in versions.items():
        if qid in records:
            records[qid]["reader_version"] = j
