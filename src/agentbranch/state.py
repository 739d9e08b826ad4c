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


#: States nested deeper than this are refused (rendering them would exhaust the stack).
MAX_STATE_DEPTH = 200
#: States with more values than this are refused (no model reads that much).
MAX_STATE_VALUES = 1_000_000


def check_state(state: Any) -> None:
    """Refuse, as ``InvalidStateError``, a state that cannot become valid text: one that
    contains itself, is nested deeper than ``MAX_STATE_DEPTH``, holds more than
    ``MAX_STATE_VALUES`` values, or has a string with an unpaired surrogate. Walks the
    state without recursion, so the check itself cannot overflow the stack."""
    on_path: set[int] = set()  # containers between the root and the current value
    stack: list[tuple[Any, int, bool]] = [(state, 0, False)]
    seen = 0
    while stack:
        value, depth, leaving = stack.pop()
        if leaving:
            on_path.discard(id(value))
            continue
        if isinstance(value, str):
            _check_text(value)
            continue
        if isinstance(value, BaseMessage):
            children: list[Any] = [value.content]
        elif isinstance(value, Mapping):
            children = [*value.keys(), *value.values()]
        elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
            children = list(value)
        else:
            continue  # a scalar, or something render_state refuses itself
        seen += len(children)
        if seen > MAX_STATE_VALUES:
            raise InvalidStateError(
                f"the state holds more than {MAX_STATE_VALUES:,} values; pass the part of "
                "it the questions are about"
            )
        if id(value) in on_path:
            raise InvalidStateError(
                f"the state contains itself (a {type(value).__name__} inside its own "
                "contents), so it cannot be rendered; pass a copy without the cycle"
            )
        if depth >= MAX_STATE_DEPTH:
            raise InvalidStateError(
                f"the state is nested more than {MAX_STATE_DEPTH} levels deep; flatten it "
                "or pass the part the questions are about"
            )
        on_path.add(id(value))
        stack.append((value, depth, True))
        for child in children:
            if isinstance(child, str):
                _check_text(child)
            elif not isinstance(child, int | float | None):
                stack.append((child, depth + 1, False))


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidStateError(
            f"the state contains an unpaired surrogate ({text[e.start]!r} at index "
            f"{e.start}), which is not valid Unicode; decode its text with "
            "errors='replace' (or 'surrogateescape' then re-encode) before deciding"
        ) from None


def render_state(state: Any) -> str:
    """The state as text: strings as-is, a message or a list of messages as a
    ``role: content`` transcript, anything else JSON."""
    check_state(state)
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
