"""Engine presets: how to serve DiffusionGemma with vLLM for structured reads.

A preset names a checkpoint and the ``vllm.LLM(...)`` arguments that suit one-step
decision reads on one GPU::

    from agentbranch.engine.presets import PRESETS
    llm_kwargs = PRESETS["diffusiongemma-fp8"].llm_kwargs(max_model_len=16384)
    reader = VLLMReader(preset="diffusiongemma-fp8")          # builds the LLM itself
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentbranch.core.errors import ConfigurationError

__all__ = ["PRESETS", "EnginePreset", "get_preset"]


@dataclass(frozen=True)
class EnginePreset:
    """One way to serve a DiffusionGemma checkpoint for reads (docs/vllm.md says why
    each value). ``max_num_seqs`` comes from the sizing plan for the reference GPU
    (``gpu_gib``) and the served canvas: a denoising step's logits live outside vLLM's
    memory budget, so the canvas bounds concurrency. Never add ``temperature``, ``seed``
    or sampler overrides: vLLM rejects per-request sampling knobs for diffusion models.
    """

    name: str
    model: str
    precision: str
    #: Weights + runtime, GiB of GPU memory (published figures, approximate).
    gpu_memory_gib: float
    #: GPUs it fits on with room for the KV cache.
    suggested_gpus: tuple[str, ...]
    #: The GPU memory (GiB) ``max_num_seqs`` is sized for by default.
    gpu_gib: float = 80
    canvas_length: int = 64
    #: None: the sizing plan's limit for ``gpu_gib`` and the canvas.
    max_num_seqs: int | None = None
    max_model_len: int = 8192
    gpu_memory_utilization: float = 0.90
    extra: dict[str, Any] = field(default_factory=dict)

    def plan(
        self,
        *,
        gpu_gib: float | None = None,
        canvas_length: int | None = None,
        max_model_len: int | None = None,
        **size_kwargs: Any,
    ) -> Any:
        """The sizing plan (``agentbranch.deploy.size``) for this preset on a GPU of
        ``gpu_gib`` (default: the preset's reference GPU) at the served canvas."""
        from agentbranch.engine.capacity.sizing import size

        return size(
            self.name,
            gpu_gib=gpu_gib or self.gpu_gib,
            canvas_length=canvas_length or self.canvas_length,
            max_model_len=max_model_len or self.max_model_len,
            **{"gpu_memory_utilization": self.gpu_memory_utilization, **size_kwargs},
        )

    def llm_kwargs(
        self,
        *,
        canvas_length: int | None = None,
        max_num_seqs: int | None = None,
        max_model_len: int | None = None,
        gpu_gib: float | None = None,
        **overrides: Any,
    ) -> dict[str, Any]:
        """Keyword arguments for ``vllm.LLM(**kwargs)``; ``overrides`` win.

        ``max_num_seqs`` defaults to the sizing plan's limit for ``gpu_gib`` (the preset's
        reference GPU unless given) at this canvas."""
        canvas = canvas_length or self.canvas_length
        if canvas < 16:
            raise ConfigurationError(
                f"canvas_length={canvas} is too small: a structured read needs a 16-token canvas"
            )
        seqs = max_num_seqs or self.max_num_seqs
        if seqs is None:
            seqs = self.plan(
                gpu_gib=gpu_gib, canvas_length=canvas, max_model_len=max_model_len
            ).max_num_seqs
        return {
            "model": self.model,
            "diffusion_config": {"canvas_length": canvas},
            "max_num_seqs": seqs,
            "max_model_len": max_model_len or self.max_model_len,
            "enable_prefix_caching": True,
            "limit_mm_per_prompt": {"image": 0, "video": 0},
            "gpu_memory_utilization": self.gpu_memory_utilization,
            **self.extra,
            **overrides,
        }

    def serve_args(self, **overrides: Any) -> list[str]:
        """The same settings as ``vllm serve`` command-line arguments (for servers
        the ``RemoteReader`` talks to)."""
        import json

        kwargs = self.llm_kwargs(**overrides)
        args = [kwargs.pop("model")]
        for key, value in kwargs.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                args.append(flag)
            elif isinstance(value, dict):
                args += [flag, json.dumps(value, separators=(",", ":"))]
            else:
                args += [flag, str(value)]
        return args


# fmt: off
PRESETS: dict[str, EnginePreset] = {
    p.name: p
    for p in (
        EnginePreset(
            name="diffusiongemma-bf16", model="google/diffusiongemma-26B-A4B-it",
            precision="bf16", gpu_memory_gib=64,
            suggested_gpus=("H100 80GB", "H200", "A100 80GB", "B200"),
        ),
        EnginePreset(
            name="diffusiongemma-fp8", model="RedHatAI/diffusiongemma-26B-A4B-it-FP8-dynamic",
            precision="fp8-dynamic", gpu_memory_gib=32,
            suggested_gpus=("L40S 48GB", "H100", "H200", "RTX 6000 Ada 48GB"),
        ),
        EnginePreset(
            name="diffusiongemma-nvfp4", model="RedHatAI/diffusiongemma-26B-A4B-it-NVFP4",
            precision="nvfp4", gpu_memory_gib=24, gpu_gib=96,
            suggested_gpus=("B200", "RTX PRO 6000 Blackwell", "RTX 5090 32GB", "DGX Spark"),
        ),
    )
}
# fmt: on
#: Short names: bf16, fp8, nvfp4.
PRESETS.update({p.name.removeprefix("diffusiongemma-"): p for p in list(PRESETS.values())})


def get_preset(name: str | EnginePreset) -> EnginePreset:
    """The preset called ``name`` (``"fp8"``, ``"diffusiongemma-nvfp4"`` ...)."""
    if isinstance(name, EnginePreset):
        return name
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ConfigurationError(
            f"unknown engine preset {name!r}; choose one of "
            f"{sorted(k for k in PRESETS if k.startswith('diffusiongemma'))} "
            "(or bf16 / fp8 / nvfp4)"
        ) from None
