"""How many concurrent DiffusionGemma sequences one GPU holds, from vLLM's own allocation.

``size`` returns a ``SizingPlan``: ``max_num_seqs`` as the smaller of two limits, the
denoising step's transients outside ``gpu_memory_utilization`` and the KV cache inside
it, with each ``Term`` (bytes and where they come from) behind them. What vLLM allocates
and the two constants assumed: docs/vllm.md, "Sizing".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.engine.capacity.shapes import (
    DIFFUSIONGEMMA_26B,
    GIB,
    PRESET_WEIGHTS_GIB,
    ModelShape,
)

__all__ = [
    "CONTEXT_RESERVE_BYTES",
    "STEP_BYTES_PER_LOGIT",
    "SizingPlan",
    "Term",
    "kv_bytes_per_sequence",
    "size",
    "state_bytes_per_sequence",
    "step_bytes_per_sequence",
]

#: Bytes per (canvas position × vocabulary entry) a denoising step holds at its peak:
#: six fp32-sized copies of the step's logits (docs/vllm.md).
STEP_BYTES_PER_LOGIT = 24
#: GPU memory outside vLLM's budget that the step cannot use: the CUDA context and
#: allocator slack.
CONTEXT_RESERVE_BYTES = 1 * GIB
#: vLLM's KV cache block: sequences take whole blocks.
BLOCK_SIZE = 16
DTYPE_BYTES = {
    "auto": 2,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}


@dataclass(frozen=True)
class Term:
    """One line of the plan: a number of bytes and where it comes from."""

    name: str
    bytes: int
    per_sequence: bool
    explanation: str

    @property
    def gib(self) -> float:
        return self.bytes / GIB


@dataclass(frozen=True)
class SizingPlan:
    """The answer of :func:`size`: the limit, the terms behind it, the settings."""

    model: str
    gpu_gib: float
    gpu_memory_utilization: float
    canvas_length: int
    prompt_tokens: int
    max_model_len: int
    #: The largest ``max_num_seqs`` that fits (the smaller of the two limits).
    max_num_seqs: int
    #: What holds it down: ``"step"`` (the denoising step's transients) or ``"kv"``.
    bound_by: str
    step_limit: int
    kv_limit: int
    terms: tuple[Term, ...]
    #: Requests one decision takes, and decisions read at once (``max_num_seqs // it``).
    reads_per_decision: int = 1
    decisions_in_flight: int = 0
    #: The gpu_memory_utilization at which the two limits meet (most sequences).
    balanced_gpu_memory_utilization: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def term(self, name: str) -> Term:
        return next(t for t in self.terms if t.name == name)

    def llm_kwargs(self) -> dict[str, Any]:
        """The ``vllm.LLM(...)`` settings this plan is for."""
        return {
            "diffusion_config": {"canvas_length": self.canvas_length},
            "max_num_seqs": self.max_num_seqs,
            "max_model_len": self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every setting, both limits and each term in bytes and GiB."""
        out = asdict(self)
        out["terms"] = [{**asdict(t), "gib": round(t.gib, 4)} for t in self.terms]
        out["notes"] = list(self.notes)
        out["llm_kwargs"] = self.llm_kwargs()
        return out


#: Bounds that keep the arithmetic finite and quick; far beyond any GPU or context.
MAX_GPU_GIB = 1 << 20  # 1 PiB
MAX_TOKENS = 1 << 24  # 16M tokens


def _number(name: str, value: Any, low: float, high: float, *, positive: bool = False) -> float:
    """A finite number in ``[low, high]`` (``(0, high]`` if ``positive``), or a
    ``ConfigurationError`` saying so."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigurationError(f"{name} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ConfigurationError(f"{name} must be positive, got {value:g}")
    if value < low:
        raise ConfigurationError(f"{name} must be at least {low:g}, got {value:g}")
    if value > high:
        raise ConfigurationError(f"{name} must be at most {high:,.0f}, got {value:g}")
    return float(value)


def _whole(name: str, value: Any, low: int, high: int) -> int:
    """A whole number in ``[low, high]``, or a ``ConfigurationError`` saying so."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be a whole number, got {value!r}")
    if value < low:
        raise ConfigurationError(f"{name} must be at least {low}, got {value}")
    if value > high:
        raise ConfigurationError(f"{name} must be at most {high:,}, got {value}")
    return value


def _round_blocks(tokens: int) -> int:
    return -(-tokens // BLOCK_SIZE) * BLOCK_SIZE


def kv_bytes_per_sequence(shape: ModelShape, tokens: int, dtype_bytes: int = 2) -> int:
    """KV cache one sequence of ``tokens`` tokens holds: every token in the full-attention
    layers, at most the window (plus a block) in the sliding ones."""
    full, window = _round_blocks(tokens), shape.sliding_window
    sliding = _round_blocks(min(tokens, window + BLOCK_SIZE)) if window else full
    return dtype_bytes * (
        full * shape.full_kv_bytes_per_token + sliding * shape.sliding_kv_bytes_per_token
    )


def state_bytes_per_sequence(shape: ModelShape, canvas: int) -> int:
    """Persistent buffers vLLM allocates per sequence slot (docs/vllm.md)."""
    history = shape.stability_threshold + 1
    diffusion_states = (
        canvas * (8 + 8 + 8 + 1 + 8 * history)  # canvas, argmax, seed (int64), pins, history
        + canvas * shape.hidden_size * 4  # self-conditioning embeddings, fp32
        + 4 * 4
        + 1 * 4  # step, history_len, prompt_len, max_steps (int32); 4 flags
    )
    sampler = canvas * 4 + 4  # _sampled (int32), _num_sampled
    draft_tokens = canvas * 8  # RequestState.draft_tokens, int64
    words = -(-shape.vocab_size // 32)
    penalties = shape.vocab_size * 4 + words * 4  # output_bin_counts, prompt_bin_mask
    # StructuredOutputsWorker: grammar_bitmask and logits_indices, one row per logit.
    grammar = (canvas + 1) * (words * 4 + 4)
    return diffusion_states + sampler + draft_tokens + penalties + grammar


def step_bytes_per_sequence(shape: ModelShape, canvas: int) -> int:
    """Transient memory of one sequence in a denoising step at full canvas width."""
    return canvas * shape.vocab_size * STEP_BYTES_PER_LOGIT


def _weights(shape: ModelShape, preset: str | None, weights_gib: float | None) -> int:
    if weights_gib is not None:  # checked by ``size``
        return int(weights_gib * GIB)
    if shape.weights_bytes is not None:
        return shape.weights_bytes
    if preset is not None:
        return int(PRESET_WEIGHTS_GIB[preset] * GIB)
    raise ConfigurationError(
        "the weights' size is unknown for a model config: pass weights_gib "
        "(vLLM logs it at start-up: 'Model loading took ... GiB')"
    )


def _preset_precision(preset: str) -> str:
    """``fp8``, ``bf16`` or ``nvfp4`` for an engine preset's name, short or long
    (``diffusiongemma-fp8``): the presets are built on this module."""
    precision = preset.lower().removeprefix("diffusiongemma-")
    if precision not in PRESET_WEIGHTS_GIB:
        raise ConfigurationError(
            f"unknown engine preset {preset!r}; choose one of "
            f"{sorted('diffusiongemma-' + p for p in PRESET_WEIGHTS_GIB)} "
            "(or bf16 / fp8 / nvfp4)"
        )
    return precision


def size(
    preset: str | None = "fp8",
    *,
    gpu_gib: float,
    canvas_length: int,
    model_config: ModelShape | dict[str, Any] | str | None = None,
    gpu_memory_utilization: float = 0.90,
    prompt_tokens: int = 1024,
    max_model_len: int | None = None,
    weights_gib: float | None = None,
    activation_gib: float = 2.0,
    kv_cache_dtype: str = "auto",
    reads_per_decision: int = 1,
) -> SizingPlan:
    """Size a DiffusionGemma deployment on one GPU.

    Args:
        preset: ``"fp8"``, ``"nvfp4"``, ``"bf16"`` (or ``"diffusiongemma-fp8"`` ...); its
            weights and the 26B-A4B shape. Ignored for the shape when ``model_config``
            is given (then give ``weights_gib``, unless the preset's weights apply).
        gpu_gib: the GPU's memory, GiB ("80 GB" H100/A100: 80).
        canvas_length: the served canvas (``diffusion_config``); see
            :func:`agentbranch.deploy.schema.schema_canvas` for a question schema's.
        model_config: a :class:`ModelShape`, a ``config.json`` dict, file or folder.
        gpu_memory_utilization: vLLM's budget share (0.9 by default).
        prompt_tokens: a typical prompt (chat template, state, questions, thought block).
        max_model_len: vLLM's limit (default: prompt + canvas); the KV cache must hold
            at least one such sequence.
        weights_gib: the weights, measured (overrides the preset's published figure).
        activation_gib: what vLLM's profile reserves besides weights (activation peak,
            non-torch memory); vLLM logs both at start-up.
        kv_cache_dtype: vLLM's ``kv_cache_dtype`` (``auto`` is the model's bf16).
        reads_per_decision: requests one decision takes (joint chunks, or questions for
            single reads) to report how many decisions are read at once.

    Raises:
        ConfigurationError: an unknown preset, a GPU too small for the weights (or for one
            sequence), a canvas wider than the model's, bad numbers.
    """
    if preset is None and model_config is None:
        raise ConfigurationError("give a preset (fp8, nvfp4, bf16) or a model_config")
    precision = _preset_precision(preset) if preset is not None else None
    if model_config is None:
        shape = DIFFUSIONGEMMA_26B
    elif isinstance(model_config, ModelShape):
        shape = model_config
    else:
        shape = ModelShape.from_config(model_config)
    util = gpu_memory_utilization
    if isinstance(util, (int, float)) and not isinstance(util, bool) and not 0 < util <= 1:
        raise ConfigurationError(f"gpu_memory_utilization must be in (0, 1], got {util}")
    util = _number("gpu_memory_utilization", util, 0, 1, positive=True)
    gpu_gib = _number("gpu_gib", gpu_gib, 0, MAX_GPU_GIB, positive=True)
    canvas_length = _whole("canvas_length", canvas_length, 1, MAX_TOKENS)
    if canvas_length > shape.max_canvas:
        raise ConfigurationError(
            f"a canvas of {canvas_length} tokens is wider than the model's "
            f"{shape.max_canvas}; serve at most {shape.max_canvas} (joint reads are split "
            "into chunks that fit it)"
        )
    prompt_tokens = _whole("prompt_tokens", prompt_tokens, 1, MAX_TOKENS)
    activation_gib = _number("activation_gib", activation_gib, 0, MAX_GPU_GIB)
    if weights_gib is not None:
        weights_gib = _number("weights_gib", weights_gib, 0, MAX_GPU_GIB, positive=True)
    reads_per_decision = _whole("reads_per_decision", reads_per_decision, 1, MAX_TOKENS)
    if kv_cache_dtype not in DTYPE_BYTES:
        raise ConfigurationError(
            f"unknown kv_cache_dtype {kv_cache_dtype!r}; one of {sorted(DTYPE_BYTES)}"
        )
    if max_model_len is None:
        max_model_len = prompt_tokens + canvas_length
    max_model_len = _whole("max_model_len", max_model_len, 1, MAX_TOKENS)
    if max_model_len < canvas_length + 1:
        raise ConfigurationError(
            f"max_model_len={max_model_len} cannot hold a prompt and a {canvas_length}-token canvas"
        )

    gpu = int(gpu_gib * GIB)
    budget = int(gpu * util)
    weights = _weights(shape, precision, weights_gib)
    reserve = int(activation_gib * GIB)
    dtype_bytes = DTYPE_BYTES[kv_cache_dtype]
    kv_seq = kv_bytes_per_sequence(shape, prompt_tokens + canvas_length, dtype_bytes)
    state_seq = state_bytes_per_sequence(shape, canvas_length)
    step_seq = step_bytes_per_sequence(shape, canvas_length)
    kv_room = budget - weights - reserve
    step_room = max(gpu - budget - CONTEXT_RESERVE_BYTES, 0)

    if kv_room <= 0:
        fits = [name for name, w in PRESET_WEIGHTS_GIB.items() if w * GIB + reserve < budget]
        need = (weights + reserve + kv_seq) / GIB / util
        raise ConfigurationError(
            f"the weights ({weights / GIB:.1f} GiB) and vLLM's reserve ({activation_gib:g} GiB) "
            f"do not fit in {util:g} x {gpu_gib:g} GiB; this model needs a GPU of at least "
            f"{need:.0f} GiB at gpu_memory_utilization={util:g}"
            + (f", or a smaller preset: {', '.join(fits)}" if fits else "")
        )
    kv_limit = kv_room // (kv_seq + state_seq)
    step_limit = step_room // step_seq
    max_model_len_kv = kv_bytes_per_sequence(shape, max_model_len, dtype_bytes) + state_seq
    if kv_limit < 1 or step_limit < 1 or max_model_len_kv > kv_room:
        canvases = range(16, shape.max_canvas + 1, 16)
        widest = max(
            (c for c in canvases if step_bytes_per_sequence(shape, c) <= step_room), default=0
        )
        raise ConfigurationError(
            f"not even one sequence fits: {gpu_gib:g} GiB at gpu_memory_utilization={util:g} "
            f"leaves {kv_room / GIB:.2f} GiB of KV cache (one sequence of "
            f"{max(prompt_tokens + canvas_length, max_model_len)} tokens needs "
            f"{max(kv_seq + state_seq, max_model_len_kv) / GIB:.2f}) and "
            f"{step_room / GIB:.2f} GiB for a denoising step (a {canvas_length}-token "
            f"canvas needs {step_seq / GIB:.2f}); "
            + (f"serve a canvas of at most {widest}, " if widest else "")
            + "lower gpu_memory_utilization, shorten max_model_len or use a larger GPU"
        )
    limit = int(min(kv_limit, step_limit))
    bound = "step" if step_limit <= kv_limit else "kv"

    V, C = shape.vocab_size, canvas_length
    terms = (
        Term(
            "gpu_budget",
            budget,
            False,
            f"gpu_memory_utilization {util:g} x {gpu_gib:g} GiB: weights, persistent buffers, "
            "vLLM's profiled reserve and the KV cache live here",
        ),
        Term(
            "weights",
            weights,
            False,
            "the checkpoint's weights on the GPU"
            + (
                f" (published figure for the {precision} preset)"
                if weights_gib is None and precision and shape.weights_bytes is None
                else ""
            ),
        ),
        Term(
            "activation_reserve",
            reserve,
            False,
            "what vLLM's start-up profile reserves besides the weights (activation peak at "
            "max_num_batched_tokens, non-torch memory); vLLM logs it",
        ),
        Term(
            "kv_cache",
            kv_room,
            False,
            "the rest of the budget: vLLM's KV cache (it also pays for the persistent buffers)",
        ),
        Term(
            "kv_per_sequence",
            kv_seq,
            True,
            f"K and V of {prompt_tokens} prompt + {C} canvas tokens: "
            f"{shape.full_layers} full-attention layers x 2 x {shape.full_kv_heads} heads x "
            f"{shape.full_head_dim} for every token, {shape.sliding_layers} sliding layers x 2 x "
            f"{shape.sliding_kv_heads} x {shape.sliding_head_dim} for at most "
            f"{shape.sliding_window} (+{BLOCK_SIZE}) tokens, {dtype_bytes} B each, in "
            f"{BLOCK_SIZE}-token blocks",
        ),
        Term(
            "state_per_sequence",
            state_seq,
            True,
            f"vLLM's persistent per-slot buffers: the diffusion state ({C} canvas positions: "
            f"int64 canvases, history, fp32 self-conditioning [{C}, {shape.hidden_size}]), "
            f"draft tokens, penalty counts [{V}] int32, grammar bit mask [{C + 1}, {V}] bits",
        ),
        Term(
            "step_headroom",
            step_room,
            False,
            f"outside the budget: (1 - {util:g}) x {gpu_gib:g} GiB minus "
            f"{CONTEXT_RESERVE_BYTES / GIB:g} GiB of CUDA context; the denoising step's "
            "transients live here (vLLM's profile does not reserve them)",
        ),
        Term(
            "step_per_sequence",
            step_seq,
            True,
            f"one sequence in a denoising step: [{C} canvas x {V} vocab] logits held as "
            f"{STEP_BYTES_PER_LOGIT // 4} fp32-sized copies (softcapped logits, the sampler's "
            "fp32 tile, softmax, scaled logits, top-k/top-p sort)",
        ),
    )
    # The utilization where both limits meet: (1-u)G - ctx over a = (uG - W - R) over b.
    a, b = step_seq, kv_seq + state_seq
    balanced = (b * (gpu - CONTEXT_RESERVE_BYTES) + a * (weights + reserve)) / (gpu * (a + b))
    balanced = math.floor(min(max(balanced, 0.0), 0.99) * 100) / 100
    notes = []
    if bound == "kv":
        notes.append(
            "the KV cache, not the denoising step, limits concurrency: shorten prompts"
            + (f" or raise gpu_memory_utilization to {balanced:.2f}" if balanced > util else "")
        )
    elif kv_limit >= 2 * step_limit and balanced < util:
        notes.append(
            f"the KV cache could hold {kv_limit} sequences but a denoising step only "
            f"{step_limit}: gpu_memory_utilization={balanced:.2f} moves memory to the step "
            "and holds more"
        )
    return SizingPlan(
        model=f"{shape.name} ({precision})" if precision and model_config is None else shape.name,
        gpu_gib=gpu_gib,
        gpu_memory_utilization=util,
        canvas_length=C,
        prompt_tokens=prompt_tokens,
        max_model_len=max_model_len,
        max_num_seqs=limit,
        bound_by=bound,
        step_limit=int(step_limit),
        kv_limit=int(kv_limit),
        terms=terms,
        reads_per_decision=reads_per_decision,
        decisions_in_flight=limit // max(reads_per_decision, 1),
        balanced_gpu_memory_utilization=balanced,
        notes=tuple(notes),
    )
