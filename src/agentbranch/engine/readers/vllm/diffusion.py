"""The diffusion path: DiffusionGemma's one-step read of a seeded canvas (what a read
sends: docs/vllm.md, "What a read sends")."""

from __future__ import annotations

import logging
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.reads import TokenRead
from agentbranch.engine.canvas import CanvasPlanner

__all__ = [
    "DIFFUSION_ARCHITECTURES",
    "architecture",
    "diffusion_extra_args",
    "diffusion_planner",
    "is_diffusion",
]

log = logging.getLogger("agentbranch.vllm")

DIFFUSION_ARCHITECTURES = frozenset({"DiffusionGemmaForBlockDiffusion"})


def architecture(model_config: Any) -> str:
    """The model's architecture name, from vLLM's ``ModelConfig`` (or its HF config)."""
    arch = getattr(model_config, "architecture", None)
    if arch:
        return str(arch)
    archs = getattr(getattr(model_config, "hf_config", None), "architectures", None) or []
    return str(archs[0]) if archs else "unknown architecture"


def is_diffusion(model_config: Any) -> bool:
    """Whether vLLM serves the model as a diffusion model (else: a causal model)."""
    if getattr(model_config, "is_diffusion", False):
        return True
    return architecture(model_config) in DIFFUSION_ARCHITECTURES


def diffusion_planner(
    tokenizer: Any, vllm_config: Any, *, vocab_size: int, **prompt: Any
) -> CanvasPlanner:
    """The ``CanvasPlanner`` for the served canvas, after logging (WARNING, on
    ``agentbranch.vllm``) the settings the sizing formula says cannot hold
    ``max_num_seqs`` canvases or leave most of the GPU unused. ``prompt``: the planner's
    prompt settings."""
    from agentbranch.engine.capacity.check import engine_capacity_warnings

    # The served canvas width, as vLLM's strategy reads it.
    diffusion = getattr(vllm_config, "diffusion_config", None)
    canvas = getattr(diffusion, "canvas_length", None) or getattr(
        vllm_config.model_config.hf_config, "canvas_length", None
    )
    if not canvas:
        raise ConfigurationError("the diffusion model's config has no canvas_length")
    canvas = int(canvas)
    for message in engine_capacity_warnings(vllm_config, canvas, vocab_size):
        log.warning("%s", message)
    return CanvasPlanner(tokenizer, vocab_size=vocab_size, served_canvas=canvas, **prompt)


def diffusion_extra_args(read: TokenRead, *, constrained: bool, max_steps: int) -> dict[str, Any]:
    """The ``SamplingParams.extra_args`` of a diffusion read: its seeded canvas, read
    only, ``max_steps`` denoising steps (non-slot positions pinned when more than one),
    label-only unembedding when ``constrained``; never ``temperature`` or ``seed`` (vLLM
    rejects both for diffusion models)."""
    if not read.canvas:
        raise ConfigurationError("a diffusion read needs a seeded canvas")
    extra: dict[str, Any] = {
        "diffusion_seed_canvas": list(read.canvas),
        "diffusion_canvas_length": len(read.canvas),
        "diffusion_max_steps": max_steps,
        "diffusion_read_only": True,
    }
    if max_steps > 1:
        slots = {s.position for s in read.slots}
        extra["diffusion_pinned"] = [p for p in range(len(read.canvas)) if p not in slots]
    if constrained:
        extra["diffusion_constrained"] = True
    return extra
