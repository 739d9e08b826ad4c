"""`agentbranch size` / `deploy kserve` on bad input, and `deploy kserve -o` into folders.

Every bad number or config field is a one-line ``error:`` (exit 2) naming what was wrong,
never a traceback, and a value given is used or refused, never swapped for the default.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from agentbranch.cli import app
from agentbranch.core.errors import ConfigurationError
from agentbranch.deploy import ModelShape, size
from agentbranch.deploy.kserve import RUNTIME_FILE, RUNTIME_NAME, servingruntime_manifest

ENGINE = Path(__file__).parents[1] / "engine"
runner = CliRunner()


def _error(args: list[str]) -> str:
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.output


@pytest.mark.parametrize("command", [["size"], ["deploy", "kserve"]])
@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--gpu-gib", "inf"], "--gpu-gib must be a finite number"),
        (["--gpu-gib", "1e300"], "--gpu-gib must be at most"),
        (["--gpu-gib", "nan"], "--gpu-gib must be a finite number"),
        (["--gpu-gib", "0"], "--gpu-gib must be positive"),
        (["--gpu-gib", "80", "--weights-gib", "nan"], "--weights-gib must be a finite number"),
        (["--gpu-gib", "80", "--weights-gib", "inf"], "--weights-gib must be a finite number"),
        (["--gpu-gib", "80", "--activation-gib", "nan"], "--activation-gib must be a finite"),
        (["--gpu-gib", "80", "--activation-gib", "inf"], "--activation-gib must be a finite"),
        (["--gpu-gib", "80", "--canvas-length", "0"], "--canvas-length must be at least 1"),
        (["--gpu-gib", "80", "--max-model-len", "0"], "--max-model-len must be at least 1"),
        (["--gpu-gib", "80", "--prompt-tokens", "0"], "--prompt-tokens must be at least 1"),
        (["--gpu-gib", "80", "--gpu-memory-utilization", "nan"], "gpu-memory-utilization"),
    ],
)
def test_bad_numbers_are_errors_not_tracebacks(command, flags, says):
    assert says in _error([*command, *flags])


def test_zero_max_canvas_and_empty_name_are_refused_not_defaulted(tmp_path: Path):
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"a": {"type": "noul", "instructions": "A?"}, "b": {"type": "noul"}}))
    assert "--max-canvas must be at least 1" in _error(
        ["size", "--gpu-gib", "80", "--questions", str(q), "--max-canvas", "0"]
    )
    assert "DNS label" in _error(["deploy", "kserve", "--gpu-gib", "80", "--name", ""])


def _config(tmp_path: Path, **text) -> Path:
    base = {"vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"text_config": {**base, **text}, "canvas_length": 128}))
    return path


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("num_attention_heads", 0, "num_attention_heads must be at least 1"),
        ("num_hidden_layers", 10**12, "num_hidden_layers = 1e+12 is not a real model's"),
        ("num_hidden_layers", 0, "num_hidden_layers must be at least 1"),
        ("hidden_size", -64, "hidden_size must be at least 1"),
        ("vocab_size", -512, "vocab_size must be at least 1"),
        ("num_key_value_heads", -2, "num_key_value_heads must be at least 1"),
        ("sliding_window", -5, "sliding_window must be at least 0"),
        ("head_dim", 2.5, "head_dim must be a whole number"),
        ("vocab_size", "512", "vocab_size must be a whole number"),
    ],
)
def test_bad_config_fields_are_errors(tmp_path: Path, field, value, says):
    path = _config(tmp_path, **{field: value})
    with pytest.raises(ConfigurationError, match=says.replace("+", r"\+")):
        ModelShape.from_config(path)
    out = _error(["size", "--gpu-gib", "80", "--model-config", str(path), "--weights-gib", "1"])
    assert says in out and "-0.00" not in out


@settings(max_examples=60, deadline=None)
@given(
    gpu=st.floats(allow_nan=True, allow_infinity=True),
    weights=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    activation=st.floats(allow_nan=True, allow_infinity=True),
    canvas=st.integers(-(10**30), 10**30),
    max_model_len=st.one_of(st.none(), st.integers(-(10**30), 10**30)),
)
def test_size_returns_a_plan_or_a_configuration_error(
    gpu, weights, activation, canvas, max_model_len
):
    try:
        plan = size(
            "fp8",
            gpu_gib=gpu,
            canvas_length=canvas,
            weights_gib=weights,
            activation_gib=activation,
            max_model_len=max_model_len,
        )
    except ConfigurationError:
        return
    assert plan.max_num_seqs >= 1 and all(t.bytes >= 0 for t in plan.terms)


# -- deploy kserve -o -------------------------------------------------------------------


def _kserve(*args: str) -> str:
    result = runner.invoke(app, ["deploy", "kserve", "--gpu-gib", "80", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def _check_folder(folder: Path, isvc_file: str) -> None:
    isvc = yaml.safe_load((folder / isvc_file).read_text())
    runtime = yaml.safe_load((folder / RUNTIME_FILE).read_text())
    assert isvc["kind"] == "InferenceService" and runtime["kind"] == "ServingRuntime"
    assert isvc["spec"]["predictor"]["model"]["runtime"] == runtime["metadata"]["name"]
    assert runtime["metadata"]["name"] == RUNTIME_NAME
    header = (folder / isvc_file).read_text()
    assert f"-f {isvc_file}" in header and f"-f {RUNTIME_FILE}" in header
    assert sorted(p.name for p in folder.iterdir()) == sorted([isvc_file, RUNTIME_FILE])


def test_output_to_a_new_folder_writes_both_manifests(tmp_path: Path):
    folder = tmp_path / "newdir"
    out = _kserve("-o", f"{folder}/")
    assert folder.is_dir() and not (tmp_path / "newdir").is_file()
    _check_folder(folder, "inferenceservice-diffusiongemma-fp8.yaml")
    assert "ServingRuntime" in out


def test_output_to_an_existing_folder_writes_both_manifests(tmp_path: Path):
    _kserve("-o", str(tmp_path), "--name", "triage")
    _check_folder(tmp_path, "inferenceservice-triage.yaml")


def test_an_edited_runtime_in_the_folder_is_kept(tmp_path: Path):
    (tmp_path / RUNTIME_FILE).write_text("# my edits\n")
    out = _kserve("-o", str(tmp_path))
    assert (tmp_path / RUNTIME_FILE).read_text() == "# my edits\n"
    assert "kept" in out


def test_output_to_a_file_names_that_file_and_the_runtime(tmp_path: Path):
    out_file = tmp_path / "isvc.yaml"
    out = _kserve("-o", str(out_file))
    text = out_file.read_text()
    assert "oc apply -n <namespace> -f isvc.yaml" in text
    assert f"oc apply -n <namespace> -f {RUNTIME_FILE}" in text
    assert "-o DIR/" in out  # says how to get the runtime too
    assert "error" in _error(
        ["deploy", "kserve", "--gpu-gib", "80", "-o", str(tmp_path / "no/x.y")]
    )


def test_the_printed_manifest_says_which_runtime_it_needs():
    text = _kserve()
    assert f"ServingRuntime {RUNTIME_NAME}" in text and RUNTIME_FILE in text


def test_the_runtime_ships_in_the_package_and_matches_the_repositorys():
    shipped = servingruntime_manifest()
    assert yaml.safe_load(shipped)["metadata"]["name"] == RUNTIME_NAME
    assert (ENGINE / "kserve" / RUNTIME_FILE).read_text() == shipped


def test_output_through_a_symlink_writes_its_target(tmp_path: Path):
    real = tmp_path / "real.yaml"
    real.write_text("old\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    _kserve("-o", str(link))
    assert link.is_symlink() and "InferenceService" in real.read_text()
