"""``LocalChatModel``: a LangChain chat model that generates on a reader's own model.

``reader.chat_model()`` (``VLLMReader``, ``TransformersReader``) returns one: the model
already loaded for one-step reads also answers chat messages at full length, so the
``Generate`` fallback needs no second model::

    reader = VLLMReader("path/to/model")
    policy = ab.Policy(take_at=0.8, fallbacks=[ab.Generate(reader.chat_model())])

For vLLM the generations run on the same ``LLM`` through the same worker as the reads
(they share vLLM's batches); on DiffusionGemma they run vLLM's (or transformers') full
denoising schedule. Options, as defaults here or per call (``model.invoke(messages,
max_tokens=32)``): ``max_tokens``, ``temperature`` (default: greedy; unset on diffusion
models), ``stop``, ``seed``, ``steps`` (denoising steps, diffusion models only) and
``choices`` (the reply is constrained to exactly one of these strings where the engine
supports it — on causal models: vLLM's structured outputs, or on transformers the option
the model finds most likely — and
``response_metadata["constrained"]`` says ``"choice"`` when it was).

Each reply carries ``usage_metadata`` (input, output and total tokens) and
``response_metadata`` (``model_name``, ``finish_reason``, ``constrained``), as LangChain's
own chat models report them. The model's ``cache`` works as for any chat model, so
cassettes (``agentbranch.replay``) record and replay it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from agentbranch.core.errors import ConfigurationError
from agentbranch.engine.readers.generation import GenerationRequest, GenerationResult

__all__ = ["LocalChatModel", "chat_messages"]

_ROLES = {"system": "system", "human": "user", "ai": "assistant"}
_OPTIONS = ("max_tokens", "temperature", "stop", "seed", "steps", "choices")


class LocalChatModel(BaseChatModel):
    """A chat model on a reader's generator (see the module docstring). Build it with
    ``reader.chat_model(**defaults)``."""

    model_name: str
    max_tokens: int = 256
    temperature: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    steps: int | None = None
    choices: list[str] | None = None
    _generator: Any = PrivateAttr(default=None)

    @classmethod
    def on(cls, generator: Any, **defaults: Any) -> LocalChatModel:
        """A chat model generating with ``generator`` (a reader's ``generator()``)."""
        unknown = sorted(set(defaults) - set(_OPTIONS))
        if unknown:
            raise ConfigurationError(
                f"unknown chat model option(s) {unknown}; use {', '.join(_OPTIONS)}"
            )
        model = cls(model_name=generator.model_name, **defaults)
        model._generator = generator
        return model

    @classmethod
    def from_pretrained(
        cls, path: Any, *, threads: Any = "auto", model_name: str | None = None, **defaults: Any
    ) -> LocalChatModel:
        """A chat model on a local causal-model folder loaded with transformers (no
        hub), e.g. ``LocalChatModel.from_pretrained(agentbranch.testing.smollm2())``;
        ``model_name`` is reported in replies (default: the folder's name)."""
        from agentbranch.engine.readers.transformers_generation import TransformersGenerator

        generator = TransformersGenerator.from_pretrained(
            path, threads=threads, model_name=model_name
        )
        return cls.on(generator, **defaults)

    @property
    def generator(self) -> Any:
        if self._generator is None:
            raise ConfigurationError(
                "this LocalChatModel has no model to generate with; build it with "
                "reader.chat_model()"
            )
        return self._generator

    @property
    def supports_choices(self) -> bool:
        """Whether the engine can hold a reply to ``choices`` (on a causal model: vLLM's
        structured outputs, or on transformers the most likely option); on DiffusionGemma
        ``choices`` are ignored and the reply is free text."""
        return bool(getattr(self._generator, "supports_choices", False))

    @property
    def _llm_type(self) -> str:
        return "agentbranch-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, **{k: getattr(self, k) for k in _OPTIONS}}

    # -- generating ------------------------------------------------------------------

    def _request(
        self, prompt_ids: list[int], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> GenerationRequest:
        unknown = sorted(set(kwargs) - set(_OPTIONS))
        if unknown:
            raise ConfigurationError(
                f"unknown generation option(s) {unknown}; use {', '.join(_OPTIONS)}"
            )
        opts = {k: kwargs.get(k, getattr(self, k)) for k in _OPTIONS}
        stops = stop if stop is not None else opts["stop"]
        choices = opts["choices"]
        return GenerationRequest(
            prompt_ids=tuple(prompt_ids),
            max_tokens=int(opts["max_tokens"]),
            temperature=opts["temperature"],
            stop=tuple(stops or ()),
            seed=opts["seed"],
            steps=opts["steps"],
            choices=tuple(choices) if choices is not None else None,
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        generator = self.generator
        request = self._request(generator.render(chat_messages(messages)), stop, kwargs)
        return self._result(generator.generate(request))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        generator = self.generator
        # Rendering a long conversation through the template is CPU work: off the loop.
        prompt_ids = await asyncio.to_thread(generator.render, chat_messages(messages))
        request = self._request(prompt_ids, stop, kwargs)
        return self._result(await generator.agenerate(request))

    def _result(self, result: GenerationResult) -> ChatResult:
        usage = {
            "input_tokens": result.prompt_tokens,
            "output_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens,
        }
        meta = {
            "model_name": self.model_name,
            "finish_reason": result.finish_reason,
            "constrained": result.constrained,
        }
        message = AIMessage(content=result.text, usage_metadata=usage, response_metadata=meta)
        return ChatResult(
            generations=[ChatGeneration(message=message)],
            llm_output={"token_usage": usage, "model_name": self.model_name},
        )


def chat_messages(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """LangChain messages as the chat template's ``{"role", "content"}`` dicts (system,
    user and assistant turns; text content only)."""
    out = []
    for message in messages:
        role = _ROLES.get(message.type)
        if role is None:
            raise ConfigurationError(
                f"a local chat model takes system, human and AI messages, not "
                f"{message.type!r} ({type(message).__name__}); tool calling is not supported"
            )
        content = message.content
        if isinstance(content, list):
            parts = []
            for block in content:
                if isinstance(block, str):
                    parts.append(block)
                elif isinstance(block, dict) and block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                else:
                    raise ConfigurationError(
                        "a local chat model takes text content only, got a "
                        f"{block.get('type') if isinstance(block, dict) else type(block)!r} block"
                    )
            content = "".join(parts)
        out.append({"role": role, "content": str(content)})
    if not out:
        raise ConfigurationError("a chat model call needs at least one message")
    return out
