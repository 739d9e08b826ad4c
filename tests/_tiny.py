"""Shared pytest fixtures for tests that need the tiny DiffusionGemma checkpoint.

Import the ones you use into a test module (``tests/`` is on ``sys.path`` under pytest's
default import mode)::

    from _tiny import tiny_model_dir  # noqa: F401  (pytest fixture)

Each fixture builds its folder once per test session with ``agentbranch.testing``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbranch.testing import build_tiny_diffusiongemma, build_tiny_tokenizer


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random DiffusionGemma (hidden 64, 2 layers, 4 experts, vocab 512, canvas 64)
    with the tiny tokenizer (chat template without the thought block)."""
    return build_tiny_diffusiongemma(tmp_path_factory.mktemp("tiny-dg"))


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Only the tiny tokenizer (chat template stops after ``<|turn>model\\n``)."""
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tiny-tok"))


@pytest.fixture(scope="session")
def tiny_thought_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny tokenizer whose chat template appends ``<|channel>thought\\n<channel|>`` itself
    when thinking is off (like Gemma 4's mainline template)."""
    return build_tiny_tokenizer(
        tmp_path_factory.mktemp("tiny-tok-thought"), thought_in_template=True
    )
