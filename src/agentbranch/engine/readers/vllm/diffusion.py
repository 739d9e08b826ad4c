"""The diffusion path: DiffusionGemma's one-step read of a seeded canvas.

This module tells a diffusion model from a causal one (``is_diffusion``), reads the
served canvas width (``served_canvas``), builds the diffusion planner
(``diffusion_planner``) and each request's ``extra_args`` (``diffusion_extra_args``,
whose docstring shows the request a read is).
"""

from __future__ import annotations

from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.reads import TokenRead
from agentbranch.engine.canvas import CanvasPlanner
from agentbranch.engine.readers.vllm.capacity import warn_capacity

__all__ = [
    "DIFFUSION_ARCHITECTURES",
    "architecture",
    "diffusion_extra_args",
    "diffusion_planner",
    "is_diffusion",
    "served_canvas",
]

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


def served_canvas(vllm_config: Any) -> int:
    """The served canvas width, as vLLM's strategy reads it."""
    diffusion = getattr(vllm_config, "diffusion_config", None)
    if diffusion is not None and getattr(diffusion, "canvas_length", None):
        return int(diffusion.canvas_length)
    canvas = getattr(vllm_config.model_config.hf_config, "canvas_length", None)
    if not canvas:
        raise ConfigurationError("the diffusion model's config has no canvas_length")
    return int(canvas)


def diffusion_planner(
    tokenizer: Any, vllm_config: Any, *, vocab_size: int, **prompt: Any
) -> CanvasPlanner:
    """The ``CanvasPlanner`` for the served canvas (its width is ``planner.served``),
    after logging the capacity warnings the engine's settings earn. ``prompt``: the
    planner's prompt settings (``max_model_len``, ``chat_template``, ``special_tokens``,
    ``template_kwargs``)."""
    canvas = served_canvas(vllm_config)
    warn_capacity(vllm_config, canvas, vocab_size)
    return CanvasPlanner(tokenizer, vocab_size=vocab_size, served_canvas=canvas, **prompt)


def diffusion_extra_args(read: TokenRead, *, constrained: bool, max_steps: int) -> dict[str, Any]:
    """The ``SamplingParams.extra_args`` of a diffusion read: its seeded canvas, read
    only, ``max_steps`` denoising steps (non-slot positions pinned when more than one),
    label-only unembedding when ``constrained``.

    A DiffusionGemma (``DiffusionGemmaForBlockDiffusion``) read is one read-only request with
    ONE denoising step over a canvas seeded as vLLM's ``DiffusionGemmaCanvasStrategy`` seeds
    it (the ``CanvasPlanner`` builds the prompt ids, thought block outside the canvas, and
    the canvas)::

        TokensPrompt(prompt_token_ids=prompt_ids)
        SamplingParams(max_tokens=read_length, logprob_token_ids=label_ids,
                       extra_args={"diffusion_seed_canvas": canvas,
                                   "diffusion_canvas_length": len(canvas),
                                   "diffusion_max_steps": 1,
                                   "diffusion_read_only": True})

    never ``temperature`` or ``seed`` (vLLM rejects both for diffusion models). Options:
    ``constrained=True`` adds ``diffusion_constrained`` (the decoder unembeds only the label
    ids; logprobs are normalised over them; tensor parallel 1 only); ``max_steps=N`` runs up
    to N denoising steps with every non-slot position pinned to its seed
    (``diffusion_pinned``), the "more effort" fallback.
    """
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
