"""The serving assets in engine/ say what the engine presets say, in arguments vLLM's own
command-line parser accepts; the presets' ``LLM(...)`` arguments are valid ``EngineArgs``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentbranch.engine.presets import PRESETS, get_preset

ENGINE = Path(__file__).parents[2] / "engine"
SETTINGS = (
    "diffusion_config",
    "max_num_seqs",
    "max_model_len",
    "enable_prefix_caching",
    "limit_mm_per_prompt",
    "gpu_memory_utilization",
)


def vllm_parse(args: list[str]) -> Any:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser()).parse_args(args)


def expected(preset_name: str) -> dict[str, Any]:
    kwargs = get_preset(preset_name).llm_kwargs()
    return {k: kwargs[k] for k in SETTINGS}


@pytest.mark.parametrize(
    "name", ["diffusiongemma-bf16", "diffusiongemma-fp8", "diffusiongemma-nvfp4"]
)
def test_presets_are_valid_vllm_arguments(name: str) -> None:
    import dataclasses

    from vllm.config import DiffusionConfig
    from vllm.engine.arg_utils import EngineArgs

    preset = PRESETS[name]
    kwargs = preset.llm_kwargs()
    # LLM(**kwargs) passes them to EngineArgs (building one here would fetch the model).
    assert set(kwargs) <= {f.name for f in dataclasses.fields(EngineArgs)}
    assert DiffusionConfig(**kwargs["diffusion_config"]).canvas_length == preset.canvas_length
    parsed = vllm_parse(preset.serve_args())
    assert parsed.model == preset.model or parsed.model_tag == preset.model
    assert {k: getattr(parsed, k) for k in SETTINGS} == expected(name)
    assert PRESETS[name.split("-")[1]] is preset


@pytest.mark.parametrize("precision", ["fp8", "nvfp4"])
def test_kserve_manifests_match_the_presets(precision: str) -> None:
    runtime = yaml.safe_load(
        (ENGINE / "kserve/servingruntime-vllm-diffusiongemma.yaml").read_text()
    )
    isvc = yaml.safe_load(
        (ENGINE / f"kserve/inferenceservice-diffusiongemma-{precision}.yaml").read_text()
    )
    container = runtime["spec"]["containers"][0]
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] in {
        f["name"] for f in runtime["spec"]["supportedModelFormats"]
    }
    preset = get_preset(precision)
    assert model["storageUri"] == f"hf://{preset.model}"
    args = [
        a.replace("{{.Name}}", isvc["metadata"]["name"]) for a in container["args"] + model["args"]
    ]
    parsed = vllm_parse(args)
    assert {k: getattr(parsed, k) for k in SETTINGS} == expected(precision)
    assert parsed.logprobs_mode == "raw_logprobs"
    assert parsed.served_model_name == [isvc["metadata"]["name"]]
    assert isvc["spec"]["predictor"]["model"]["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_containerfile_matches_the_fp8_preset() -> None:
    text = (ENGINE / "Containerfile").read_text()
    model = re.search(r"^ARG MODEL=(\S+)$", text, re.MULTILINE)
    cmd = re.search(r"^CMD (\[.*\])$", text, re.MULTILINE)
    assert model and cmd
    assert model.group(1) == get_preset("fp8").model
    parsed = vllm_parse(["--model", model.group(1), *json.loads(cmd.group(1))])
    assert {k: getattr(parsed, k) for k in SETTINGS} == expected("fp8")
