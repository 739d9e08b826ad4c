"""LangChain's own standard tests (``langchain-tests``) on our LangChain faces.

* ``LocalChatModel``: ``ChatModelUnitTests`` and ``ChatModelIntegrationTests``, built from
  its parameters as the suites build every chat model (``LocalChatModel(model=<folder>,
  ...)``, loaded on first use), on the tiny DiffusionGemma (transformers' denoising
  schedule, streamed one block at a time) and on SmolLM2-135M-Instruct (real weights
  from the package index, streamed token by token). The capabilities are what
  docs/langchain.md says: text in and out, no tool calling, no structured output or JSON
  mode, no images, audio or PDFs, usage metadata on invoke and stream, no per-call model
  override. The suites skip only the tests of capabilities declared absent.
* The decision tool: ``ToolsUnitTests`` and ``ToolsIntegrationTests``.
* The cassette's chat cache: ``SyncCacheTestSuite`` and ``AsyncCacheTestSuite``.

The async tests run under pytest-asyncio's ``asyncio_mode = "auto"`` (pyproject.toml).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.caches import BaseCache
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import (
    AsyncCacheTestSuite,
    ChatModelIntegrationTests,
    SyncCacheTestSuite,
    ToolsIntegrationTests,
)
from langchain_tests.unit_tests import ChatModelUnitTests, ToolsUnitTests

import agentbranch as ab
from agentbranch.integrations.local_chat import LocalChatModel


@pytest.fixture(autouse=True)
def _seeded_torch():
    """The tiny model's canvases start from torch's RNG: one seed per test keeps a
    random-weight model's replies the same from run to run."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        yield


class _Declared:
    """The capabilities docs/langchain.md declares for ``LocalChatModel``."""

    @property
    def chat_model_class(self) -> type[LocalChatModel]:
        return LocalChatModel

    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_tool_choice(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False

    @property
    def supports_json_mode(self) -> bool:
        return False

    @property
    def supports_image_inputs(self) -> bool:
        return False

    @property
    def supports_image_urls(self) -> bool:
        return False

    @property
    def supports_pdf_inputs(self) -> bool:
        return False

    @property
    def supports_audio_inputs(self) -> bool:
        return False

    @property
    def supports_video_inputs(self) -> bool:
        return False

    @property
    def supports_image_tool_message(self) -> bool:
        return False

    @property
    def supports_pdf_tool_message(self) -> bool:
        return False

    @property
    def supports_anthropic_inputs(self) -> bool:
        return False

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def supports_model_override(self) -> bool:
        return False


def _tiny_folder() -> str:
    from agentbranch.testing import tiny_diffusiongemma

    return str(tiny_diffusiongemma())


class _Short:
    """The suites' standard parameters, with replies short enough for two CPU cores."""

    reply_tokens = 16

    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        return {**super().standard_chat_model_params, "max_tokens": self.reply_tokens}


class _Diffusion(_Short):
    """A diffusion model takes no temperature (its own schedule): the suites' standard
    temperature=0 is left unset, as docs/langchain.md says to."""

    reply_tokens = 64

    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        return {**super().standard_chat_model_params, "temperature": None}

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": _tiny_folder()}


class _SmolLM2(_Short):
    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": str(ab.smollm2())}


class TestTinyDiffusionGemmaUnit(_Declared, _Diffusion, ChatModelUnitTests):
    pass


class TestTinyDiffusionGemmaIntegration(_Declared, _Diffusion, ChatModelIntegrationTests):
    pass


class TestSmolLM2Unit(_Declared, _SmolLM2, ChatModelUnitTests):
    pass


class TestSmolLM2Integration(_Declared, _SmolLM2, ChatModelIntegrationTests):
    pass


def _decision_tool() -> BaseTool:
    engine = ab.DecisionEngine(reader=ab.ScriptedReader({"urgent": {"yes": 0.9, "no": 0.1}}))
    return ab.decision_tool(engine, {"urgent": ab.yes_no("Does this need an answer today?")})


class _DecisionToolParams:
    """What both of LangChain's tool suites are given: the decision tool and a call."""

    @property
    def tool_constructor(self) -> BaseTool:
        return _decision_tool()

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"text": "Production is down!"}


class TestDecisionToolUnit(_DecisionToolParams, ToolsUnitTests):
    pass


class TestDecisionToolIntegration(_DecisionToolParams, ToolsIntegrationTests):
    pass


class TestCassetteChatCache(SyncCacheTestSuite):
    @pytest.fixture
    def cache(self, tmp_path) -> BaseCache:
        return ab_cassette(tmp_path).chat_cache


class TestCassetteChatCacheAsync(AsyncCacheTestSuite):
    @pytest.fixture
    async def cache(self, tmp_path) -> BaseCache:
        return ab_cassette(tmp_path).chat_cache


def ab_cassette(tmp_path) -> Any:
    from agentbranch.replay import Cassette

    return Cassette(tmp_path / "chat.jsonl", mode="new")
