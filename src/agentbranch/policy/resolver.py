"""``Resolver``: resolve one state's questions by their policies, sync or async
(the steps are ``agentbranch.policy.resolving``'s)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentbranch.core.any_of import AnyOf, member_questions, set_record
from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import Question, validate_questions
from agentbranch.policy.config import (
    DecisionRecord,
    PolicyArg,
    ReviewFn,
    check_policies,
    policy_for,
)
from agentbranch.policy.resolving import Resolution, resolve_many
from agentbranch.policy.review import review_all
from agentbranch.policy.steps import Steps, run_async, run_sync

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["Resolver"]


@dataclass
class Resolver:
    """Asks the engine, bands each answer and resolves it by the policy.

    Integrations (LangGraph routers/nodes, the LangChain tool) build one per question
    set and call ``resolve``/``aresolve`` with the state the engine should read.
    ``review`` answers review-band decisions; ``allow_goto`` says whether routing to a
    node (``GotoNode``, ``FailClosed``) makes sense where the resolver is used.
    """

    engine: Engine
    questions: dict[str, Question]
    policy: PolicyArg = None
    review: ReviewFn | None = None
    allow_goto: bool = True
    allow_review: bool = True
    #: the questions the engine reads (each ``AnyOf`` as its members) and their policies
    _asked: dict[str, Question] = field(init=False, repr=False)
    _policies: PolicyArg = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.questions = validate_questions(self.questions)
        sets = {qid: q for qid, q in self.questions.items() if isinstance(q, AnyOf)}
        try:
            self._asked = member_questions(self.questions) if sets else self.questions
        except ValueError as e:
            raise ConfigurationError(str(e)) from None
        self._policies = _member_policies(self.policy, sets)
        check_policies(self._policies, self._asked)
        for question_id in self._asked:
            p = policy_for(self._policies, question_id)
            if not self.allow_goto and p.targets():
                raise ConfigurationError(
                    f"question {question_id!r}: GotoNode/FailClosed route to a node, which is not "
                    "possible here; use them in a router, decide node or Command node"
                )
            if p.can_review and not self.allow_review:
                raise ConfigurationError(
                    f"question {question_id!r}: the policy has a review band (review_below="
                    f"{p.review_below}), which needs a decide node or Command node "
                    "(a router cannot interrupt and record the answer)"
                )

    def resolve(self, state: Any) -> dict[str, DecisionRecord]:
        return run_sync(self._steps(state))

    async def aresolve(self, state: Any) -> dict[str, DecisionRecord]:
        return await run_async(self._steps(state))

    def _steps(self, state: Any) -> Steps[dict[str, DecisionRecord]]:
        """The resolving steps (``agentbranch.policy.resolving``) for one state."""

        def review(out: list[Resolution]) -> None:
            first = out[0]
            review_all(
                first.records, first.pending["review"], self.review, self.engine, first.state
            )

        steps = resolve_many(
            self.engine, self._asked, self._policies, [state], review=review, batched=False
        )
        (resolved,) = yield from steps
        records = resolved.records
        if self._asked is self.questions:  # (no sets)
            return records
        return {
            qid: set_record(qid, q, records) if isinstance(q, AnyOf) else records[qid]
            for qid, q in self.questions.items()
        }


def _member_policies(policy: PolicyArg, sets: Mapping[str, AnyOf]) -> PolicyArg:
    """``policy`` with each set's policy given to its members by id (one ``Policy`` or
    none already applies to every question)."""
    if not sets or not isinstance(policy, Mapping):
        return policy
    out = {k: v for k, v in policy.items() if k not in sets}
    for qid, q in sets.items():
        if qid in policy or "*" in policy:
            out.update({member: policy_for(policy, qid) for member in q.members(qid)})
    return out
