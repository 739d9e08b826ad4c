"""Start-up check of a running engine's settings against the sizing formula.

``VLLMReader`` logs what :func:`engine_capacity_warnings` returns at WARNING: a denoising
step or KV cache that cannot hold ``max_num_seqs`` canvases, or a ``max_num_seqs`` that
leaves most of what the GPU could read at once unused.
"""

from __future__ import annotations

from typing import Any

from agentbranch.engine.capacity.shapes import GIB
from agentbranch.engine.capacity.sizing import CONTEXT_RESERVE_BYTES, STEP_BYTES_PER_LOGIT

__all__ = ["capacity_warnings", "engine_capacity_warnings"]


def capacity_warnings(
    *,
    max_num_seqs: int,
    canvas_length: int,
    vocab_size: int,
    gpu_memory_utilization: float,
    gpu_total_bytes: int | None,
    kv_cache_tokens: int | None,
) -> list[str]:
    """What is wrong with these settings, in words (empty: nothing).

    ``gpu_total_bytes`` None (no CUDA device) skips the step check; ``kv_cache_tokens``
    None (not known yet) skips the KV check.
    """
    out: list[str] = []
    step_seq = canvas_length * vocab_size * STEP_BYTES_PER_LOGIT
    step_limit = None
    if gpu_total_bytes:
        room = gpu_total_bytes * (1 - gpu_memory_utilization) - CONTEXT_RESERVE_BYTES
        step_limit = max(int(room // step_seq), 0)
        if max_num_seqs > step_limit:
            out.append(
                f"max_num_seqs={max_num_seqs} at canvas {canvas_length} may run out of GPU "
                f"memory in a denoising step: its logits ([{max_num_seqs} x {canvas_length}, "
                f"{vocab_size}], ~{max_num_seqs * step_seq / GIB:.1f} GiB of transients) must "
                f"fit outside gpu_memory_utilization={gpu_memory_utilization:g} "
                f"(~{max(room, 0) / GIB:.1f} GiB), which holds {step_limit}; lower max_num_seqs "
                "or the canvas (see `agentbranch size`)"
            )
    kv_limit = None
    if kv_cache_tokens is not None:
        kv_limit = kv_cache_tokens // (canvas_length + 1)
        if kv_limit < max_num_seqs:
            out.append(
                f"the KV cache holds {kv_cache_tokens} tokens: fewer than {max_num_seqs} "
                f"sequences of a {canvas_length}-token canvas and any prompt; lower "
                "max_num_seqs or raise gpu_memory_utilization"
            )
    limits = [x for x in (step_limit, kv_limit) if x is not None]
    if step_limit is not None and limits and max_num_seqs * 2 <= min(limits):
        out.append(
            f"max_num_seqs={max_num_seqs} reads under half of what this GPU holds at canvas "
            f"{canvas_length} (about {min(limits)} sequences): raise max_num_seqs to read "
            "more decisions at once (see `agentbranch size`)"
        )
    return out


def _gpu_total_bytes() -> int | None:
    try:
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.mem_get_info()[1])
    except Exception:  # noqa: BLE001 - no device, no check
        return None
    return None


def engine_capacity_warnings(
    vllm_config: Any, canvas_length: int, vocab_size: int, gpu_total_bytes: int | None = None
) -> list[str]:
    """:func:`capacity_warnings` for a running vLLM engine's ``vllm_config``."""
    cache = getattr(vllm_config, "cache_config", None)
    sched = getattr(vllm_config, "scheduler_config", None)
    max_num_seqs = int(getattr(sched, "max_num_seqs", 0) or 0)
    if max_num_seqs <= 0:
        return []
    util = float(getattr(cache, "gpu_memory_utilization", 0.9) or 0.9)
    blocks = getattr(cache, "num_gpu_blocks", None)
    block_size = getattr(cache, "block_size", None)
    kv_tokens = int(blocks) * int(block_size) if blocks and block_size else None
    return capacity_warnings(
        max_num_seqs=max_num_seqs,
        canvas_length=canvas_length,
        vocab_size=vocab_size,
        gpu_memory_utilization=util,
        gpu_total_bytes=gpu_total_bytes if gpu_total_bytes is not None else _gpu_total_bytes(),
        kv_cache_tokens=kv_tokens,
    )
