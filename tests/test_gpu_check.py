"""A script check: ``scripts/gpu_check.sh`` (``benchmarks/gpu_check.py``) runs end to end
at its small scale on the CPU, so the GPU check is ready the day a GPU is lent: the model
built on the device, ``decide_many`` through the coalescer at two concurrencies, the
plain forward of the same reads, the JSON, the tiny model's agreement check. No time is
asserted. Also: the full, published shape is what the script builds (on the meta device,
free), and its way of building a model straight on the device gives what transformers'
own construction gives but for the random draws."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gpu_check  # benchmarks/ (on the path: pyproject's pythonpath)
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.script


def test_the_gpu_check_runs_at_small_scale_on_the_cpu(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path), "OMP_NUM_THREADS": "1"}
    args = ["--scale", "small", "--device", "cpu", "--concurrency", "1,2"]
    # 4 requests at each concurrency, however slow the machine (no --step-s cut)
    args += ["--requests", "4", "--step-s", "1e6", "--tiny-states", "2"]
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/gpu_check.sh"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert "errors" not in result
    assert result["read"] == {
        "canvas_served": 32,
        "denoising_steps": 1,
        "questions_per_request": 3,
        "canvas_read": 16,  # the joint canvas agentbranch plans for 3 questions
        "prompt_tokens": result["read"]["prompt_tokens"],
        "slots": 3,
    }
    assert result["model"]["layers"] == 2 and result["model"]["canvas_length"] == 32
    assert [run["concurrency"] for run in result["runs"]] == [1, 2]
    for run in result["runs"]:
        for path in ("engine", "plain"):
            figures = run[path]
            assert figures["requests"] == 4 and figures["requests_per_s"] > 0
            assert figures["decisions_per_s"] == pytest.approx(3 * figures["requests_per_s"], 0.01)
            assert 0 < figures["p50_s"] <= figures["p95_s"]
            assert figures["peak_gpu_bytes"] is None  # no GPU: no figure, not a zero
        assert run["plain"]["mean_batch"] == run["concurrency"]
        assert 1 <= run["engine"]["mean_batch"] <= run["concurrency"]
        assert run["ratio"] > 0
        # The bound reads exactly what the engine sent, and in float32 it answers alike.
        assert run["same_token_reads"] is True
        assert run["same_labels"] == 1.0
    tiny = result["tiny_agreement"]
    assert tiny["agree"] and tiny["decisions"] == 2 * 3 * 2  # 2 states x 3 questions x 2 ways
    assert "ratio engine / plain forward" in done.stdout
    assert "tiny model, cpu vs cpu" in done.stdout


def test_the_full_shape_is_the_published_26b_a4b() -> None:
    import torch

    model = gpu_check.meta_model(gpu_check.model_config("full"), torch.bfloat16)
    text = model.config.text_config
    assert (text.num_hidden_layers, text.hidden_size, text.vocab_size) == (30, 2816, 262_144)
    assert (text.num_experts, text.top_k_experts, text.moe_intermediate_size) == (128, 8, 704)
    assert text.layer_types.count("full_attention") == 5 and text.layer_types[-1] == (
        "full_attention"
    )
    full, sliding = text.per_layer_config[5], text.per_layer_config[0]
    assert (full.head_dim, full.num_key_value_heads) == (512, 2)
    assert (sliding.head_dim, sliding.num_key_value_heads) == (256, 8)
    # The encoder's layers are the decoder's: about 25B parameters, about 47 GiB in bf16.
    params = sum(p.numel() for p in model.parameters())
    assert 25.0e9 < params < 25.5e9
    assert 46 < gpu_check.parameter_bytes(model) / gpu_check.GIB < 48


def test_building_on_the_device_matches_transformers_construction() -> None:
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    config = gpu_check.model_config("small")
    normal = DiffusionGemmaForBlockDiffusion(config)
    built = gpu_check.materialize(gpu_check.meta_model(config, torch.float32), "cpu", seed=0)
    # Every buffer (RoPE tables, embedding scales, the layer scalars) as constructed.
    buffers = dict(normal.named_buffers())
    assert buffers.keys() == dict(built.named_buffers()).keys()
    for name, buffer in built.named_buffers():
        assert torch.equal(buffer, buffers[name]), name
    # The same parameters, the constant ones equal (norms, router scales), the random
    # ones drawn, the encoder's shared with the decoder's.
    params = dict(normal.named_parameters())
    for name, p in built.named_parameters():
        assert p.shape == params[name].shape and p.dtype == params[name].dtype, name
        assert torch.isfinite(p).all(), name
        if bool((params[name] == params[name].flatten()[0]).all()):
            assert torch.equal(p, params[name]), name
    shared = built.model.encoder.language_model.layers[0].experts.gate_up_proj
    assert shared is built.model.decoder.layers[0].experts.gate_up_proj
    assert built.lm_head.weight is built.model.decoder.embed_tokens.weight
