"""Capacity warning glue: what the sizing formula says about a diffusion engine's settings.

At start-up a diffusion ``VLLMReader`` hands the ``LLM``'s ``vllm_config`` to
``agentbranch.engine.capacity.check.engine_capacity_warnings`` and logs each warning on the
``agentbranch.vllm`` logger (``max_num_seqs`` canvases that cannot fit a denoising step,
or a GPU mostly left unused). The sizing module is imported only then.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["warn_capacity"]

log = logging.getLogger("agentbranch.vllm")


def warn_capacity(vllm_config: Any, canvas: int, vocab_size: int) -> None:
    """Log (WARNING) settings the sizing formula says cannot hold ``max_num_seqs``
    canvases, or leave most of the GPU unused (``agentbranch.engine.capacity.check``)."""
    from agentbranch.engine.capacity.check import engine_capacity_warnings

    for message in engine_capacity_warnings(vllm_config, canvas, vocab_size):
        log.warning("%s", message)
