"""DecisionEngine.from_env / select: vLLM on CUDA, then a remote server, else embedded."""

from __future__ import annotations

import sys
import types

import pytest

import agentbranch as ab
from agentbranch.engine import selection as sel

VLLM = {"AGENTBRANCH_VLLM_MODEL": "RedHatAI/diffusiongemma-26B-A4B-it-FP8-dynamic"}
REMOTE = {"AGENTBRANCH_REMOTE_URL": "http://engine:8000", "AGENTBRANCH_REMOTE_MODEL": "dg"}


def test_nothing_configured_picks_embedded_and_says_why():
    s = sel.select({}, cuda_available=False, vllm_importable=False)
    assert s.kind == "embedded"
    assert "AGENTBRANCH_VLLM_MODEL is not set" in s.reason
    assert "AGENTBRANCH_REMOTE_URL is not set" in s.reason


def test_vllm_needs_model_cuda_and_vllm():
    assert sel.select(VLLM, cuda_available=True, vllm_importable=True).kind == "vllm"
    no_cuda = sel.select(VLLM, cuda_available=False, vllm_importable=True)
    assert no_cuda.kind == "embedded" and "no CUDA device" in no_cuda.reason
    no_vllm = sel.select(VLLM, cuda_available=True, vllm_importable=False)
    assert no_vllm.kind == "embedded" and "vllm is not installed" in no_vllm.reason
    assert sel.select({}, cuda_available=True, vllm_importable=True).kind == "embedded"


def test_remote_when_configured_and_vllm_first_when_both():
    s = sel.select(REMOTE, cuda_available=False, vllm_importable=False)
    assert s.kind == "remote" and s.settings == {"base_url": "http://engine:8000", "model": "dg"}
    both = sel.select({**VLLM, **REMOTE}, cuda_available=True, vllm_importable=True)
    assert both.kind == "vllm"
    fallthrough = sel.select({**VLLM, **REMOTE}, cuda_available=False, vllm_importable=True)
    assert fallthrough.kind == "remote" and fallthrough.skipped


def test_forcing_an_engine():
    forced = {"AGENTBRANCH_ENGINE": "embedded", **REMOTE}
    assert sel.select(forced).kind == "embedded"
    with pytest.raises(ab.ConfigurationError, match="no CUDA"):
        sel.select(
            {"AGENTBRANCH_ENGINE": "vllm", **VLLM}, cuda_available=False, vllm_importable=True
        )
    with pytest.raises(ab.ConfigurationError, match="AGENTBRANCH_REMOTE_URL is not set"):
        sel.select({"AGENTBRANCH_ENGINE": "remote"})
    with pytest.raises(ab.ConfigurationError, match="not an engine"):
        sel.select({"AGENTBRANCH_ENGINE": "gpu"})


def test_from_env_builds_the_embedded_engine_with_calibration(tmp_path):
    path = ab.Calibration(by_type={"choice": 2.0}).save(tmp_path / "c.json")
    engine = ab.DecisionEngine.from_env({"AGENTBRANCH_CALIBRATION": str(path)}, permutations=2)
    reason = engine.selection_reason
    assert engine.reader.name == "embedded" and engine.permutations == 2
    assert engine.calibration.by_type == {"choice": 2.0}
    assert "embedded" in reason and str(path) in reason


def test_remote_reader_is_built_lazily(monkeypatch):
    made = {}

    class FakeRemote(ab.ScriptedReader):
        name = "remote"

        def __init__(self, base_url, **kwargs):
            super().__init__()
            made.update(base_url=base_url, **kwargs)

    module = types.ModuleType("agentbranch.engine.readers.remote")
    module.RemoteReader = FakeRemote
    monkeypatch.setitem(sys.modules, "agentbranch.engine.readers.remote", module)
    engine = ab.DecisionEngine.from_env(REMOTE)
    reason = engine.selection_reason
    assert engine.reader.name == "remote"
    assert made == {"base_url": "http://engine:8000", "model": "dg"}
    assert "http://engine:8000" in reason


def test_missing_reader_module_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "agentbranch.engine.readers.vllm", None)
    with pytest.raises(ab.ConfigurationError, match="vLLM reader could not be imported"):
        sel.build_reader(sel.Selection("vllm", "test", {"model": "m"}))


def test_vllm_reader_gets_the_model_or_a_preset(monkeypatch):
    made = []

    class FakeVLLM(ab.ScriptedReader):
        def __init__(self, llm=None, *, preset=None):
            super().__init__()
            made.append((llm, preset))

    module = types.ModuleType("agentbranch.engine.readers.vllm")
    module.VLLMReader = FakeVLLM
    monkeypatch.setitem(sys.modules, "agentbranch.engine.readers.vllm", module)
    sel.build_reader(sel.Selection("vllm", "t", {"model": "/models/dg"}))
    sel.build_reader(sel.Selection("vllm", "t", {"model": "fp8"}))
    assert made == [("/models/dg", None), (None, "fp8")]


def test_remote_api_key_is_passed_not_shown():
    s = sel.select({**REMOTE, "AGENTBRANCH_REMOTE_API_KEY": "sekret"})
    assert s.settings["api_key"] == "sekret"
    assert "sekret" not in s.reason


def test_settings_are_read_by_pydantic_settings_from_os_environ(monkeypatch):
    monkeypatch.setenv("AGENTBRANCH_REMOTE_URL", " http://env:9000 ")
    monkeypatch.setenv("agentbranch_remote_model", "dg")  # names are case-insensitive
    monkeypatch.setenv("AGENTBRANCH_VLLM_MODEL", "   ")  # blank counts as unset
    settings = sel.EngineSettings.from_env()
    assert settings.remote_url == "http://env:9000" and settings.remote_model == "dg"
    assert settings.vllm_model is None
    s = sel.select(cuda_available=True, vllm_importable=True)
    assert s.kind == "remote" and s.settings == {"base_url": "http://env:9000", "model": "dg"}
    # A mapping is read instead of os.environ, never mixed with it.
    assert sel.select({}, cuda_available=False, vllm_importable=False).kind == "embedded"


def test_api_key_is_a_secret_in_settings():
    settings = sel.EngineSettings.from_env({**REMOTE, "AGENTBRANCH_REMOTE_API_KEY": "sekret"})
    assert "sekret" not in repr(settings) and "sekret" not in str(settings.model_dump())


def test_selection_does_not_import_the_engine():
    """One-way imports: the engine imports selection, selection never the engine."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(sel))
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert not any(m and m.startswith("agentbranch.engine.engine") for m in imported)
    assert not any(
        m and m.startswith(("agentbranch.langgraph", "agentbranch.policy")) for m in imported
    )


SECRET_URL = "http://user:pw@engine:8000/?token=T0k"


def test_url_credentials_are_masked_in_the_reason_the_log_and_reprs(caplog):
    # Issue 22: `agentbranch engine` printed the password and the token.
    import logging

    env = {"AGENTBRANCH_REMOTE_URL": SECRET_URL}
    with_key = {**env, "AGENTBRANCH_REMOTE_API_KEY": "k3y"}
    s = sel.select(with_key, cuda_available=False, vllm_importable=False)
    assert s.settings["base_url"] == SECRET_URL  # the reader still gets them
    assert "http://***@engine:8000/?token=***" in s.reason
    settings = sel.EngineSettings.from_env(with_key)
    with caplog.at_level(logging.INFO, logger="agentbranch"):
        engine = ab.DecisionEngine.from_env(env)
    shown = [s.reason, repr(s), str(s), repr(settings), str(settings), engine.selection_reason]
    shown += [repr(engine.reader), engine.reader.url] + [r.getMessage() for r in caplog.records]
    for text in shown:
        for secret in ("pw", "T0k", "k3y"):
            assert secret not in text, text


def test_engine_command_masks_url_credentials():
    from typer.testing import CliRunner

    from agentbranch.cli import app

    env = {
        "AGENTBRANCH_ENGINE": "",
        "AGENTBRANCH_VLLM_MODEL": "",
        "AGENTBRANCH_REMOTE_URL": SECRET_URL,
        "AGENTBRANCH_CALIBRATION": "",
        "COLUMNS": "220",
    }
    for args in (["engine"], ["engine", "--load"]):
        result = CliRunner().invoke(app, args, env=env)
        assert result.exit_code == 0, (result.output, result.exception)
        assert "remote" in result.output and "engine:8000" in result.output
        assert "AGENTBRANCH_REMOTE_URL=http://***@engine:8000/?token=***" in result.output
        for secret in ("pw", "T0k"):
            assert secret not in result.output, result.output
