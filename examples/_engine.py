"""How the examples pick their engine: the reader is the only thing that changes.

* default: ``DecisionEngine.from_env()`` — vLLM with a real DiffusionGemma
  when ``AGENTBRANCH_VLLM_MODEL`` is set and a GPU is visible, a ``/v1/systemone`` server
  with ``AGENTBRANCH_REMOTE_URL``, else the embedded CPU reader;
* ``--tiny``: a tiny random DiffusionGemma built on the spot, read with HF transformers
  (answers are random; it shows the plumbing without a GPU or a download).
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

from agentbranch import DecisionEngine
from agentbranch.engine.batching import BatchingReader

# The tiny model's folder lives as long as the process and is removed at exit.
_TINY_DIRS: list[tempfile.TemporaryDirectory[str]] = []


def make_engine(argv: list[str] | None = None, **engine_kwargs: Any) -> DecisionEngine:
    argv = sys.argv[1:] if argv is None else argv
    if "--tiny" in argv:
        from agentbranch import TransformersReader
        from agentbranch.testing import build_tiny_diffusiongemma

        _TINY_DIRS.append(tempfile.TemporaryDirectory(prefix="agentbranch-tiny-"))
        folder = build_tiny_diffusiongemma(_TINY_DIRS[-1].name)
        reader = TransformersReader.from_pretrained(folder)
        return DecisionEngine(BatchingReader(reader), **engine_kwargs)
    engine = DecisionEngine.from_env(**engine_kwargs)
    print(f"engine: {engine.selection_reason}", file=sys.stderr)
    # Concurrent graph runs (graph.batch, Send fan-out) share one read.
    engine.reader = BatchingReader(engine.reader)
    return engine
