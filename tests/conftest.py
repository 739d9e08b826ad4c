"""Shared fixtures: tiny models are built from code at test time (no hub, no weights in git)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """A tiny random DiffusionGemma checkpoint + Gemma-style tokenizer (cached per run)."""
    from agentbranch.testing import tiny_diffusiongemma

    return tiny_diffusiongemma()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def tiny_thought_template_dir() -> Path:
    """The same model with Gemma 4's mainline template (writes the thought block)."""
    from agentbranch.testing import tiny_diffusiongemma

    return tiny_diffusiongemma(thought_in_template=True)


@pytest.fixture(autouse=True)
def _reset_structlog():
    """The CLI configures structlog (an application may); undo it after each test so a
    logger bound to a closed captured stream never leaks into the next test."""
    yield
    import structlog

    structlog.reset_defaults()


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Only the tiny tokenizer (chat template stops after ``<|turn>model\\n``)."""
    from agentbranch.testing import build_tiny_tokenizer

    return build_tiny_tokenizer(tmp_path_factory.mktemp("tiny-tok"))


@pytest.fixture(scope="session")
def tiny_thought_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny tokenizer whose template writes the thought block (Gemma 4 mainline)."""
    from agentbranch.testing import build_tiny_tokenizer

    return build_tiny_tokenizer(
        tmp_path_factory.mktemp("tiny-tok-thought"), thought_in_template=True
    )
