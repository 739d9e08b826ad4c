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
