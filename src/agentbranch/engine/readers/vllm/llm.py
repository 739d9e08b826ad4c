"""The ``vllm.LLM`` a reader reads on: building one (importing vLLM only then), checking
one, shutting one down."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from agentbranch.core.errors import ConfigurationError, ReaderError
from agentbranch.engine.presets import EnginePreset, get_preset

if TYPE_CHECKING:
    from vllm import LLM

__all__ = ["build_llm", "check_logprobs_mode", "is_llm", "shutdown"]

log = logging.getLogger("agentbranch.vllm")


def is_llm(obj: Any) -> bool:
    """Whether ``obj`` is an ``LLM`` (or a stand-in for one), not a model id or path."""
    return obj is not None and hasattr(obj, "generate") and hasattr(obj, "llm_engine")


def build_llm(
    model: str | os.PathLike[str] | None,
    preset: str | EnginePreset | None,
    llm_kwargs: dict[str, Any],
) -> LLM:
    """``vllm.LLM`` for ``model`` with the preset's arguments, ``llm_kwargs`` on top."""
    try:
        from vllm import LLM
    except ImportError as e:
        raise ConfigurationError(
            "VLLMReader needs vLLM: pip install 'agentbranch[vllm]' (a GPU build), or "
            "use RemoteReader against a vLLM server"
        ) from e
    kwargs: dict[str, Any] = get_preset(preset).llm_kwargs() if preset is not None else {}
    if model is not None:
        kwargs["model"] = str(model)
    kwargs.update(llm_kwargs)
    if "model" not in kwargs:
        raise ConfigurationError(
            "VLLMReader needs an LLM, a model id/path, or a preset (e.g. VLLMReader(preset='fp8'))"
        )
    try:
        return LLM(**kwargs)
    except Exception as e:
        raise ReaderError(
            f"vLLM could not start {kwargs['model']!r}: {e}. Check the model path, GPU "
            "memory (see docs/vllm.md for sizes) and the LLM arguments."
        ) from e


def check_logprobs_mode(model_config: Any) -> None:
    """Refuse an ``LLM`` that returns logits where a read needs log probabilities."""
    logprobs_mode = getattr(model_config, "logprobs_mode", "raw_logprobs")
    if logprobs_mode not in ("raw_logprobs", "processed_logprobs"):  # not the logits modes
        raise ConfigurationError(
            f"the LLM returns {logprobs_mode}, not log probabilities; build it with "
            "logprobs_mode='raw_logprobs' (the default)"
        )


def shutdown(llm: Any) -> None:
    """Stop the engine processes of an LLM the reader built."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    stop = getattr(core, "shutdown", None)
    if callable(stop):
        try:
            stop()
        except Exception as e:  # noqa: BLE001
            log.warning("vllm shutdown failed: %r", e)
