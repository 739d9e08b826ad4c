"""The model numbers capacity planning needs: vocabulary, width, attention layout, weights.

``DIFFUSIONGEMMA_26B`` holds the published ``text_config`` of
``google/diffusiongemma-26B-A4B-it`` (the RedHatAI FP8 and NVFP4 checkpoints quantize the
same architecture); ``ModelShape.from_config`` reads the same numbers from any
DiffusionGemma ``config.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.core.files import read_json

__all__ = ["DIFFUSIONGEMMA_26B", "PRESET_WEIGHTS_GIB", "ModelShape"]

GIB = 1 << 30

#: The largest value a config field may hold: far beyond any real model, small enough
#: that the sizing arithmetic stays exact and quick.
MAX_COUNT = {"layers": 10_000, "default": 1 << 40}


def _count(value: Any, field: str, source: str, minimum: int = 1) -> int:
    """A config's whole number ``field``, at least ``minimum`` and sane, or a clear error."""
    whole = isinstance(value, int) or isinstance(value, float) and value.is_integer()
    if isinstance(value, bool) or not whole:  # (a float: not nan, inf or 2.5)
        raise ConfigurationError(f"{source}: {field} must be a whole number, got {value!r}")
    limit = MAX_COUNT["layers"] if "layers" in field else MAX_COUNT["default"]
    if value < minimum:
        raise ConfigurationError(f"{source}: {field} must be at least {minimum}, got {value:g}")
    if value > limit:
        raise ConfigurationError(
            f"{source}: {field} = {value:g} is not a real model's (at most {limit:,})"
        )
    return int(value)


@dataclass(frozen=True)
class ModelShape:
    """What sizes a DiffusionGemma deployment, besides the GPU."""

    vocab_size: int
    hidden_size: int
    #: Sliding-window attention layers: count, key/value heads, head size, window.
    sliding_layers: int
    sliding_kv_heads: int
    sliding_head_dim: int
    sliding_window: int
    #: Full-attention layers: count, key/value heads, head size.
    full_layers: int
    full_kv_heads: int
    full_head_dim: int
    #: The checkpoint's canvas (``canvas_length`` in config.json); vLLM serves this
    #: unless ``diffusion_config`` says otherwise. Larger served canvases are refused.
    max_canvas: int = 256
    #: ``generation_config.json``'s ``stability_threshold`` (vLLM keeps one more step).
    stability_threshold: int = 1
    #: Bytes of the checkpoint's weights on the GPU (None: give ``weights_gib``).
    weights_bytes: int | None = None
    name: str = "model"

    @property
    def sliding_kv_bytes_per_token(self) -> int:
        """K and V of one token in every sliding layer, in bytes per element of 1."""
        return self.sliding_layers * 2 * self.sliding_kv_heads * self.sliding_head_dim

    @property
    def full_kv_bytes_per_token(self) -> int:
        """K and V of one token in every full-attention layer (per byte of dtype)."""
        return self.full_layers * 2 * self.full_kv_heads * self.full_head_dim

    @classmethod
    def from_config(cls, config: dict[str, Any] | str | Path) -> ModelShape:
        """The shape of a DiffusionGemma ``config.json`` (a dict, a file or a folder)."""
        source = "config"
        if not isinstance(config, dict):
            path = Path(config)
            if path.is_dir():
                path = path / "config.json"
            source = str(path)
            config = read_json(path, "model config")
            if not isinstance(config, dict):
                raise InvalidFileError(f"{source} is not a JSON object")
        text = config.get("text_config", config)
        if not isinstance(text, dict):
            raise ConfigurationError(f"{source}: text_config must be a JSON object")
        try:
            layer_types = text.get("layer_types")
            if layer_types is None:
                layers = _count(text["num_hidden_layers"], "num_hidden_layers", source)
                sliding, full = 0, layers
            else:
                if not isinstance(layer_types, list) or not layer_types:
                    raise ConfigurationError(
                        f"{source}: layer_types must be a non-empty list of layer kinds"
                    )
                sliding = sum(1 for kind in layer_types if kind == "sliding_attention")
                full = len(layer_types) - sliding
            heads = text.get("num_attention_heads")
            head_dim = text.get("head_dim") or _count(
                text["hidden_size"], "hidden_size", source
            ) // _count(heads, "num_attention_heads", source)
            kv_heads = text.get("num_key_value_heads") or heads

            def get(key: str, default: Any, minimum: int = 1) -> int:
                return _count(text.get(key) or default, key, source, minimum)

            return cls(
                vocab_size=_count(text["vocab_size"], "vocab_size", source),
                hidden_size=_count(text["hidden_size"], "hidden_size", source),
                sliding_layers=sliding,
                sliding_kv_heads=_count(kv_heads, "num_key_value_heads", source),
                sliding_head_dim=_count(head_dim, "head_dim", source),
                sliding_window=get("sliding_window", 0, 0),
                full_layers=full,
                full_kv_heads=get("num_global_key_value_heads", kv_heads),
                full_head_dim=get("global_head_dim", head_dim),
                max_canvas=_count(config.get("canvas_length") or 256, "canvas_length", source),
                stability_threshold=_count(
                    (config.get("generation_config") or {}).get("stability_threshold", 1),
                    "stability_threshold",
                    source,
                    0,
                ),
                name=str(config.get("_name_or_path") or source),
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise ConfigurationError(
                f"{source} is not a DiffusionGemma config (missing or bad {e}); it needs "
                "text_config.vocab_size, hidden_size, num_hidden_layers, num_attention_heads"
            ) from None

    @classmethod
    def from_pretrained(cls, path: str | Path) -> ModelShape:
        """The shape transformers sees in a local checkpoint: as :meth:`from_config`, but
        the attention layout comes from the config class's ``per_layer_config`` (what
        vLLM's Gemma 4 layers read), which fills what ``config.json`` leaves out."""
        from transformers import AutoConfig

        hf = AutoConfig.from_pretrained(str(path))
        shape = cls.from_config(hf.to_dict())
        text = hf.get_text_config()
        layers = list(getattr(text, "per_layer_config", None) or [])
        if not layers:
            return shape
        kinds = list(text.layer_types)
        sliding = [c for c, k in zip(layers, kinds) if k == "sliding_attention"]
        full = [c for c, k in zip(layers, kinds) if k != "sliding_attention"]
        pick = lambda group, attr, default: int(getattr(group[0], attr)) if group else default  # noqa: E731
        return replace(
            shape,
            sliding_kv_heads=pick(sliding, "num_key_value_heads", shape.sliding_kv_heads),
            sliding_head_dim=pick(sliding, "head_dim", shape.sliding_head_dim),
            full_kv_heads=pick(full, "num_key_value_heads", shape.full_kv_heads),
            full_head_dim=pick(full, "head_dim", shape.full_head_dim),
            name=str(path),
        )

    def __post_init__(self) -> None:
        # Every size must be a whole, sane count: a zero, a negative or a huge number
        # would size a deployment from nonsense ("needs -0.00 GiB") or never finish.
        for name in ("vocab_size", "hidden_size", "sliding_head_dim", "full_head_dim"):
            _count(getattr(self, name), name, self.name)
        for name in ("sliding_kv_heads", "full_kv_heads", "max_canvas"):
            _count(getattr(self, name), name, self.name)
        for name in ("sliding_layers", "full_layers", "sliding_window", "stability_threshold"):
            _count(getattr(self, name), name, self.name, 0)
        if self.sliding_layers + self.full_layers < 1:
            raise ConfigurationError(f"{self.name}: a model needs at least one layer")
        if self.sliding_layers + self.full_layers > MAX_COUNT["layers"]:
            raise ConfigurationError(
                f"{self.name}: {self.sliding_layers + self.full_layers} layers is not a real "
                f"model (at most {MAX_COUNT['layers']})"
            )
        if self.weights_bytes is not None:
            _count(self.weights_bytes, "weights_bytes", self.name)


#: google/diffusiongemma-26B-A4B-it's published config.json (text_config).
DIFFUSIONGEMMA_26B = ModelShape(
    vocab_size=262_144,
    hidden_size=2816,
    sliding_layers=25,
    sliding_kv_heads=8,
    sliding_head_dim=256,
    sliding_window=1024,
    full_layers=5,
    full_kv_heads=2,
    full_head_dim=512,
    max_canvas=256,
    stability_threshold=1,
    name="diffusiongemma-26B-A4B-it",
)

#: Weights on the GPU, GiB, per preset precision. FP8: Red Hat's OpenShift AI page
#: for the FP8-dynamic checkpoint (31.3 GB). BF16 and NVFP4: the published "GPU memory
#: needed" figures (≈ 64 GB, ≈ 24 GB), which include some runtime, so these two are
#: upper bounds; pass ``weights_gib`` for a measured figure (vLLM logs it at start-up:
#: "Model loading took ... GiB").
PRESET_WEIGHTS_GIB: dict[str, float] = {"fp8": 31.3, "bf16": 64.0, "nvfp4": 24.0}
