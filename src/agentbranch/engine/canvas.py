"""Prompt and canvas building: ``ReadRequest`` → ``TokenRead`` (token ids only).

``CanvasPlanner`` builds DiffusionGemma one-step reads exactly as vLLM's
``DiffusionGemmaCanvasStrategy`` (0.33) does (docs/design.md, "The read"):

* prompt = chat template (thinking off, generation prompt) + ``<|channel>thought\\n<channel|>``
  appended **outside** the canvas — unless the template already wrote that block, in
  which case it is not doubled (vLLM 0.32/0.33 double it with Gemma 4's mainline template);
* single read: canvas ``[noise, <turn|>, <pad>…]`` of width 16, slot at position 0;
* joint read: ``"k: <noise>\\n"`` lines on one canvas, one slot per question, width rounded
  up to 16, split into even chunks when the served canvas is too small;
* the noise token is drawn from a RNG seeded by a hash of the prompt ids, so a repeated
  read is identical. Extra noise draws (``draws > 1``) use further seeds.

``NextTokenPlanner`` builds next-token reads for ordinary causal models as vLLM's
``NextTokenStrategy`` does: the label is read at the reply's first token.

User content never becomes special tokens: by default a state or question containing
the tokenizer's special tokens is rejected; with ``special_tokens="text"`` those
characters are tokenized as plain text.

Over 500 lines: the token-level plan of one read (prompt, canvas, slots, label ids,
chunking) follows vLLM's strategy step by step, kept in one place so parity with vLLM
can be read and checked together.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from agentbranch.core.errors import (
    ConfigurationError,
    LabelTokenError,
    SpecialTokenError,
    StateTooLongError,
)
from agentbranch.core.examples import instructions_with_examples
from agentbranch.core.question_types import QUESTION_TYPES, question_type
from agentbranch.core.reads import QuestionSpec, ReadRequest, Slot, TokenRead

log = logging.getLogger("agentbranch.canvas")

THOUGHT = "<|channel>thought\n<channel|>"
END_OF_TURN = "<turn|>"
CANVAS_STEP = 16
JOINT_REPLY = 'Reply with one line per question, in order, formatted as "number: answer".'
#: Most questions one joint read numbers (vLLM's decision limit).
MAX_JOINT_QUESTIONS = 64
#: Private-use characters no template touches: where the user content goes in "text" mode.
_SENTINELS = ("\ue000", "\ue001")

SpecialTokens = Literal["reject", "text"]


class Tokenizer(Protocol):
    """The slice of a Hugging Face tokenizer the planners use."""

    pad_token_id: int | None

    def encode(self, text: str, add_special_tokens: bool = ..., **kw: Any) -> list[int]: ...
    def decode(self, ids: Sequence[int], **kw: Any) -> str: ...
    def apply_chat_template(self, conversation: Any, **kw: Any) -> Any: ...
    def get_added_vocab(self) -> dict[str, int]: ...


@dataclass
class ReadPlan:
    """The token reads for one ``ReadRequest``.

    ``where[q][d] = (token_read_index, slot_index)`` locates question ``q``'s answer
    for noise draw ``d`` in ``token_reads``.
    """

    token_reads: list[TokenRead] = field(default_factory=list)
    where: list[list[tuple[int, int]]] = field(default_factory=list)


def asked(q: QuestionSpec) -> QuestionSpec:
    """The question as the prompt shows it: its examples (if any) become few-shot lines
    at the end of its instructions (``agentbranch.core.examples``)."""
    if not q.examples:
        return q
    return replace(
        q, instructions=instructions_with_examples(q.instructions, q.options, q.examples)
    )


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
        return self._render_as_text(content, system)

    def render_many(
        self, head: str, tails: Sequence[str], system: str | None = None
    ) -> list[list[int]]:
        """Prompt ids for the user turns ``head + tail``, one per tail, tokenizing the
        shared ``head`` (the state) ONCE and each tail on its own (``render_shared``)."""
        return self.render_shared(head, tails, system)[0]

    def render_shared(
        self, head: str, tails: Sequence[str], system: str | None = None
    ) -> tuple[list[list[int]], list[int]]:
        """``render_many``'s prompts, and the ids of the rendered head that the prompts
        joined at the head start with (``[]`` when every prompt was rendered whole).

        A tail's ids are only joined to the head's when that is exactly what tokenizing
        the whole prompt gives: the rendered text must be the head's text, the tail and
        the template's ending, and the head's last tokens must re-tokenize the same with
        the tail after them (no token straddles the join). Otherwise, and for content
        with special tokens, that prompt is rendered whole, as ``render`` does."""
        whole = lambda tail: self.render(head + tail, system)  # noqa: E731
        if len(tails) < 2 or self.special_tokens_in(head) or self.special_tokens_in(system or ""):
            return [whole(t) for t in tails], []
        marker = _SENTINELS[0]
        text = self._template(self.messages(head + marker, system))
        if text.count(marker) != 1 or marker in head:
            return [whole(t) for t in tails], []
        text_head, text_end = text.split(marker)
        head_ids = self._encode(text_head)
        m = min(4, len(head_ids))
        probe = head_ids[len(head_ids) - m :]
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
        """Prompt ids of a whole conversation (``{"role", "content"}`` dicts), generation
        prompt on and thinking off. Special tokens in any content raise
        ``SpecialTokenError`` as ``render`` does, or are read as plain text with
        ``special_tokens="text"`` (default: this prompt's mode)."""
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
        # As _render_as_text: each content tokenized on its own, special tokens split.
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

    def _render_as_text(self, content: str, system: str | None) -> list[int]:
        # Render with placeholders, then tokenize the user's text on its own with
        # special-token splitting on, so "<turn|>" there stays characters.
        placeholder_user, placeholder_system = _SENTINELS
        text = self._template(
            self.messages(placeholder_user, placeholder_system if system else None)
        )
        ids: list[int] = []
        pieces = {placeholder_user: content, placeholder_system: system or ""}
        rest = text
        while True:
            hits = [(rest.find(s), s) for s in pieces if s in rest]
            if not hits:
                break
            at, sentinel = min(hits)
            ids += self._encode(rest[:at])
            ids += list(
                self.tokenizer.encode(
                    pieces[sentinel], add_special_tokens=False, split_special_tokens=True
                )
            )
            rest = rest[at + len(sentinel) :]
        return ids + self._encode(rest)


def joint_spans(rows: Sequence[int], served: int) -> list[tuple[int, int]]:
    """The fewest even runs ``[a, b)`` of answer lines (``rows[i]`` tokens each: the
    ``"k: "`` prefix, the slot and the newline) that fit a served canvas of ``served``
    tokens: vLLM's ``_joint_chunks``. One line per run when nothing else fits."""
    for count in range(1, len(rows)):
        size, extra = divmod(len(rows), count)
        bounds = [i * size + min(i, extra) for i in range(count + 1)]
        spans = list(zip(bounds, bounds[1:]))
        # The lines and <turn|> must leave a pad row, or label mass is lost.
        if all(1 + sum(rows[a:b]) < served for a, b in spans):
            return spans
    return [(k, k + 1) for k in range(len(rows))]


def joint_width(content: int) -> int:
    """The canvas width of a joint read whose lines and ``<turn|>`` take ``content``
    tokens: at least one pad after them, rounded up to a multiple of 16."""
    return -(-(content + 1) // CANVAS_STEP) * CANVAS_STEP


def _noise_rng(prompt_ids: Sequence[int], draw: int) -> random.Random:
    """vLLM's noise RNG for draw 0; further draws hash a draw suffix in."""
    key = json.dumps(list(prompt_ids)).encode()
    if draw:
        key += f"/draw{draw}".encode()
    return random.Random(hashlib.sha256(key).digest())


class NoiseSeeds:
    """``_noise_rng`` for prompts that share a prefix (the state), hashing the prefix's
    part of the key once: sha256 is fed the same bytes (the JSON of the whole id list,
    then the draw suffix) in two pieces, so every seed is bit-identical to
    ``_noise_rng``'s. A prompt that does not start with ``prefix`` is hashed whole. The
    prefix is hashed on first use (next-token plans never ask)."""

    def __init__(self, prefix: Sequence[int] = ()) -> None:
        self.prefix = list(prefix)
        self._head: Any = None

    def rng(self, prompt_ids: Sequence[int], draw: int = 0) -> random.Random:
        """vLLM's noise RNG for ``prompt_ids`` and noise draw ``draw``."""
        n = len(self.prefix)
        if not n or len(prompt_ids) <= n or list(prompt_ids[:n]) != self.prefix:
            return _noise_rng(prompt_ids, draw)
        if self._head is None:
            # json.dumps([1, 2, 3]) is "[1, 2, 3]": the prefix's part is "[1, 2, 3" and a
            # longer prompt's JSON continues with ", 4, 5]".
            self._head = hashlib.sha256(json.dumps(self.prefix)[:-1].encode())
        sha = self._head.copy()
        sha.update(b", " + json.dumps(list(prompt_ids[n:]))[1:].encode())
        if draw:
            sha.update(f"/draw{draw}".encode())
        return random.Random(sha.digest())


class _PlannerBase:
    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        max_model_len: int,
        chat_template: str | None = None,
        special_tokens: SpecialTokens = "reject",
        template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len
        self.chat = ChatPrompt(
            tokenizer,
            chat_template=chat_template,
            special_tokens=special_tokens,
            template_kwargs=template_kwargs,
        )
        # Every prompt ends with the same generation prompt, so a label's token is the
        # same for every question.
        self.tail = prompt_tail(tokenizer, self.chat.generation_prompt())
        self._label_ids: dict[str, int] = {}

    def _reply_anchor(self) -> list[int]:
        """The ids after which the reply's first token is read."""
        raise NotImplementedError

    def label_ids(self, labels: Sequence[str]) -> list[int]:
        """The reply's first token for each label (cached per label set)."""
        missing = [x for x in labels if x not in self._label_ids]
        if missing:
            for qtype in QUESTION_TYPES.values():
                if set(missing) & set(qtype.label_set):
                    ids = reply_label_ids(self.tokenizer, self._reply_anchor(), qtype.label_set)
                    self._label_ids.update(zip(qtype.label_set, ids))
        return [self._label_ids[x] for x in labels]

    def _check_labels(self, q: QuestionSpec) -> None:
        if len(q.labels) != len(q.options):
            raise ConfigurationError(
                f"question {q.id!r} has {len(q.options)} options but "
                f"{len(q.labels)} labels; the engine should have split it"
            )

    def _render(self, content: str, system: str | None) -> list[int]:
        return self._checked(self.chat.render(content, system))

    def _render_after_state(
        self, state: str, parts: Sequence[str], system: str | None
    ) -> tuple[list[list[int]], NoiseSeeds]:
        """``_render(f"{state}\n\n{part}")`` for each part, the state tokenized once, and
        the noise seeds for these prompts (the state's part of the key hashed once)."""
        prompts, head = self.chat.render_shared(f"{state}\n\n", parts, system)
        return [self._checked(ids) for ids in prompts], NoiseSeeds(head)

    def _checked(self, ids: list[int]) -> list[int]:
        if ids[len(ids) - len(self.tail) :] != self.tail:
            raise ConfigurationError(
                "the chat template ends this prompt differently from its generation "
                "prompt, so the labels' tokens are unknown; check chat_template"
            )
        return ids

    def _check_length(self, prompt_len: int, extra: int) -> None:
        if prompt_len + extra > self.max_model_len:
            raise StateTooLongError(
                f"the prompt has {prompt_len} tokens and the read adds {extra}, more "
                f"than the model's max_model_len={self.max_model_len}. Shorten the "
                "state (e.g. keep only the recent messages or summarise them) or serve "
                "the model with a larger max_model_len."
            )

    @staticmethod
    def question_text(q: QuestionSpec) -> str:
        """What a single read asks after the state."""
        return question_type(q.type).prompt(asked(q))

    @classmethod
    def content(cls, state: str, q: QuestionSpec) -> str:
        """The user turn of a single read: the state, then the question."""
        return f"{state}\n\n{cls.question_text(q)}"


class NextTokenPlanner(_PlannerBase):
    """Next-token reads for causal models: one request per question, the label read at
    the reply's first token. Joint reads and noise draws do not apply."""

    def _reply_anchor(self) -> list[int]:
        return self.chat.generation_prompt()

    def plan(self, request: ReadRequest) -> ReadPlan:
        plan = ReadPlan()
        for q in request.questions:
            self._check_labels(q)
        prompts, _ = self._render_after_state(
            request.state, [self.question_text(q) for q in request.questions], request.instructions
        )
        for q, ids in zip(request.questions, prompts):
            self._check_length(len(ids), 1)
            groups = tuple((i,) for i in self.label_ids(q.labels))
            plan.where.append([(len(plan.token_reads), 0)])
            plan.token_reads.append(TokenRead(tuple(ids), (), (Slot(0, groups),), read_length=1))
        return plan


class CanvasPlanner(_PlannerBase):
    """DiffusionGemma one-step canvas reads (single and joint), as vLLM builds them."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        vocab_size: int,
        served_canvas: int,
        max_model_len: int,
        chat_template: str | None = None,
        special_tokens: SpecialTokens = "reject",
        template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            tokenizer,
            max_model_len=max_model_len,
            chat_template=chat_template,
            special_tokens=special_tokens,
            template_kwargs=template_kwargs,
        )
        self.thought = tokenizer.encode(THOUGHT, add_special_tokens=False)
        end = tokenizer.encode(END_OF_TURN, add_special_tokens=False)
        if tokenizer.pad_token_id is None or len(end) != 1:
            raise ConfigurationError(
                f"canvas reads need the model's {END_OF_TURN!r} and pad tokens; this "
                "tokenizer is not a DiffusionGemma tokenizer (use next-token mode)"
            )
        self.end = end[0]
        self.pad = tokenizer.pad_token_id
        self.vocab_size = vocab_size
        self.served = served_canvas
        self.width = CANVAS_STEP
        if self.width > served_canvas:
            raise ConfigurationError(
                f"canvas reads need a canvas of {self.width} tokens and the model "
                f"serves {served_canvas}; serve a canvas_length of at least {self.width}"
            )
        # Does the template write the thought block itself (Gemma 4 mainline)?
        self.template_has_thought = self._ends_with_thought(self.chat.generation_prompt())
        if self.template_has_thought:
            log.info("chat template writes the thought block; it will not be doubled")
        self._joint_ok: bool | None = None

    def _reply_anchor(self) -> list[int]:
        return self.thought

    def _ends_with_thought(self, ids: Sequence[int]) -> bool:
        n = len(self.thought)
        return n > 0 and list(ids[len(ids) - n :]) == self.thought

    def _checked(self, ids: list[int]) -> list[int]:
        if self.template_has_thought:
            if not self._ends_with_thought(ids):
                raise ConfigurationError("the chat template's thought block went missing")
            # Hash and check the prompt without its thought block, as vLLM sees it
            # with a template that does not write one.
            ids = ids[: len(ids) - len(self.thought)]
        if ids[len(ids) - len(self.tail) :] != self.tail and not self.template_has_thought:
            raise ConfigurationError(
                "the chat template ends this prompt differently from its generation "
                "prompt, so the labels' tokens are unknown; check chat_template"
            )
        return ids

    def _read_prompt(self, prompt_ids: list[int], width: int) -> tuple[int, ...]:
        extra = len(self.thought) + width
        self._check_length(len(prompt_ids), extra)
        # The thought block must sit outside the canvas (vLLM: far worse inside it).
        return tuple(prompt_ids + self.thought)

    # -- single reads --------------------------------------------------------------

    def _single(
        self,
        plan: ReadPlan,
        q: QuestionSpec,
        prompt_ids: list[int],
        draws: int,
        seeds: NoiseSeeds | None = None,
    ) -> None:
        groups = tuple((i,) for i in self.label_ids(q.labels))
        prompt = self._read_prompt(prompt_ids, self.width)
        spots = []
        for d in range(draws):
            noise = (seeds or NoiseSeeds()).rng(prompt_ids, d).randrange(self.vocab_size)
            canvas = [noise, self.end] + [self.pad] * (self.width - 2)
            spots.append((len(plan.token_reads), 0))
            plan.token_reads.append(
                TokenRead(prompt, tuple(canvas), (Slot(0, groups),), read_length=2)
            )
        plan.where.append(spots)

    # -- joint reads ---------------------------------------------------------------

    def _init_joint(self) -> bool:
        """Whether every answer line ``"k: label"`` is a prefix plus one label token."""
        encode = lambda text: list(self.tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
        self.newline = encode("\n")
        self.line_prefix: dict[tuple[int, tuple[str, ...]], list[int]] = {}
        self.slot_label_ids: dict[str, int] = {}
        if len(self.newline) != 1:
            log.warning("joint reads off: a newline is not one token")
            return False
        sets = {t.label_set for t in QUESTION_TYPES.values()}
        for k in range(1, MAX_JOINT_QUESTIONS + 1):
            for label_set in sets:
                prefix = encode(f"{k}: {label_set[0]}")[:-1]
                for label in label_set:
                    line = encode(f"{k}: {label}")
                    after = encode(f"{k}: {label}\n{k}: {label}")
                    slot_id = self.slot_label_ids.setdefault(label, line[-1])
                    if (
                        after != line + self.newline + line
                        or line[:-1] != prefix
                        or slot_id != line[-1]
                    ):
                        line_text = f"{k}: {label}"
                        log.warning("joint reads off: answer line %r does not split", line_text)
                        return False
                self.line_prefix[(k, label_set)] = prefix
        return True

    @property
    def joint_reads(self) -> bool:
        """Whether this tokenizer supports joint reads (checked once)."""
        if self._joint_ok is None:
            self._joint_ok = self._init_joint()
        return self._joint_ok

    def joint_chunks(
        self, questions: Sequence[QuestionSpec]
    ) -> list[tuple[int, list[QuestionSpec]]]:
        """The fewest even runs of questions that fit the canvas, each with its first
        number (vLLM's ``_joint_chunks``)."""
        rows = [
            len(self.line_prefix[(k, question_type(q.type).label_set)]) + 2
            for k, q in enumerate(questions, 1)
        ]
        return [(a + 1, list(questions[a:b])) for a, b in joint_spans(rows, self.served)]

    def joint_content(self, state: str, questions: Sequence[QuestionSpec], start: int) -> str:
        """The user turn of a joint read: the state, then the numbered questions."""
        return f"{state}\n\n{self.joint_text(questions, start)}"

    @staticmethod
    def joint_text(questions: Sequence[QuestionSpec], start: int) -> str:
        """What a joint read asks after the state: the numbered questions."""
        asks = "\n\n".join(
            question_type(q.type).joint_prompt(k, asked(q)) for k, q in enumerate(questions, start)
        )
        return f"{asks}\n\n{JOINT_REPLY}"

    def joint_canvas(
        self,
        questions: Sequence[QuestionSpec],
        prompt_ids: Sequence[int],
        start: int,
        draw: int = 0,
        seeds: NoiseSeeds | None = None,
    ) -> tuple[list[int], list[Slot]]:
        """The answer lines with noise in the slots, and each slot's label ids."""
        rng = (seeds or NoiseSeeds()).rng(prompt_ids, draw)
        canvas: list[int] = []
        slots: list[Slot] = []
        for k, q in enumerate(questions, start):
            canvas += self.line_prefix[(k, question_type(q.type).label_set)]
            label_ids = self.label_ids(q.labels)
            # A label also counts without its leading space, as in a single read.
            groups = tuple(
                tuple(dict.fromkeys([self.slot_label_ids[x], i]))
                for x, i in zip(q.labels, label_ids)
            )
            slots.append(Slot(len(canvas), groups))
            canvas += [rng.randrange(self.vocab_size), *self.newline]
        canvas.append(self.end)
        width = min(joint_width(len(canvas)), self.served)
        return canvas + [self.pad] * (width - len(canvas)), slots

    def _joint(self, plan: ReadPlan, request: ReadRequest) -> None:
        draws = max(1, request.draws)
        spots: list[list[tuple[int, int]]] = []
        chunks = self.joint_chunks(request.questions)
        prompts, seeds = self._render_after_state(
            request.state, [self.joint_text(c, start) for start, c in chunks], request.instructions
        )
        for (start, chunk), prompt_ids in zip(chunks, prompts):
            chunk_spots: list[list[tuple[int, int]]] = [[] for _ in chunk]
            for d in range(draws):
                canvas, slots = self.joint_canvas(chunk, prompt_ids, start, d, seeds)
                prompt = self._read_prompt(prompt_ids, len(canvas))
                index = len(plan.token_reads)
                plan.token_reads.append(
                    TokenRead(
                        prompt, tuple(canvas), tuple(slots), read_length=slots[-1].position + 1
                    )
                )
                for n in range(len(chunk)):
                    chunk_spots[n].append((index, n))
            spots += chunk_spots
        plan.where += spots

    def plan(self, request: ReadRequest) -> ReadPlan:
        """The token reads for ``request``: joint when asked and supported (and more
        than one question), else one canvas per question."""
        for q in request.questions:
            self._check_labels(q)
        plan = ReadPlan()
        if request.joint and len(request.questions) > 1 and self.joint_reads:
            self._joint(plan, request)
            return plan
        prompts, seeds = self._render_after_state(
            request.state, [self.question_text(q) for q in request.questions], request.instructions
        )
        for q, prompt_ids in zip(request.questions, prompts):
            self._single(plan, q, prompt_ids, max(1, request.draws), seeds)
        return plan
