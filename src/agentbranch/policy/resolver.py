"""``Resolver``: ask the engine, then band, review and fall back, by the policy."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import Question, validate_questions
from agentbranch.core.state import render_state
from agentbranch.policy.bands import band_all
from agentbranch.policy.config import (
    DecisionRecord,
    PolicyArg,
    ReviewFn,
    check_policies,
    policy_for,
)
from agentbranch.policy.failure import records_for_error
from agentbranch.policy.fallbacks import Steps, fallback_steps, run_async, run_sync
from agentbranch.policy.identity import decision_identity, langgraph_thread
from agentbranch.policy.in_force import thresholds_for
from agentbranch.policy.learn.hooks import asked_questions, learner_of, mark_versions
from agentbranch.policy.learning import collect, snapshot
from agentbranch.policy.review import review_all


@dataclass
class Resolver:
    """Asks the engine, bands each answer and resolves it by the policy.

    Integrations (LangGraph routers/nodes, the LangChain tool) build one per question
    set and call ``resolve``/``aresolve`` with the state the engine should read.
    ``review`` answers review-band decisions; ``allow_goto`` says whether routing to a
    node (``GotoNode``, ``FailClosed``) makes sense where the resolver is used.
    """

    engine: Any
    questions: dict[str, Question]
    policy: PolicyArg = None
    review: ReviewFn | None = None
    allow_goto: bool = True
    allow_review: bool = True

    def __post_init__(self) -> None:
        self.questions = validate_questions(self.questions)
        check_policies(self.policy, self.questions)
        self._audited = any(policy_for(self.policy, q).audit for q in self.questions)
        self._earned = any(policy_for(self.policy, q).earned for q in self.questions)
        self._learns = any(learner_of(self.policy, q) is not None for q in self.questions)
        for qid in self.questions:
            p = policy_for(self.policy, qid)
            if not self.allow_goto and p.targets():
                raise ConfigurationError(
                    f"question {qid!r}: GotoNode/FailClosed route to a node, which is not "
                    "possible here; use them in a router, decide node or Command node"
                )
            if p.can_review and not self.allow_review:
                raise ConfigurationError(
                    f"question {qid!r}: the policy has a review band (review_below="
                    f"{p.review_below}), which needs a decide node or Command node "
                    "(a router cannot interrupt and record the answer)"
                )

    def resolve(self, state: Any) -> dict[str, DecisionRecord]:
        # learning hook: each learning question's version in force is what is asked
        asked, versions, reads, maps = asked_questions(
            self.engine, self.questions, self.policy, state
        )
        try:
            decisions = self.engine.decide(state, reads, log_decisions=False)
        except BaseException as e:  # noqa: BLE001 - re-raised unless a policy handles it
            return records_for_error(e, self.questions, self.policy, self.engine.reader)
        records, pending = band_all(
            decisions, asked, self.policy, thresholds_for(self.engine, state)
        )
        self._identify(records, state)
        mark_versions(records, versions, maps)  # learning hook
        banded = snapshot(records, self.policy)
        review_all(records, pending["review"], self.review, self.engine, state)
        for qid in pending["fallback"]:
            records[qid] = run_sync(self._fallbacks(qid, records[qid], state))
        collect(asked, self.policy, banded, records, state=state)
        self._shadow(records, state)
        return records

    async def aresolve(self, state: Any) -> dict[str, DecisionRecord]:
        asked, versions, reads, maps = await self._asked(state)  # learning
        try:
            decisions = await self.engine.adecide(state, reads, log_decisions=False)
        except BaseException as e:  # noqa: BLE001
            return records_for_error(e, self.questions, self.policy, self.engine.reader)
        if self._earned:  # a due store re-read is blocking I/O: off the event loop
            await asyncio.to_thread(self._thresholds_now, decisions, asked)
        records, pending = band_all(
            decisions, asked, self.policy, thresholds_for(self.engine, state)
        )
        self._identify(records, state)
        mark_versions(records, versions, maps)  # learning hook
        banded = snapshot(records, self.policy)
        review_all(records, pending["review"], self.review, self.engine, state)
        for qid in pending["fallback"]:
            records[qid] = await run_async(self._fallbacks(qid, records[qid], state))
        if banded:  # evidence stores do blocking I/O: off the event loop
            await asyncio.to_thread(collect, asked, self.policy, banded, records, state=state)
        self._shadow(records, state)
        return records

    async def _asked(self, state: Any) -> tuple[dict, dict, dict, dict]:
        """``asked_questions`` (a learning question may embed the state to pick its
        few-shot lines, or rebuild its versions from the store: off the event loop)."""
        if not self._learns:
            return asked_questions(self.engine, self.questions, self.policy, state)
        return await asyncio.to_thread(
            asked_questions, self.engine, self.questions, self.policy, state
        )

    def _identify(self, records: dict[str, DecisionRecord], state: Any) -> None:
        """Give each decision of an ``Earned`` question its identity (``decision_id``;
        ``agentbranch.policy.identity``), so its teacher labels count once."""
        if not self._earned:
            return
        text = render_state(state)
        thread = langgraph_thread()
        for qid, rec in records.items():
            if policy_for(self.policy, qid).earned is not None:
                rec["decision_id"] = decision_identity(qid, text, thread)

    def _thresholds_now(self, decisions: Any, asked: dict[str, Question]) -> None:
        """Bring every ``Earned`` threshold up to date (re-reading the store when due)."""
        for qid, q in asked.items():
            p = policy_for(self.policy, qid)
            if p.earned is not None:
                p.threshold(qid, q, decisions[qid])

    def _shadow(self, records: dict[str, DecisionRecord], state: Any) -> None:
        """Queue audits (never blocks, never raises; see ``agentbranch.audit``)."""
        if self._audited:
            from agentbranch.policy.auditing.shadow import shadow

            shadow(self.engine, self.questions, self.policy, records, state)

    def _fallbacks(self, qid: str, rec: DecisionRecord, state: Any) -> Steps:
        policy = policy_for(self.policy, qid)
        return fallback_steps(self.engine, qid, self.questions[qid], policy, rec, state)
