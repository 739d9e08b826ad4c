"""Capacity planning: the formula, the schema's canvas, the CLI, the manifests, the warning."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from agentbranch.cli import app
from agentbranch.core.errors import ConfigurationError
from agentbranch.deploy import DIFFUSIONGEMMA_26B, ModelShape, schema_canvas, size
from agentbranch.deploy.kserve import kserve_manifest
from agentbranch.engine.canvas import joint_spans, joint_width
from agentbranch.engine.capacity.check import capacity_warnings, engine_capacity_warnings
from agentbranch.engine.capacity.sizing import (
    kv_bytes_per_sequence,
    state_bytes_per_sequence,
    step_bytes_per_sequence,
)
from agentbranch.engine.presets import PRESETS, get_preset

GIB = 1 << 30
ENGINE = Path(__file__).parents[1] / "engine"
runner = CliRunner()


# -- the formula ----------------------------------------------------------------------


def test_fp8_on_80_gib_reproduces_red_hats_limit_at_canvas_256() -> None:
    # Red Hat: --max-num-seqs 4 or fewer with canvas_length 256 on one 80 GB GPU (FP8).
    plan = size("fp8", gpu_gib=80, canvas_length=256)
    assert plan.max_num_seqs == 4 and plan.bound_by == "step"
    # vLLM's own comment: more than 8 sequences OOM a single H200 (141 GB) at 256.
    assert size("fp8", gpu_gib=140, canvas_length=256).max_num_seqs == 8


@pytest.mark.parametrize(("canvas", "seqs"), [(16, 74), (32, 37), (64, 18), (256, 4)])
def test_fp8_limits_stated_in_the_docs(canvas: int, seqs: int) -> None:
    assert size("fp8", gpu_gib=80, canvas_length=canvas).max_num_seqs == seqs


def test_step_term_is_canvas_times_vocab_times_six_fp32_copies() -> None:
    assert step_bytes_per_sequence(DIFFUSIONGEMMA_26B, 256) == 256 * 262_144 * 24
    plan = size("fp8", gpu_gib=80, canvas_length=64)
    step = plan.term("step_per_sequence").bytes
    room = plan.term("step_headroom").bytes
    assert room == int(80 * GIB) - int(80 * GIB * 0.9) - GIB
    assert plan.step_limit == room // step
    # The limit is the largest count that fits: one more does not.
    assert plan.max_num_seqs * step <= room < (plan.max_num_seqs + 1) * step


def test_limits_shrink_with_canvas_and_vocabulary_and_grow_with_the_gpu() -> None:
    small_vocab = ModelShape(**{**DIFFUSIONGEMMA_26B.__dict__, "vocab_size": 131_072})
    assert (
        size("fp8", gpu_gib=80, canvas_length=64, model_config=small_vocab).step_limit
        == 2 * size("fp8", gpu_gib=80, canvas_length=64).step_limit + 1
    )
    limits = [size("fp8", gpu_gib=80, canvas_length=c).max_num_seqs for c in (16, 64, 256)]
    assert limits == sorted(limits, reverse=True)
    assert size("fp8", gpu_gib=141, canvas_length=64).max_num_seqs > limits[1]


def test_kv_per_sequence_counts_full_layers_per_token_and_sliding_layers_per_window() -> None:
    shape = DIFFUSIONGEMMA_26B
    full_per_token = 5 * 2 * 2 * 512 * 2
    sliding_per_token = 25 * 2 * 8 * 256 * 2
    assert kv_bytes_per_sequence(shape, 100) == 112 * (full_per_token + sliding_per_token)
    long = kv_bytes_per_sequence(shape, 8192)
    assert long == 8192 * full_per_token + (1024 + 16) * sliding_per_token
    assert kv_bytes_per_sequence(shape, 100, dtype_bytes=1) * 2 == kv_bytes_per_sequence(shape, 100)


def test_state_per_sequence_is_vllms_persistent_buffers() -> None:
    c, v, h = 256, 262_144, 2816
    expected = (
        c * (8 + 8 + 8 + 1 + 8 * 2)
        + c * h * 4
        + 20  # DiffusionGemmaRequestStates
        + c * 4
        + 4  # DiffusionSampler._sampled, _num_sampled
        + c * 8  # RequestState.draft_tokens
        + v * 4
        + v // 32 * 4  # PenaltiesState
        + (c + 1) * (v // 32 * 4 + 4)  # StructuredOutputsWorker bit mask, logit indices
    )
    assert state_bytes_per_sequence(DIFFUSIONGEMMA_26B, c) == expected


def test_kv_bound_plan_says_so() -> None:
    plan = size("bf16", gpu_gib=80, canvas_length=16, prompt_tokens=4096)
    assert plan.bound_by == "kv" and plan.max_num_seqs == plan.kv_limit < plan.step_limit
    assert any("KV cache" in n for n in plan.notes)


def test_balanced_utilization_holds_more() -> None:
    plan = size("fp8", gpu_gib=80, canvas_length=64)
    assert plan.balanced_gpu_memory_utilization < 0.9
    balanced = size(
        "fp8",
        gpu_gib=80,
        canvas_length=64,
        gpu_memory_utilization=plan.balanced_gpu_memory_utilization,
    )
    assert balanced.max_num_seqs > plan.max_num_seqs
    assert abs(balanced.step_limit - balanced.kv_limit) <= 0.1 * balanced.kv_limit


def test_plan_from_a_model_config_file(tmp_path: Path) -> None:
    config = {
        "canvas_length": 64,
        "generation_config": {"stability_threshold": 2},
        "text_config": {
            "vocab_size": 512,
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 8,
            "num_global_key_value_heads": 1,
            "global_head_dim": 64,
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    shape = ModelShape.from_config(tmp_path)
    assert (shape.vocab_size, shape.sliding_layers, shape.full_layers) == (512, 1, 1)
    assert (shape.full_kv_heads, shape.full_head_dim, shape.max_canvas) == (1, 64, 64)
    assert shape.stability_threshold == 2
    plan = size(
        None,
        gpu_gib=4,
        canvas_length=32,
        model_config=tmp_path,
        weights_gib=0.01,
        activation_gib=0.0,
        gpu_memory_utilization=0.5,
        prompt_tokens=16,
    )
    assert plan.max_num_seqs == plan.step_limit
    with pytest.raises(ConfigurationError, match="weights_gib"):
        size(None, gpu_gib=1, canvas_length=32, model_config=tmp_path)
    with pytest.raises(ConfigurationError, match="wider than the model's 64"):
        size(None, gpu_gib=1, canvas_length=128, model_config=tmp_path, weights_gib=0.01)


def test_bad_input_says_what_would_fit(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="unknown engine preset 'fp4'.*fp8"):
        size("fp4", gpu_gib=80, canvas_length=64)
    with pytest.raises(ConfigurationError, match=r"at least \d+ GiB.*smaller preset: fp8, nvfp4"):
        size("bf16", gpu_gib=48, canvas_length=64)
    with pytest.raises(ConfigurationError, match="serve at most 256"):
        size("fp8", gpu_gib=80, canvas_length=512)
    # The weights fit but a 256 canvas step does not: say which canvas would.
    with pytest.raises(ConfigurationError, match="serve a canvas of at most 96"):
        size("nvfp4", gpu_gib=32, canvas_length=256, gpu_memory_utilization=0.95)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigurationError, match="model config .*bad.json: not valid JSON"):
        ModelShape.from_config(tmp_path / "bad.json")
    with pytest.raises(ConfigurationError, match="not a DiffusionGemma config"):
        ModelShape.from_config({"text_config": {"hidden_size": 8}})
    for kwargs in (
        {"gpu_memory_utilization": 1.5},
        {"gpu_gib": -1},
        {"prompt_tokens": 0},
        {"kv_cache_dtype": "int3"},
    ):
        with pytest.raises(ConfigurationError):
            size("fp8", **{"gpu_gib": 80, "canvas_length": 64, **kwargs})


# -- the schema's canvas ---------------------------------------------------------------


def _yes_no(n: int) -> dict[str, dict]:
    return {f"q{i}": {"type": "noul", "instructions": f"Question {i}?"} for i in range(n)}


def test_schema_canvas_joint_single_and_chunked() -> None:
    one = schema_canvas(_yes_no(1))
    assert (one.canvas_length, one.reads_per_decision, one.joint) == (16, 1, False)
    single = schema_canvas(_yes_no(5), joint=False)
    assert (single.canvas_length, single.reads_per_decision) == (16, 5)
    # 5 lines of "k: <slot>\n" (4 tokens each under Gemma's digit split) + <turn|> + pad.
    joint = schema_canvas(_yes_no(5))
    assert (joint.canvas_length, joint.reads_per_decision) == (joint_width(21), 1) == (32, 1)
    # 12 questions: 9 x 4 + 3 x 5 tokens = 51 -> 64; capped at 32 they split in chunks.
    assert schema_canvas(_yes_no(12)).canvas_length == 64
    capped = schema_canvas(_yes_no(12), max_canvas=32)
    assert capped.canvas_length == 32 and capped.reads_per_decision == 2
    assert capped.widths == (32, 32)


def test_joint_spans_are_the_planners_chunking() -> None:
    assert joint_spans([4] * 4, 64) == [(0, 4)]
    assert joint_spans([4] * 12, 32) == [(0, 6), (6, 12)]
    assert joint_spans([40, 40], 32) == [(0, 1), (1, 2)]


# -- the CLI ---------------------------------------------------------------------------


def test_cli_json_gives_red_hats_limit_and_each_term() -> None:
    result = runner.invoke(
        app, ["size", "--preset", "fp8", "--gpu-gib", "80", "--canvas-length", "256", "--json"]
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["max_num_seqs"] == 4 <= 4
    names = {t["name"] for t in plan["terms"]}
    assert {"weights", "kv_per_sequence", "state_per_sequence", "step_per_sequence"} <= names
    assert all(t["explanation"] for t in plan["terms"])
    assert plan["llm_kwargs"]["diffusion_config"] == {"canvas_length": 256}


def test_cli_table_and_questions_file(tmp_path: Path) -> None:
    q = tmp_path / "q.json"
    q.write_text(json.dumps(_yes_no(5)))
    result = runner.invoke(app, ["size", "--gpu-gib", "80", "--questions", str(q)])
    assert result.exit_code == 0, result.output
    assert "max_num_seqs = 37" in result.output and "canvas 32" in result.output
    assert "1 read(s) per decision" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "fp4", "--gpu-gib", "80"], "unknown engine preset"),
        (["--preset", "bf16", "--gpu-gib", "40"], "smaller preset"),
        (["--gpu-gib", "80", "--canvas-length", "300"], "serve at most 256"),
        (["--gpu-gib", "80", "--questions", "/nonexistent/q.json"], "cannot read questions"),
        (["--gpu-gib", "80", "--canvas-length", "16", "--questions", "x.json"], "not both"),
        (["--gpu-gib", "eighty"], "Invalid value"),
    ],
)
def test_cli_errors_are_clear_and_non_zero(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["size", *args])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_cli_bad_questions_file(tmp_path: Path) -> None:
    q = tmp_path / "q.json"
    q.write_bytes(b"\xff\xfe not utf-8")
    result = runner.invoke(app, ["size", "--gpu-gib", "80", "--questions", str(q)])
    assert result.exit_code == 2 and "cannot read questions file" in result.output
    q.write_text(json.dumps({"x": {"type": "nope", "instructions": "?"}}))
    result = runner.invoke(app, ["size", "--gpu-gib", "80", "--questions", str(q)])
    assert result.exit_code == 2 and "unknown type" in result.output


# -- manifests and presets ----------------------------------------------------------------


def _args(manifest: str) -> dict[str, str]:
    doc = yaml.safe_load(manifest)
    return dict(a.split("=", 1) for a in doc["spec"]["predictor"]["model"]["args"])


def test_deploy_kserve_carries_the_plans_figures(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["deploy", "kserve", "--preset", "fp8", "--gpu-gib", "80", "--canvas-length", "16"]
    )
    assert result.exit_code == 0, result.output
    args = _args(result.output)
    assert args["--max-num-seqs"] == "74"
    assert json.loads(args["--diffusion-config"]) == {"canvas_length": 16}
    q = tmp_path / "q.json"
    q.write_text(json.dumps(_yes_no(12)))
    out = tmp_path / "isvc.yaml"
    result = runner.invoke(
        app,
        [
            "deploy",
            "kserve",
            "--gpu-gib",
            "80",
            "--questions",
            str(q),
            "--name",
            "triage",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(out.read_text())
    assert doc["metadata"]["name"] == "triage"
    assert _args(out.read_text())["--max-num-seqs"] == "18"  # canvas 64
    result = runner.invoke(app, ["deploy", "kserve", "--gpu-gib", "80", "--name", "Bad_Name"])
    assert result.exit_code == 2 and "DNS label" in result.output


@pytest.mark.parametrize("precision", ["fp8", "nvfp4"])
def test_shipped_manifests_are_the_generated_ones(precision: str) -> None:
    preset = get_preset(precision)
    plan = preset.plan()
    shipped = (ENGINE / f"kserve/inferenceservice-{preset.name}.yaml").read_text()
    assert shipped == kserve_manifest(preset, plan)
    assert _args(shipped)["--max-num-seqs"] == str(preset.llm_kwargs()["max_num_seqs"])


def test_presets_take_max_num_seqs_from_the_plan() -> None:
    fp8 = PRESETS["fp8"]
    assert (
        fp8.llm_kwargs()["max_num_seqs"]
        == size("fp8", gpu_gib=80, canvas_length=64, max_model_len=8192).max_num_seqs
        == 18
    )
    assert fp8.llm_kwargs(canvas_length=256)["max_num_seqs"] == 4
    assert fp8.llm_kwargs(gpu_gib=140, canvas_length=256)["max_num_seqs"] == 8
    assert fp8.llm_kwargs(max_num_seqs=3)["max_num_seqs"] == 3
    # The Containerfile serves the fp8 preset's figures.
    cmd = re.search(r"^CMD (\[.*\])$", (ENGINE / "Containerfile").read_text(), re.MULTILINE)
    assert cmd is not None
    served = json.loads(cmd.group(1))
    assert served[served.index("--max-num-seqs") + 1] == str(fp8.llm_kwargs()["max_num_seqs"])


# -- the start-up warning -------------------------------------------------------------


def test_capacity_warnings() -> None:
    ok = dict(
        canvas_length=64,
        vocab_size=262_144,
        gpu_memory_utilization=0.9,
        gpu_total_bytes=80 * GIB,
        kv_cache_tokens=10_000_000,
    )
    assert capacity_warnings(max_num_seqs=18, **ok) == []
    [too_many] = capacity_warnings(max_num_seqs=32, **ok)
    assert "max_num_seqs=32 at canvas 64 may run out of GPU memory" in too_many
    assert "holds 18" in too_many
    [idle] = capacity_warnings(max_num_seqs=8, **ok)
    assert "under half" in idle and "about 18" in idle
    [kv] = capacity_warnings(max_num_seqs=18, **{**ok, "kv_cache_tokens": 600})
    assert "KV cache holds 600 tokens" in kv
    # No CUDA device: no step check and no idle warning.
    assert capacity_warnings(max_num_seqs=8, **{**ok, "gpu_total_bytes": None}) == []


def test_engine_capacity_warnings_reads_vllm_config() -> None:
    config = SimpleNamespace(
        cache_config=SimpleNamespace(
            gpu_memory_utilization=0.9, num_gpu_blocks=1000, block_size=16
        ),
        scheduler_config=SimpleNamespace(max_num_seqs=256),
    )
    step, kv = engine_capacity_warnings(config, 64, 262_144, gpu_total_bytes=80 * GIB)
    assert "max_num_seqs=256" in step and "holds 18" in step
    # KV: 16,000 tokens hold 246 canvases of 65 tokens: fewer than 256.
    warnings = engine_capacity_warnings(config, 64, 262_144, gpu_total_bytes=None)
    assert len(warnings) == 1 and "KV cache holds 16000 tokens" in warnings[0]


@pytest.mark.parametrize(("count", "served"), [(3, 64), (6, 16), (12, 32), (12, 64), (20, 256)])
def test_schema_canvas_is_what_the_planner_sends(tiny_tokenizer, count: int, served: int) -> None:
    """With the model's tokenizer, the schema's canvas and reads are the planner's."""
    import agentbranch as ab
    from agentbranch.core.questions import to_spec
    from agentbranch.core.reads import ReadRequest
    from agentbranch.engine.canvas import CanvasPlanner

    questions = {f"q{i}": ab.yes_no(f"Question {i}?") for i in range(count)}
    encode = lambda s: tiny_tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    schema = schema_canvas(questions, max_canvas=served, encode=encode)
    planner = CanvasPlanner(
        tiny_tokenizer, vocab_size=512, served_canvas=schema.canvas_length, max_model_len=8192
    )
    specs = tuple(to_spec(k, q) for k, q in questions.items())
    plan = planner.plan(ReadRequest("state", specs, joint=True))
    assert tuple(len(r.canvas) for r in plan.token_reads) == schema.widths
    assert len(plan.token_reads) == schema.reads_per_decision
    # Serving any narrower canvas would split the schema into more reads.
    if schema.reads_per_decision == 1 and schema.canvas_length > 16:
        narrower = CanvasPlanner(
            tiny_tokenizer,
            vocab_size=512,
            served_canvas=schema.canvas_length - 16,
            max_model_len=8192,
        )
        assert len(narrower.plan(ReadRequest("state", specs, joint=True)).token_reads) > 1


def test_cli_counts_lines_with_a_tokenizer(tiny_tokenizer_dir: Path, tmp_path: Path) -> None:
    q = tmp_path / "q.json"
    q.write_text(json.dumps(_yes_no(12)))
    args = ["size", "--gpu-gib", "80", "--questions", str(q), "--json"]
    with_tok = runner.invoke(app, [*args, "--tokenizer", str(tiny_tokenizer_dir)])
    assert with_tok.exit_code == 0, with_tok.output
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    encode = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    expected = schema_canvas(_yes_no(12), encode=encode)
    plan = json.loads(with_tok.stdout)
    assert plan["canvas_length"] == expected.canvas_length
    assert plan["schema"]["widths"] == list(expected.widths)
    missing = runner.invoke(app, [*args, "--tokenizer", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "cannot load a tokenizer" in missing.output
