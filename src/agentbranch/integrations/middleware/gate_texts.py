"""The texts of the gate: what the engine reads about a proposed call, what a reviewer
reads, and the ``ToolMessage`` the model reads in place of a call that did not run."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolCall, ToolMessage, add_notification_metadata

from agentbranch.core.state import render_state
from agentbranch.policy import DecisionRecord

__all__ = [
    "default_blocked_message",
    "gate_tool_message",
    "rejected_message",
    "render_tool_call",
    "review_description",
    "shared_id_message",
]


def render_tool_call(
    tool_call: ToolCall, description: str | None, context: Sequence[BaseMessage]
) -> str:
    """What the engine reads for one proposed call: the call first (a sentence embedder
    truncates long inputs, so the call must not sit behind the conversation), the tool's
    description, then the recent conversation. A conversation with nothing to read
    (empty, blank or punctuation-only messages) is left out, as none would be."""
    args = json.dumps(tool_call["args"], ensure_ascii=False, sort_keys=True, default=str)
    lines = [f"Proposed tool call: {tool_call['name']}({args})"]
    if description:
        lines.append(f"Tool description: {description}")
    conversation = render_state(list(context)) if context else ""
    if conversation:
        lines += ["Conversation (latest last):", conversation]
    return "\n".join(lines)


def review_description(tool_call: ToolCall, record: DecisionRecord, prefix: str) -> str:
    """What the reviewer reads: the call and the engine's answer (or its error)."""
    lines = [
        prefix,
        "",
        f"Tool: {tool_call['name']}",
        f"Args: {json.dumps(tool_call['args'], ensure_ascii=False, default=str)}",
    ]
    if record.get("error"):
        lines.append(f"The risk check failed: {record['error']}")
    else:
        probs = ", ".join(f"{k} {v:.2f}" for k, v in record["probabilities"].items())
        lines.append(
            f"Engine: {record['question_id']}={record['engine_label']} ({probs}; "
            f"confidence {record['confidence']:.2f})"
        )
    return "\n".join(lines)


def default_blocked_message(tool_call: ToolCall, record: DecisionRecord) -> str:
    """Why a call was blocked, for the model to read."""
    by = record["decided_by"]
    question_id, label = record["question_id"], record["label"]
    # the model reads the kind of error; the full message stays in the record
    error_kind = str(record.get("error") or "").split(":", 1)[0]
    if by == "engine":
        p = record["probabilities"][label]
        why = (
            f"the decision engine answered {question_id}={label} (p={p:.2f}, confidence "
            f"{record['confidence']:.2f})"
        )
    elif by == "fallback":
        why = f"the fallback model answered {question_id}={label} after an uncertain read"
    elif by == "fallback_node":
        why = (
            f"the decision engine was unsure ({question_id}={record['engine_label']}, confidence "
            f"{record['confidence']:.2f}) and uncertain calls are blocked"
        )
    elif by == "fail_open":
        why = (
            f"the risk check failed ({error_kind}) and the gate's default is {question_id}={label}"
        )
    else:
        why = f"the risk check failed ({error_kind}) and the gate fails closed"
    return (
        f"The tool call `{tool_call['name']}` was blocked: {why}. The tool was not executed; "
        "do not retry it unless the user explicitly asks."
    )


def rejected_message(tool_call: ToolCall, review: Mapping[str, Any]) -> str:
    # The wording of HumanInTheLoopMiddleware's reject message.
    if reason := review.get("message"):
        return f"User rejected the tool call for `{tool_call['name']}` with reason: {reason}"
    return (
        f"User rejected the tool call for `{tool_call['name']}` with id {tool_call['id']}. "
        "The tool was not executed. Do not retry this tool call unless the user explicitly "
        "requests it."
    )


def gate_tool_message(
    tc: ToolCall, content: str, status: str, record: DecisionRecord
) -> ToolMessage:
    message = ToolMessage(
        content=content,
        name=tc["name"],
        tool_call_id=tc["id"],
        status=status,
        artifact={"agentbranch.decision": record},
    )
    # Marked as added by the harness, as HumanInTheLoopMiddleware marks its answers
    # (chat model integrations do not send these keys to the model).
    data = {"outcome": record["outcome"], "decided_by": record["decided_by"]}
    return add_notification_metadata(message, source="agentbranch_gate", data=data)


def shared_id_message(tc: ToolCall, record: DecisionRecord | None) -> ToolMessage:
    """The error ``ToolMessage`` of a call not run because another call of the turn with
    the same id was blocked (``record``: its gate record; ``None`` for an unguarded
    tool)."""
    content = (
        f"The tool call `{tc['name']}` was not executed: the model gave it the same id "
        f"({tc['id']}) as another call of this turn that was not run, and tool results "
        "are matched to calls by id, so it could not run alone. If it is still needed, "
        "call it again in a new turn."
    )
    if record is None:
        record = {"outcome": "blocked", "decided_by": "shared_id", "shared_id": True}
    return gate_tool_message(tc, content, "error", record)
