"""Start vLLM's own DiffusionGemma (``LLM``) for the tier: a tiny random checkpoint built
at test time, or the real one on a GPU machine.

    from dgemma import diffusiongemma_llm
    with diffusiongemma_llm(vocab_size=512, canvas_length=32, max_num_seqs=8) as (llm, path):
        ...

On CPU this needs the tier's shim (``diffusion_shim/``, installed into the tier venv by
``scripts/vllm_tier.sh``): it makes Triton usable through its interpreter. While the
context is open, the engine settings the DiffusionGemma engine needs here are set
(``ENGINE_ENV``: model runner V2, one process, no dynamo) and put back after, so the
tier's next-token engines keep vLLM's defaults.

``AGENTBRANCH_DGEMMA_CHECKPOINT`` (a local folder or hub id of the real model) makes
``diffusiongemma_llm(real=True)`` serve that checkpoint instead (``scripts/vllm_gpu.sh``);
``AGENTBRANCH_DGEMMA_DTYPE`` overrides the dtype (default ``float32`` for the tiny model,
so its reads can be compared with transformers at 1e-5; the checkpoint's own for the
real one).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The tiny model: head_dim 32 (vLLM's CPU attention supports 32, 64, 80 ...; the
#: testing default, 16, is refused), 2 layers, 4 experts. Sliding window 1024, as in the
#: real model, and no shorter than ``max_model_len``: every read here then falls within
#: it. (Beyond the window vLLM's and transformers' canvas attention differ; see
#: ``test_diffusiongemma_window.py``.)
TINY_MODEL_ARGS: dict[str, Any] = {
    "head_dim": 32,
    "hidden_size": 64,
    "num_layers": 2,
    "sliding_window": 1024,
}

#: Engine settings for DiffusionGemma in this tier (set only while an LLM is open):
#: model runner V1 refuses diffusion models; V2 runs them (with Triton; on CPU its
#: interpreter, from the shim). One process: faster start-up and the tests' reads run
#: in the test process. No dynamo: the model file's ``@torch.compile`` helpers would
#: take ~45 s to compile on the first read, for the same logprobs.
ENGINE_ENV: dict[str, str] = {
    "VLLM_USE_V2_MODEL_RUNNER": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "TORCHDYNAMO_DISABLE": "1",
}

CHECKPOINT_ENV = "AGENTBRANCH_DGEMMA_CHECKPOINT"
DTYPE_ENV = "AGENTBRANCH_DGEMMA_DTYPE"


def real_checkpoint() -> str | None:
    """The real DiffusionGemma checkpoint to test on (``AGENTBRANCH_DGEMMA_CHECKPOINT``)."""
    return os.environ.get(CHECKPOINT_ENV) or None


def tiny_checkpoint(*, vocab_size: int = 512, canvas_length: int = 32, **kwargs: Any) -> Path:
    """A tiny random DiffusionGemma folder (built once per arguments, cached in /tmp)."""
    from agentbranch.testing import tiny_diffusiongemma

    args = {**TINY_MODEL_ARGS, **kwargs}
    return tiny_diffusiongemma(vocab_size=vocab_size, canvas_length=canvas_length, **args)


@contextlib.contextmanager
def engine_env() -> Iterator[None]:
    """``ENGINE_ENV`` set (and torch's dynamo off) while open; everything put back after."""
    import torch._dynamo

    saved = {key: os.environ.get(key) for key in ENGINE_ENV}
    saved_disable = torch._dynamo.config.disable
    os.environ.update(ENGINE_ENV)
    torch._dynamo.config.disable = True
    try:
        yield
    finally:
        torch._dynamo.config.disable = saved_disable
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def llm_args(
    *,
    canvas_length: int = 32,
    max_num_seqs: int = 8,
    max_model_len: int = 1024,
    kv_cache_memory_bytes: int | None = 64 * 2**20,
    dtype: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The ``LLM(...)`` arguments for DiffusionGemma here (the issue's settings)."""
    args: dict[str, Any] = {
        "enforce_eager": True,
        "dtype": dtype or os.environ.get(DTYPE_ENV) or "float32",
        "diffusion_config": {"canvas_length": canvas_length},
        "max_num_seqs": max_num_seqs,
        "max_model_len": max_model_len,
        "limit_mm_per_prompt": {"image": 0, "video": 0},
        "enable_prefix_caching": True,
        "seed": 0,
    }
    if kv_cache_memory_bytes is not None:
        # On CPU vLLM sizes the KV cache from the node's RAM unless told.
        args["kv_cache_memory_bytes"] = kv_cache_memory_bytes
    args.update(extra)
    return args


@contextlib.contextmanager
def diffusiongemma_llm(
    *,
    vocab_size: int = 512,
    canvas_length: int = 32,
    max_num_seqs: int = 8,
    max_model_len: int = 1024,
    kv_cache_memory_bytes: int | None = 64 * 2**20,
    real: bool = False,
    model_args: dict[str, Any] | None = None,
    **llm_kwargs: Any,
) -> Iterator[tuple[Any, Path | str]]:
    """An offline ``vllm.LLM`` serving DiffusionGemma, and the checkpoint it serves.

    The tiny random checkpoint (``vocab_size``, checkpoint and served canvas
    ``canvas_length``, ``model_args`` for ``build_tiny_diffusiongemma``), or with
    ``real=True`` and ``AGENTBRANCH_DGEMMA_CHECKPOINT`` set, that checkpoint (then
    ``kv_cache_memory_bytes=None`` leaves the KV cache to ``gpu_memory_utilization``).
    The engine is shut down when the context closes."""
    from vllm import LLM

    checkpoint: Path | str
    if real and real_checkpoint():
        checkpoint = str(real_checkpoint())
        llm_kwargs.setdefault("dtype", os.environ.get(DTYPE_ENV) or "auto")
    else:
        checkpoint = tiny_checkpoint(
            vocab_size=vocab_size, canvas_length=canvas_length, **(model_args or {})
        )
    args = llm_args(
        canvas_length=canvas_length,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        kv_cache_memory_bytes=kv_cache_memory_bytes,
        **llm_kwargs,
    )
    with engine_env():
        started = time.monotonic()
        llm = LLM(model=str(checkpoint), **args)
        print(
            f"\nvLLM DiffusionGemma LLM ready after {time.monotonic() - started:.1f}s",
            file=sys.stderr,
        )
        try:
            yield llm, checkpoint
        finally:
            core = getattr(llm.llm_engine, "engine_core", None)
            if core is not None:
                core.shutdown()
