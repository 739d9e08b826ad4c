"""Test helpers: tiny, deterministic DiffusionGemma checkpoints for tests and benchmarks
(docs/design.md), ``FaultyReader`` (fault injection) and ``FakeToolCallingModel`` (a
scripted chat model that ``create_agent`` can bind tools to). Built from code in
seconds, with no model hub::

    folder = build_tiny_diffusiongemma(tmp_path / "tiny")      # hidden 64, 2 layers, 4 experts
    folder = tiny_diffusiongemma()                             # cached in the temp dir by args

* ``tokenizer``: the Gemma-style tokenizer; ``checkpoint``: the model folder
* ``faults``: the faulty reader; ``chat_models``: the fake chat model
* ``real_model``: ``smollm2()``, the one real language model (SmolLM2-135M-Instruct)
* ``assertions``: ``assert_decision``/``assert_band`` for decision tests (a failure
  prints the whole distribution, entropy, band and what decided)
* ``stores``: ``check_store``, the conformance kit of evidence stores (docs/stores.md)
"""

from agentbranch.core.errors import ConfigurationError  # noqa: F401 - importable here before
from agentbranch.core.reads import LabelRead  # noqa: F401
from agentbranch.engine.readers.base import Reader, WrappingReader  # noqa: F401
from agentbranch.testing.assertions import assert_band, assert_decision, describe_decision
from agentbranch.testing.chat_models import FakeToolCallingModel
from agentbranch.testing.checkpoint import build_tiny_diffusiongemma, tiny_diffusiongemma
from agentbranch.testing.faults import FaultyReader
from agentbranch.testing.real_model import smollm2
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
