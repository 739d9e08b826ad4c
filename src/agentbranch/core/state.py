"""Render a decision's state (text, JSON, or LangChain messages) as the text the model
reads (``render_state``; docs/langgraph.md shows each kind of content), and refuse one
that cannot become valid text (``check_state``).

A text of blanks, punctuation, symbols or chat-template markup tokens only (``<turn|>``,
``</s>``, ``[SEP]``) carries no evidence for any answer (``has_readable_text``): readers
that can tell answer it uniformly, so a policy falls back instead of taking an answer
read from nothing.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, ToolMessage

from agentbranch.core.errors import InvalidStateError, surrogate_at

__all__ = [
    "MAX_STATE_DEPTH",
    "MAX_STATE_VALUES",
    "check_state",
    "has_readable_text",
    "media_placeholder",
    "render_state",
]

#: Block types that carry media, and the keys that hold its data or location.
_MEDIA_KINDS = {
    "image": "image",
    "image_url": "image",
    "audio": "audio",
    "input_audio": "audio",
    "video": "video",
    "file": "file",
}
_MEDIA_DATA_KEYS = ("base64", "data", "url", "file_id", "source", "image_url", "input_audio")


#: Chat-template markup: angle-bracket tokens without spaces (``<|im_start|>``, ``</s>``)
#: and BERT's bracket tokens; a URL or address in angle brackets has a ``:``, ``.`` or ``@``.
_MARKUP = re.compile(r"<[A-Za-z0-9_|/-]{1,64}>|\[(?:CLS|SEP|PAD|MASK|UNK)\]")


def has_readable_text(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit outside markup tokens (see module doc).

    >>> [has_readable_text(t) for t in ["", " \\n", "?!", "🙂", "<turn|>", "ok?", "42"]]
    [False, False, False, False, False, True, True]
    """
    return any(unicodedata.category(ch)[0] in "LN" for ch in _MARKUP.sub(" ", text))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _role(message: BaseMessage) -> str:
    if isinstance(message, ChatMessage):
        return message.role
    kind = message.type  # a chunk's type is its class name: "AIMessageChunk" is "ai"
    return kind.removesuffix("MessageChunk").lower() if kind.endswith("MessageChunk") else kind


def media_placeholder(block: Mapping[str, Any]) -> str:
    """``[image]``, ``[image image/png]``, ``[file report.pdf application/pdf]``."""
    kind = _MEDIA_KINDS.get(str(block.get("type")), str(block.get("type")))
    extras = block.get("extras") if isinstance(block.get("extras"), Mapping) else {}
    name = block.get("filename") or block.get("name") or extras.get("filename")
    parts = [kind, name, block.get("mime_type")]
    return "[" + " ".join(str(p) for p in parts if p) + "]"


def _block_text(block: Mapping[str, Any]) -> str | None:
    """One standard content block as text (``None``: a tool call, rendered separately)."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "text-plain" and block.get("text") is not None:
        return str(block["text"])
    if kind in ("reasoning", "refusal"):
        return f"[{kind}] {block.get(kind) or block.get('reasoning') or ''}".rstrip()
    if kind in ("tool_call", "tool_call_chunk", "invalid_tool_call"):
        return None
    if kind in _MEDIA_KINDS or kind == "text-plain":
        return media_placeholder(block)
    if kind in ("server_tool_call", "server_tool_call_chunk"):
        return f"[server tool call {block.get('name', '')} {_json(block.get('args', {}))}]"
    if kind == "server_tool_result":
        status = block.get("status", "")
        return f"[server tool result {status}] {_json(block.get('output', ''))}".rstrip()
    if kind == "non_standard":
        value = block.get("value") if isinstance(block.get("value"), Mapping) else {}
        if value.get("type") in ("tool_use", "function_call"):
            args = value.get("input", value.get("arguments", {}))
            return f"[tool call {value.get('name', '')} {_json(args)}]"
        if value.get("type") in _MEDIA_KINDS:
            return media_placeholder(value)
        return f"[{value.get('type') or 'non-standard'} block]"
    return f"[{kind} block]"


def _tool_calls(message: BaseMessage) -> list[str]:
    if not isinstance(message, AIMessage):
        return []
    calls = [f"[tool call {c['name']} {_json(c.get('args', {}))}]" for c in message.tool_calls]
    for c in message.invalid_tool_calls:
        calls.append(f"[invalid tool call {c.get('name') or ''} {c.get('args') or ''}]")
    return calls


def _block_has_content(block: Mapping[str, Any]) -> bool:
    """Whether ``block`` carries something to read: a server tool call, text, reasoning or
    a refusal with a letter or a digit outside markup tokens, or media (its placeholder
    says what was sent). ``[<type> block]`` labels are not content."""
    kind = block.get("type")
    if kind in ("text", "text-plain", "reasoning", "refusal"):
        text = block.get("text") if kind in ("text", "text-plain") else None
        text = text if text is not None else block.get(kind) or block.get("reasoning")
        return isinstance(text, str) and has_readable_text(text)
    if kind in ("server_tool_call", "server_tool_call_chunk", "server_tool_result"):
        return True
    if kind in _MEDIA_KINDS:
        return True
    if kind == "non_standard":
        value = block.get("value")
        return isinstance(value, Mapping) and value.get("type") in ("tool_use", "function_call")
    return False  # unknown blocks, and tool calls (counted by render_state)


def _content_parts(message: BaseMessage) -> list[str]:
    parts = [t for b in message.content_blocks if (t := _block_text(b)) is not None]
    return [p for p in parts if p]


def _message_text(message: BaseMessage) -> str:
    role = _role(message)
    if isinstance(message, ToolMessage):
        who = message.name or message.tool_call_id
        role = f"tool ({who}, error)" if message.status == "error" else f"tool ({who})"
    lines = _content_parts(message) + _tool_calls(message)
    return f"{role}: " + "\n".join(lines)


def _plain_message(message: BaseMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": _role(message), "content": "\n".join(_content_parts(message))}
    if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
        out["tool_calls"] = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
        out["tool_calls"] += [
            {"name": c.get("name"), "args": c.get("args"), "invalid": True}
            for c in message.invalid_tool_calls
        ]
    if isinstance(message, ToolMessage):
        out["name"] = message.name or message.tool_call_id
        if message.status == "error":
            out["status"] = "error"
    return out


def _plain(value: Any) -> Any:
    """JSON-compatible value: messages as ``{"role", "content", ...}``, media blocks as
    their placeholder."""
    if isinstance(value, BaseMessage):
        return _plain_message(value)
    if isinstance(value, Mapping):
        if value.get("type") in _MEDIA_KINDS and any(k in value for k in _MEDIA_DATA_KEYS):
            return media_placeholder(value)
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
    if (at := surrogate_at(text)) >= 0:
        raise InvalidStateError(
            f"the state contains an unpaired surrogate ({text[at]!r} at index "
            f"{at}), which is not valid Unicode; decode its text with "
            "errors='replace' (or 'surrogateescape' then re-encode) before deciding"
        )


def render_state(state: Any) -> str:
    """The state as text: strings as they are, a message or a list of messages as a
    ``role: content`` transcript (the empty text when no message carries anything to
    read; docs/langgraph.md, "What the engine reads from messages", shows each kind of
    content), anything else JSON, dumped as vLLM's decisions endpoint dumps it
    (``ensure_ascii=False``) so a read built here matches one built there. Raises
    ``InvalidStateError`` for a state ``check_state`` refuses or that is no JSON.
    """
    check_state(state)
    if isinstance(state, str):
        return state
    if isinstance(state, BaseMessage):
        state = [state]
    if isinstance(state, Sequence) and state and all(isinstance(m, BaseMessage) for m in state):
        blocks = (b for m in state for b in m.content_blocks)
        if not any(_tool_calls(m) for m in state) and not any(map(_block_has_content, blocks)):
            return ""  # nothing to read: as the empty string (see render_state)
        return "\n".join(_message_text(m) for m in state)
    try:
        return json.dumps(_plain(state), ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise InvalidStateError(
            f"the state must be text, JSON-compatible data or LangChain messages; "
            f"could not render {type(state).__name__}: {e}"
        ) from e
