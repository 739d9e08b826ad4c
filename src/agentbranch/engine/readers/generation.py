"""Generation on a reader's own model: the request and result a generator handles.

A reader that can also let its model speak (``VLLMReader``, ``TransformersReader``)
offers a ``Generator`` (``TransformersGenerator``, ``VLLMGenerator``), which
``LocalChatModel`` wraps as a LangChain chat model.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agentbranch.core.errors import ConfigurationError

__all__ = [
    "GenerationRequest",
    "GenerationResult",
    "Generator",
    "check_request",
    "cut_at_stop",
    "render_with_planner",
]


@dataclass(frozen=True)
class GenerationRequest:
    """One generation: prompt ids and sampling options. ``temperature`` ``None`` is the
    model's own default; ``seed`` (causal models) makes sampling repeatable; ``steps``
    caps a diffusion model's denoising steps; ``choices`` constrains the reply to one of
    these strings where the generator supports it."""

    prompt_ids: tuple[int, ...]
    max_tokens: int = 256
    temperature: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    steps: int | None = None
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class GenerationResult:
    """What the model generated: the text (cut before a stop string), token counts,
    why it ended (``"stop"``, ``"length"``), and ``constrained`` — ``"choice"`` when the
    engine restricted the reply to the request's choices, else ``None``."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    constrained: str | None = None


class Generator:
    """What ``LocalChatModel`` drives. A generator renders chat messages to prompt ids
    and generates; by default its async form runs ``generate`` in a worker thread and a
    stream is the whole reply in one piece, then the result (override ``stream`` and
    ``astream`` to hand text over as it is made)."""

    #: Reported in replies.
    model_name: str = "generator"
    #: Whether ``choices`` constrain the reply (``constrained="choice"``).
    supports_choices: bool = False

    def render(
        self, messages: Sequence[dict[str, str]], special_tokens: str | None = None
    ) -> list[int]:
        raise NotImplementedError

    def generate(self, request: GenerationRequest) -> GenerationResult:
        raise NotImplementedError

    async def agenerate(self, request: GenerationRequest) -> GenerationResult:
        return await asyncio.to_thread(self.generate, request)

    def stream(self, request: GenerationRequest) -> Iterator[str | GenerationResult]:
        """``str`` pieces of the reply, then ONE ``GenerationResult``."""
        yield from _whole(self.generate(request))

    async def astream(self, request: GenerationRequest) -> AsyncIterator[str | GenerationResult]:
        for item in _whole(await self.agenerate(request)):
            yield item


def _whole(result: GenerationResult) -> list[str | GenerationResult]:
    return [result.text, result] if result.text else [result]


def check_request(request: GenerationRequest, *, is_diffusion: bool, max_model_len: int) -> None:
    """Refuse options the model cannot honour, with what to change (a diffusion model
    in vLLM takes neither a temperature other than 1 nor a seed)."""
    if request.max_tokens < 1:
        raise ConfigurationError(f"max_tokens must be at least 1, got {request.max_tokens}")
    if not request.prompt_ids:
        raise ConfigurationError("a generation needs at least one prompt token")
    if len(request.prompt_ids) >= max_model_len:
        raise ConfigurationError(
            f"the prompt is {len(request.prompt_ids)} tokens, and the model holds "
            f"{max_model_len}; shorten the messages or raise max_model_len"
        )
    if request.temperature is not None and request.temperature < 0:
        raise ConfigurationError(f"temperature must be >= 0, got {request.temperature}")
    if request.steps is not None and request.steps < 1:
        raise ConfigurationError(f"steps must be at least 1, got {request.steps}")
    if request.choices is not None and not request.choices:
        raise ConfigurationError("choices must name at least one option")
    if is_diffusion:
        if request.temperature not in (None, 1.0):
            raise ConfigurationError(
                "a diffusion model generates with its own temperature schedule; leave "
                f"temperature unset (got {request.temperature})"
            )
        if request.seed is not None:
            raise ConfigurationError(
                "a diffusion model takes no seed (vLLM rejects it); leave seed unset"
            )
    elif request.steps is not None:
        raise ConfigurationError("steps applies to diffusion models only; leave it unset")


def render_with_planner(
    planner: Any, messages: Sequence[dict[str, str]], special_tokens: str | None = None
) -> list[int]:
    """Prompt ids of chat ``messages`` as a reader's planner renders its reads: through its
    chat prompt (``special_tokens``: ``"reject"``/``"text"``, default: the prompt's mode),
    then its thought block (DiffusionGemma's empty one), never doubled."""
    ids = planner.chat.render_messages(messages, special_tokens)
    thought = list(planner.thought)
    if thought and ids[len(ids) - len(thought) :] != thought:
        ids += thought
    return ids


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the first stop string (excluded), and whether one was found."""
    cut = min((i for s in stop if s and (i := text.find(s)) >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
