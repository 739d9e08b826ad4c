"""The input rules of ``LocalChatModel``: its options (``check_options``) and its
messages (``chat_messages``), checked as a read checks its own: the same error types
(``ConfigurationError`` for an option, ``InvalidStateError`` for a message nothing can be
read in or that is not valid Unicode) and a message that says what to change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from agentbranch.core.errors import ConfigurationError, InvalidStateError, surrogate_at

__all__ = ["OPTIONS", "chat_messages", "check_options"]

#: The generation options a ``LocalChatModel`` takes as defaults or per call.
OPTIONS = ("max_tokens", "temperature", "stop", "seed", "steps", "choices", "special_tokens")

_ROLES = {"system": "system", "human": "user", "ai": "assistant"}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse option values a generation cannot honour: a count of ``2.5`` is refused,
    never cut to ``2``."""
    if "max_tokens" in options:
        value = options["max_tokens"]
        if not _is_int(value) or value < 1:
            raise ConfigurationError(f"max_tokens must be an integer >= 1, got {value!r}")
    if options.get("steps") is not None:
        value = options["steps"]
        if not _is_int(value) or value < 1:
            raise ConfigurationError(
                f"steps must be an integer >= 1 (or None for the model's schedule), got {value!r}"
            )
    if options.get("seed") is not None and not _is_int(options["seed"]):
        raise ConfigurationError(f"seed must be an integer (or None), got {options['seed']!r}")
    temperature = options.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise ConfigurationError(
            f"temperature must be a finite number >= 0 (or None), got {temperature!r}"
        )
    for name in ("stop", "choices"):
        value = options.get(name)
        if value is not None and (
            isinstance(value, str) or not all(isinstance(v, str) for v in value)
        ):
            raise ConfigurationError(f"{name} must be a list of strings, got {value!r}")
        for v in value or ():
            if surrogate_at(v) >= 0:
                raise ConfigurationError(
                    f"{name} holds {v!r}, which has an unpaired surrogate (not valid "
                    "Unicode); decode the text with errors='replace' first"
                )
    mode = options.get("special_tokens")
    if mode not in (None, "reject", "text"):
        raise ConfigurationError(f"special_tokens must be 'reject' or 'text', got {mode!r}")


def chat_messages(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages as the chat template's ``{"role", "content"}`` dicts (system,
    user and assistant turns; text content only)."""
    out = []
    for i, message in enumerate(messages):
        role = _ROLES.get(message.type)
        if role is None:
            raise ConfigurationError(
                f"a local chat model takes system, human and AI messages, not "
                f"{message.type!r} ({type(message).__name__}); tool calling is not supported"
            )
        for block in message.content if isinstance(message.content, list) else ():
            kind = block.get("type") if isinstance(block, dict) else type(block)
            if kind != "text" and not isinstance(block, str):
                raise ConfigurationError(
                    f"a local chat model takes text content only, got a {kind!r} block"
                )
        content = str(message.text)
        if not content.strip():
            raise InvalidStateError(
                f"message {i} ({type(message).__name__}) is empty or whitespace only; a "
                "chat model has nothing to read there. Drop the message or give it text."
            )
        if (at := surrogate_at(content)) >= 0:
            raise InvalidStateError(
                f"message {i} ({type(message).__name__}) contains an unpaired surrogate "
                f"({content[at]!r} at index {at}), which is not valid Unicode; decode its "
                "text with errors='replace' (or 'surrogateescape' then re-encode) first"
            )
        out.append({"role": role, "content": content})
    if not out:
        raise ConfigurationError("a chat model call needs at least one message")
    return out
