"""Prompt and canvas building: ``ReadRequest`` → ``TokenRead`` (token ids only).

``CanvasPlanner`` builds DiffusionGemma one-step reads exactly as vLLM's
``DiffusionGemmaCanvasStrategy`` (0.33) does (docs/design.md, "The read");
``NextTokenPlanner`` builds next-token reads for causal models as vLLM's
``NextTokenStrategy`` does. The chat prompt is ``agentbranch.engine._chat_prompt``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agentbranch.core.errors import (
    ConfigurationError,
    StateTooLongError,
)
from agentbranch.core.examples import instructions_with_examples
from agentbranch.core.question_types import QUESTION_TYPES, question_type
from agentbranch.core.reads import QuestionSpec, ReadRequest, Slot, TokenRead
from agentbranch.engine._chat_prompt import (
    ChatPrompt,
    SpecialTokens,
    Tokenizer,
    prompt_tail,
    reply_label_ids,
)

__all__ = [
    "CANVAS_STEP",
    "END_OF_TURN",
    "JOINT_REPLY",
    "MAX_JOINT_QUESTIONS",
    "THOUGHT",
    "CanvasPlanner",
    "ChatPrompt",
    "NextTokenPlanner",
    "NoiseSeeds",
    "ReadPlan",
    "SpecialTokens",
    "Tokenizer",
    "asked",
    "joint_spans",
    "joint_width",
    "prompt_tail",
    "reply_label_ids",
]

log = logging.getLogger("agentbranch.canvas")

THOUGHT = "<|channel>thought\n<channel|>"
END_OF_TURN = "<turn|>"
CANVAS_STEP = 16
JOINT_REPLY = 'Reply with one line per question, in order, formatted as "number: answer".'
#: Most questions one joint read numbers (vLLM's decision limit).
MAX_JOINT_QUESTIONS = 64


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


class NoiseSeeds:
    """vLLM's noise RNG (seeded by the sha256 of the prompt ids' JSON; further draws hash
    a draw suffix in), for prompts that share a prefix (the state): the prefix's part of
    the key is hashed once (on first use)."""

    def __init__(self, prefix: Sequence[int] = ()) -> None:
        self.prefix = list(prefix)
        self._head: Any = None

    def rng(self, prompt_ids: Sequence[int], draw: int = 0) -> random.Random:
        """vLLM's noise RNG for ``prompt_ids`` and noise draw ``draw``."""
        n = len(self.prefix)
        if not n or len(prompt_ids) <= n or list(prompt_ids[:n]) != self.prefix:
            sha = hashlib.sha256(json.dumps(list(prompt_ids)).encode())
        else:
            if self._head is None:
                # json.dumps([1, 2, 3]) is "[1, 2, 3]": the prefix's part is "[1, 2, 3"
                # and a longer prompt's JSON continues with ", 4, 5]".
                self._head = hashlib.sha256(json.dumps(self.prefix)[:-1].encode())
            sha = self._head.copy()
            sha.update(b", " + json.dumps(list(prompt_ids[n:]))[1:].encode())
        if draw:
            sha.update(f"/draw{draw}".encode())
        return random.Random(sha.digest())


class _PlannerBase:
    #: The ids every read's prompt ends with after the chat template (``CanvasPlanner``'s
    #: thought block; none for next-token reads).
    thought: Sequence[int] = ()

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
        missing = {x for x in labels if x not in self._label_ids}
        for qtype in QUESTION_TYPES.values():
            if missing & set(qtype.label_set):
                ids = reply_label_ids(self.tokenizer, self._reply_anchor(), qtype.label_set)
                self._label_ids.update(zip(qtype.label_set, ids))
        return [self._label_ids[x] for x in labels]

    def _check_labels(self, q: QuestionSpec) -> None:
        if len(q.labels) != len(q.options):
            raise ConfigurationError(
                f"question {q.id!r} has {len(q.options)} options but "
                f"{len(q.labels)} labels; the engine should have split it"
            )

    def _render_after_state(
        self, state: str, parts: Sequence[str], system: str | None
    ) -> tuple[list[list[int]], NoiseSeeds]:
        """The prompt of ``f"{state}\n\n{part}"`` for each part, the state tokenized once, and
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
    """DiffusionGemma one-step canvas reads (single and joint), as vLLM builds them
    (docs/design.md, "The read": the prompt, its thought block never doubled, the canvases
    and their noise); ``options`` are ``NextTokenPlanner``'s (``max_model_len``, the chat
    template's)."""

    def __init__(
        self, tokenizer: Tokenizer, *, vocab_size: int, served_canvas: int, **options: Any
    ) -> None:
        super().__init__(tokenizer, **options)
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

    def _reply_anchor(self) -> list[int]:
        return self.thought

    def _ends_with_thought(self, ids: Sequence[int]) -> bool:
        n = len(self.thought)
        return n > 0 and list(ids[len(ids) - n :]) == self.thought

    def _checked(self, ids: list[int]) -> list[int]:
        if not self.template_has_thought:
            return super()._checked(ids)
        if not self._ends_with_thought(ids):
            raise ConfigurationError("the chat template's thought block went missing")
        # The prompt without its thought block, as vLLM sees it with a template that
        # does not write one.
        return ids[: len(ids) - len(self.thought)]

    def _read_prompt(self, prompt_ids: list[int], width: int) -> tuple[int, ...]:
        self._check_length(len(prompt_ids), len(self.thought) + width)
        # The thought block must sit outside the canvas (vLLM: far worse inside it).
        return tuple(prompt_ids + self.thought)

    # -- single reads --------------------------------------------------------------

    def _single(
        self, plan: ReadPlan, q: QuestionSpec, prompt_ids: list[int], draws: int, seeds: NoiseSeeds
    ) -> None:
        groups = tuple((i,) for i in self.label_ids(q.labels))
        prompt = self._read_prompt(prompt_ids, self.width)
        plan.where.append([(len(plan.token_reads) + d, 0) for d in range(draws)])
        for d in range(draws):
            noise = seeds.rng(prompt_ids, d).randrange(self.vocab_size)
            canvas = [noise, self.end] + [self.pad] * (self.width - 2)
            plan.token_reads.append(
                TokenRead(prompt, tuple(canvas), (Slot(0, groups),), read_length=2)
            )

    # -- joint reads ---------------------------------------------------------------

    @functools.cached_property
    def joint_reads(self) -> bool:
        """Whether this tokenizer supports joint reads (checked once): every answer line
        ``"k: label"`` is a prefix plus one label token."""
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
                    split = after == line + self.newline + line and line[:-1] == prefix
                    if not split or slot_id != line[-1]:
                        line_text = f"{k}: {label}"
                        log.warning("joint reads off: answer line %r does not split", line_text)
                        return False
                self.line_prefix[(k, label_set)] = prefix
        return True

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
        draw: int,
        seeds: NoiseSeeds,
    ) -> tuple[list[int], list[Slot]]:
        """The answer lines with noise in the slots, and each slot's label ids."""
        rng = seeds.rng(prompt_ids, draw)
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
        chunks = self.joint_chunks(request.questions)
        prompts, seeds = self._render_after_state(
            request.state, [self.joint_text(c, start) for start, c in chunks], request.instructions
        )
        for (start, chunk), prompt_ids in zip(chunks, prompts):
            # The chunk's question n is slot n of each of its draws' reads.
            first = len(plan.token_reads)
            plan.where += [[(first + d, n) for d in range(draws)] for n in range(len(chunk))]
            for d in range(draws):
                canvas, slots = self.joint_canvas(chunk, prompt_ids, start, d, seeds)
                prompt = self._read_prompt(prompt_ids, len(canvas))
                plan.token_reads.append(
                    TokenRead(
                        prompt, tuple(canvas), tuple(slots), read_length=slots[-1].position + 1
                    )
                )

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
