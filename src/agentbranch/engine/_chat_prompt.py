"""The chat prompt of a read: the model's chat template rendered to token ids, with user
content that never becomes special tokens, and the label ids of a reply's first token.

``agentbranch.engine.canvas`` builds the reads on it (this module is its private part)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from agentbranch.core.errors import ConfigurationError, LabelTokenError, SpecialTokenError

__all__ = ["ChatPrompt", "SpecialTokens", "Tokenizer", "prompt_tail", "reply_label_ids"]

#: A private-use character no template touches: where the prompt's content goes.
_MARK = "\ue000"

SpecialTokens = Literal["reject", "text"]


class Tokenizer(Protocol):
    """The slice of a Hugging Face tokenizer the planners use."""

    pad_token_id: int | None

    def encode(self, text: str, add_special_tokens: bool = ..., **kw: Any) -> list[int]: ...
    def decode(self, ids: Sequence[int], **kw: Any) -> str: ...
    def apply_chat_template(self, conversation: Any, **kw: Any) -> Any: ...
    def get_added_vocab(self) -> dict[str, int]: ...


def prompt_tail(tokenizer: Tokenizer, prompt_ids: Sequence[int]) -> list[int]:
    """The prompt's ids after its last added (special) token."""
    added = set(tokenizer.get_added_vocab().values())
    start = max((i + 1 for i, t in enumerate(prompt_ids) if t in added), default=0)
    return list(prompt_ids[start:])


def reply_label_ids(
    tokenizer: Tokenizer, prompt_ids: Sequence[int], labels: Sequence[str]
) -> list[int]:
    """The token each label adds as the reply's first token after ``prompt_ids``
    (vLLM's ``reply_label_ids``). Raises ``LabelTokenError`` unless each label is one
    distinct token there."""
    tail = prompt_tail(tokenizer, prompt_ids)
    text = tokenizer.decode(tail)
    ids: list[int] = []
    for label in labels:
        extended = tokenizer.encode(text + label, add_special_tokens=False)
        if extended[:-1] != tail or extended[-1] in ids:
            raise LabelTokenError(
                f"label {label!r} is not one distinct token at the start of this "
                "model's reply, so its probability cannot be read in one step. This "
                "tokenizer cannot serve these labels; use a model whose tokenizer "
                "keeps A-Z, yes/no and 0-9 as single tokens (Gemma, Qwen and Llama "
                "tokenizers do)."
            )
        ids.append(extended[-1])
    return ids


class ChatPrompt:
    """Renders a user turn (and optional system turn) through the chat template with
    thinking off and the generation prompt on, into token ids."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        chat_template: str | None = None,
        special_tokens: SpecialTokens = "reject",
        template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if special_tokens not in ("reject", "text"):
            raise ConfigurationError(
                f"special_tokens must be 'reject' or 'text', got {special_tokens!r}"
            )
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.special_tokens = special_tokens
        self.template_kwargs = dict(template_kwargs or {})
        added = set(tokenizer.get_added_vocab())
        added |= set(getattr(tokenizer, "all_special_tokens", ()) or ())
        # Longest first so "<turn|>" is reported, not a shorter token inside it.
        self._special = sorted((t for t in added if t), key=len, reverse=True)
        # One regex scan says whether any special token occurs at all (the usual answer is
        # no); a tokenizer has hundreds of them (Gemma's <unusedN>), one `in` each is slow.
        self._any_special = (
            re.compile("|".join(map(re.escape, self._special))) if self._special else None
        )

    def _template(self, messages: list[dict[str, str]]) -> str:
        text = self.tokenizer.apply_chat_template(
            messages,
            **{
                **self.template_kwargs,
                "chat_template": self.chat_template,
                "add_generation_prompt": True,
                "tokenize": False,
                "enable_thinking": False,
            },
        )
        if not isinstance(text, str):
            raise ConfigurationError("the chat template did not render to text")
        return text

    def generation_prompt(self) -> list[int]:
        """A chat prompt up to the generation prompt, with thinking off (vLLM's probe)."""
        return self._encode(self._template([{"role": "user", "content": "x"}]))

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def special_tokens_in(self, text: str) -> list[str]:
        """The special tokens that occur in ``text``."""
        if self._any_special is None or not self._any_special.search(text):
            return []
        found: list[str] = []
        for token in self._special:
            if token in text and not any(token in f for f in found):
                found.append(token)
        return found

    @staticmethod
    def messages(content: str, system: str | None) -> list[dict[str, str]]:
        messages = [{"role": "user", "content": content}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        return messages

    def render(self, content: str, system: str | None = None) -> list[int]:
        """Prompt ids for one user turn. Raises ``SpecialTokenError`` (mode
        ``"reject"``) if the content holds special tokens."""
        found = self.special_tokens_in(content) + self.special_tokens_in(system or "")
        if not found:
            return self._encode(self._template(self.messages(content, system)))
        if self.special_tokens == "reject":
            raise SpecialTokenError(
                f"the state or question text contains the model's special token(s) "
                f"{found}; read as control tokens they would end the user turn or fake "
                "a reply. Remove them from the content, or build the engine with "
                "special_tokens='text' to read them as plain text."
            )
        return self._as_text(self.messages(content, system))

    def render_shared(
        self, head: str, tails: Sequence[str], system: str | None = None
    ) -> tuple[list[list[int]], list[int]]:
        """Prompt ids for the user turns ``head + tail``, one per tail, the shared ``head``
        (the state) tokenized once; and the ids of the rendered head that the prompts
        joined at the head start with (``[]`` when every prompt was rendered whole). A
        tail's ids are joined to the head's only when that is exactly what tokenizing the
        whole prompt gives (no token straddles the join); else it is rendered whole."""
        whole = lambda tail: self.render(head + tail, system)  # noqa: E731
        if len(tails) < 2 or self.special_tokens_in(head) or self.special_tokens_in(system or ""):
            return [whole(t) for t in tails], []
        text = self._template(self.messages(head + _MARK, system))
        if text.count(_MARK) != 1 or _MARK in head:
            return [whole(t) for t in tails], []
        text_head, text_end = text.split(_MARK)
        head_ids = self._encode(text_head)
        probe = head_ids[-4:]
        probe_text = self.tokenizer.decode(
            probe, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        if self._encode(probe_text) != probe:
            return [whole(t) for t in tails], []
        out = []
        for tail in tails:
            rendered = self._template(self.messages(head + tail, system))
            if self.special_tokens_in(tail) or rendered != text_head + tail + text_end:
                out.append(whole(tail))
                continue
            rest = self._encode(tail + text_end)
            if self._encode(probe_text + tail + text_end) != probe + rest:
                out.append(whole(tail))  # a token straddles the join
                continue
            out.append(head_ids + rest)
        return out, head_ids

    def render_messages(
        self, messages: Sequence[dict[str, str]], special_tokens: SpecialTokens | None = None
    ) -> list[int]:
        """Prompt ids of a whole conversation (``{"role", "content"}`` dicts); special tokens
        in any content are refused or read as text as in ``render`` (``special_tokens``,
        default: this prompt's mode)."""
        mode = special_tokens or self.special_tokens
        if mode not in ("reject", "text"):
            raise ConfigurationError(f"special_tokens must be 'reject' or 'text', got {mode!r}")
        found: list[str] = []
        for m in messages:
            found += [t for t in self.special_tokens_in(m["content"]) if t not in found]
        if not found:
            return self._encode(self._template(list(messages)))
        if mode == "reject":
            raise SpecialTokenError(
                f"a message contains the model's special token(s) {found}; read as "
                "control tokens they would end a turn or fake a reply. Remove them from "
                "the content, or pass special_tokens='text' to read them as plain text."
            )
        return self._as_text(messages)

    def _as_text(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Prompt ids of ``messages``, each content tokenized on its own with special-token
        splitting on (so "<turn|>" there stays characters): the template is rendered with
        private-use placeholders in the contents' places."""
        marks = [chr(0xE000 + i) for i in range(len(messages))]
        if any(mark in m["content"] for m in messages for mark in marks):
            raise ConfigurationError(
                "a message contains Unicode private-use characters U+E000.. that the "
                "special_tokens='text' rendering uses as placeholders; remove them"
            )
        text = self._template([{**m, "content": k} for m, k in zip(messages, marks)])
        ids: list[int] = []
        for mark, m in zip(marks, messages):
            if text.count(mark) != 1:
                raise ConfigurationError(
                    "the chat template does not show each message's content once; "
                    "special_tokens='text' cannot render this conversation"
                )
            head, text = text.split(mark)
            ids += self._encode(head)
            ids += list(
                self.tokenizer.encode(
                    m["content"], add_special_tokens=False, split_special_tokens=True
                )
            )
        return ids + self._encode(text)
