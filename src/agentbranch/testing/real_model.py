"""``smollm2()`` for tests: the runtime helper ``agentbranch.engine.readers.smollm2``
(SmolLM2-135M-Instruct from the package index, converted once into a cache), importable
here as before."""

from agentbranch.engine.readers.smollm2 import (
    SMOLLM2_PACKAGE,
    SMOLLM2_SHA256,
    convert_gguf,
    smollm2,
    smollm2_cache_dir,
)

__all__ = ["SMOLLM2_PACKAGE", "SMOLLM2_SHA256", "convert_gguf", "smollm2", "smollm2_cache_dir"]
