"""The gate's exchange with a human reviewer, in ``HumanInTheLoopMiddleware``'s shape:
one ``HITLRequest`` for the calls of a turn that need a human, and the checks of the
``HITLResponse`` it is resumed with (one allowed decision per call, in order)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain.agents.middleware.human_in_the_loop import (
    ActionRequest,
    DecisionType,
    HITLRequest,
    ReviewConfig,
)
from langchain_core.messages import ToolCall

from agentbranch.core.errors import AgentBranchError
from agentbranch.integrations.middleware.gate_texts import review_description
from agentbranch.policy import DecisionRecord

__all__ = ["ReviewResponseError", "checked_kind", "decisions_of", "review_request"]


class ReviewResponseError(AgentBranchError, ValueError):
    """The human's resume value does not fit the gate's ``HITLRequest``."""


def review_request(
    pending: Sequence[tuple[ToolCall, DecisionRecord]],
    allowed: Sequence[DecisionType],
    prefix: str,
) -> HITLRequest:
    """One ``HITLRequest`` for the ``(tool call, record)`` pairs that need a human."""
    return HITLRequest(
        action_requests=[
            ActionRequest(
                name=tc["name"], args=tc["args"], description=review_description(tc, rec, prefix)
            )
            for tc, rec in pending
        ],
        review_configs=[
            ReviewConfig(action_name=tc["name"], allowed_decisions=list(allowed))
            for tc, _ in pending
        ],
    )


def decisions_of(response: Any, expected: int) -> list[Any]:
    """The decisions of a resume value, one per action request."""
    decisions = response.get("decisions") if isinstance(response, Mapping) else None
    if not isinstance(decisions, list):
        raise ReviewResponseError(
            "resume the gate's interrupt with a HITLResponse: "
            "Command(resume={'decisions': [{'type': 'approve'}, ...]}), got "
            f"{response!r}"
        )
    if len(decisions) != expected:
        raise ReviewResponseError(
            f"the HITLRequest listed {expected} tool call(s) but the response has "
            f"{len(decisions)} decision(s); give one decision per action request, in order"
        )
    return decisions


def checked_kind(decision: Any, call_id: str, allowed: Sequence[DecisionType]) -> str:
    """The type of one reviewer's ``decision`` for the call ``call_id``, once it is an
    allowed, well-formed decision (else ``ReviewResponseError`` says what is missing)."""
    kind = decision.get("type") if isinstance(decision, Mapping) else None
    if kind not in allowed:
        raise ReviewResponseError(
            f"the reviewer's decision {decision!r} for tool call {call_id!r} is "
            f"not allowed; allowed types: {list(allowed)}"
        )
    if kind == "edit":
        action = decision.get("edited_action")
        if not (
            isinstance(action, Mapping)
            and isinstance(action.get("name"), str)
            and isinstance(action.get("args"), Mapping)
        ):
            raise ReviewResponseError(
                "an edit decision needs edited_action={'name': <tool>, 'args': {...}}, "
                f"got {decision!r}"
            )
    if kind == "respond" and not isinstance(decision.get("message"), str):
        raise ReviewResponseError("a respond decision needs message=<str>")
    return str(kind)
