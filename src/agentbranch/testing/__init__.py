"""Test helpers: tiny, deterministic DiffusionGemma checkpoints and their Gemma-style
tokenizer, built from code in seconds (``checkpoint``, ``tokenizer``); ``FaultyReader``
(fault injection); ``FakeToolCallingModel`` (a scripted chat model ``create_agent`` can
bind tools to); ``assert_decision``/``assert_band`` (a failure prints the whole decision);
``check_store``, the evidence stores' conformance kit (docs/stores.md); ``smollm2()``, the
one real language model (SmolLM2-135M-Instruct)."""

from agentbranch.core.errors import ConfigurationError  # noqa: F401 - importable here before
from agentbranch.core.reads import LabelRead  # noqa: F401
from agentbranch.engine.readers.base import Reader, WrappingReader  # noqa: F401
from agentbranch.engine.readers.smollm2 import smollm2
from agentbranch.testing.assertions import assert_band, assert_decision, describe_decision
from agentbranch.testing.chat_models import FakeToolCallingModel
from agentbranch.testing.checkpoint import build_tiny_diffusiongemma, tiny_diffusiongemma
from agentbranch.testing.faults import FaultyReader
from agentbranch.testing.stores import check_store
from agentbranch.testing.tokenizer import (
    NEWLINE_ID,
    SPECIAL_TOKEN_IDS,
    build_tiny_tokenizer,
    tiny_chat_template,
)

__all__ = [
    "FakeToolCallingModel",
    "FaultyReader",
    "assert_band",
    "assert_decision",
    "check_store",
    "describe_decision",
    "SPECIAL_TOKEN_IDS",
    "NEWLINE_ID",
    "build_tiny_tokenizer",
    "build_tiny_diffusiongemma",
    "tiny_diffusiongemma",
    "tiny_chat_template",
    "smollm2",
]
