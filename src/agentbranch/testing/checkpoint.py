"""A tiny random-weight DiffusionGemma checkpoint built from code, byte-identical for the same
arguments, and a cache of built folders in the temp dir (see ``agentbranch.testing``)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from agentbranch.testing import tokenizer
from agentbranch.testing.tokenizer import SPECIAL_TOKEN_IDS, build_tiny_tokenizer

__all__ = ["build_tiny_diffusiongemma", "tiny_diffusiongemma"]


def build_tiny_diffusiongemma(
    path: str | os.PathLike[str],
    *,
    hidden_size: int = 64,
    intermediate_size: int | None = None,  # None: 2 * hidden_size
    num_layers: int = 2,
    num_attention_heads: int = 2,
    head_dim: int | None = None,  # None: hidden_size // num_attention_heads // 2, at least 8
    num_experts: int = 4,
    top_k_experts: int = 2,
    moe_intermediate_size: int | None = None,  # None: hidden_size // 2, at least 8
    vocab_size: int = 512,
    canvas_length: int = 64,
    max_position_embeddings: int = 4096,
    sliding_window: int = 64,
    initializer_range: float = 0.1,
    thought_in_template: bool = False,
    seed: int = 0,
) -> Path:
    """Build a random-weight DiffusionGemma checkpoint plus the tiny tokenizer into ``path``
    and return the folder: ``config.json``, ``model.safetensors``, a filled
    ``generation_config.json`` (the sampler fields vLLM needs) and the tokenizer files,
    from code in seconds with no model hub. Two builds with the same arguments give
    byte-identical files. Layers alternate sliding/full attention and the last is full
    attention, as in the real model. Defaults give a ~0.2M-parameter model that runs in
    milliseconds; ``hidden_size=512, num_layers=8, num_experts=8, vocab_size=4096`` gives
    ~50M. ``initializer_range`` (0.1, larger than the 0.02 of real training inits) keeps the
    random logits from being nearly uniform."""
    import torch
    from transformers import (
        DiffusionGemmaConfig,
        DiffusionGemmaForBlockDiffusion,
        DiffusionGemmaTextConfig,
    )
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        DiffusionGemmaGenerationConfig,
        EntropyBoundSamplerConfig,
    )

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    heads = num_attention_heads
    head_dim = head_dim or max(8, hidden_size // heads // 2)
    layer_types = [
        "full_attention" if (i % 2 == 1 or i == num_layers - 1) else "sliding_attention"
        for i in range(num_layers)
    ]
    text_config = DiffusionGemmaTextConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        num_key_value_heads=1,
        head_dim=head_dim,
        global_head_dim=2 * head_dim,
        num_global_key_value_heads=1,
        max_position_embeddings=max_position_embeddings,
        sliding_window=sliding_window,
        layer_types=layer_types,
        num_experts=num_experts,
        top_k_experts=top_k_experts,
        moe_intermediate_size=moe_intermediate_size or max(8, hidden_size // 2),
        initializer_range=initializer_range,
        pad_token_id=SPECIAL_TOKEN_IDS["<pad>"],
        eos_token_id=SPECIAL_TOKEN_IDS["<eos>"],
        bos_token_id=SPECIAL_TOKEN_IDS["<bos>"],
    )
    config = DiffusionGemmaConfig(
        text_config=text_config,
        # None breaks loading in transformers 5.18/5.19; a minimal one costs ~2k params.
        vision_config={
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 8,
            "patch_size": 2,
            "position_embedding_size": 8,
            "pooling_kernel_size": 2,
        },
        boi_token_id=SPECIAL_TOKEN_IDS["<|image>"],
        eoi_token_id=SPECIAL_TOKEN_IDS["<image|>"],
        image_token_id=SPECIAL_TOKEN_IDS["<|image|>"],
        initializer_range=initializer_range,
        canvas_length=canvas_length,
    )
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(config).eval()
    model.generation_config = DiffusionGemmaGenerationConfig(
        max_new_tokens=canvas_length,
        max_denoising_steps=48,
        sampler_config=EntropyBoundSamplerConfig(entropy_bound=0.1),
        t_min=0.4,
        t_max=0.8,
        stability_threshold=1,
        confidence_threshold=0.005,
        bos_token_id=SPECIAL_TOKEN_IDS["<bos>"],
        pad_token_id=SPECIAL_TOKEN_IDS["<pad>"],
        eos_token_id=[SPECIAL_TOKEN_IDS["<eos>"], SPECIAL_TOKEN_IDS["<turn|>"]],
    )
    from agentbranch.engine.quiet_loads import quiet_loads

    with quiet_loads():  # transformers' "Writing model shards" bar: the library never prints
        model.save_pretrained(folder)
    build_tiny_tokenizer(folder, vocab_size=vocab_size, thought_in_template=thought_in_template)
    return folder


def tiny_diffusiongemma(path: str | os.PathLike[str] | None = None, **kwargs: Any) -> Path:
    """``build_tiny_diffusiongemma`` with a cache: without ``path`` the folder lives in the
    system temp dir, keyed by the arguments, and is built once (atomically, so parallel test
    workers are safe)."""
    if path is not None:
        return build_tiny_diffusiongemma(path, **kwargs)
    import transformers

    # The code that builds it (this module and the tokenizer's), transformers and the
    # arguments key the cache.
    code = Path(__file__).read_bytes() + Path(tokenizer.__file__).read_bytes()
    args = json.dumps({"transformers": transformers.__version__, **kwargs}, sort_keys=True)
    key = hashlib.sha256(code + args.encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"agentbranch-tiny-diffusiongemma-{key}"
    if (folder / ".complete").exists():
        return folder
    with tempfile.TemporaryDirectory(
        prefix=folder.name + ".", dir=folder.parent, ignore_cleanup_errors=True
    ) as staging:
        (build_tiny_diffusiongemma(staging, **kwargs) / ".complete").write_text("ok\n")
        try:
            os.replace(staging, folder)
        except OSError:  # another process won the race (target exists and is not empty)
            if not (folder / ".complete").exists():
                raise
    return folder
