"""Render a decision's state (text, JSON, or LangChain messages) as the text the model reads.

Strings pass through unchanged and JSON is dumped the way vLLM's decisions endpoint
dumps it (``json.dumps(..., ensure_ascii=False)``), so a read built here matches a read
built there. Messages become a ``role: content`` transcript, the form a model reads best.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from agentbranch.errors import InvalidStateError


def _message_text(message: BaseMessage) -> str:
    content = message.content
    if not isinstance(content, str):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        content = "\n".join(parts)
    return f"{message.type}: {content}"


def _plain(value: Any) -> Any:
    """JSON-compatible value with messages replaced by ``{"role", "content"}``."""
    if isinstance(value, BaseMessage):
        return {"role": value.type, "content": _message_text(value).split(": ", 1)[1]}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


def render_state(state: Any) -> str:
    """The state as text: strings as-is, a message or a list of messages as a
    ``role: content`` transcript, anything else JSON."""
    if isinstance(state, str):
        return state
    if isinstance(state, BaseMessage):
        return _message_text(state)
    if isinstance(state, Sequence) and state and all(isinstance(m, BaseMessage) for m in state):
        return "\n".join(_message_text(m) for m in state)
    try:
        return json.dumps(_plain(state), ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise InvalidStateError(
            f"the state must be text, JSON-compatible data or LangChain messages; "
            f"could not render {type(state).__name__}: {e}"
        ) from e
