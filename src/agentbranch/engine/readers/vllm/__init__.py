"""``VLLMReader``: structured reads through vLLM's offline ``LLM`` API, in process, in
mode ``"diffusion"`` (DiffusionGemma: one denoising step over a seeded canvas) or
``"next_token"`` (any causal model: the label at the reply's first token). Importing
this package imports neither vLLM nor torch.

* ``reader`` — ``VLLMReader``: options, planning, waiting for results, lifecycle.
* ``worker`` — the engine worker thread that owns the ``LLM`` and batches reads on it.
* ``requests`` — planned token reads to vLLM requests and ``SamplingParams``.
* ``outputs`` — vLLM's outputs back to per-slot label logprobs.
* ``diffusion`` / ``next_token`` — what each mode detects, plans and asks vLLM for.
* ``capacity`` — the start-up capacity warnings of a diffusion engine.
* ``llm`` — building, checking and shutting down the ``vllm.LLM``.
"""

from __future__ import annotations

# EngineRequest, Mode and the request helpers stay importable from here, as before the
# package split (benchmarks and the vLLM tier build requests with them); ``x as x``
# marks them re-exported without adding them to ``__all__`` (as before).
from agentbranch.engine.readers.vllm.diffusion import DIFFUSION_ARCHITECTURES
from agentbranch.engine.readers.vllm.outputs import slot_reads as slot_reads
from agentbranch.engine.readers.vllm.reader import VLLMReader
from agentbranch.engine.readers.vllm.requests import MAX_LOGPROB_TOKEN_IDS
from agentbranch.engine.readers.vllm.requests import EngineRequest as EngineRequest
from agentbranch.engine.readers.vllm.requests import Mode as Mode
from agentbranch.engine.readers.vllm.requests import engine_requests as engine_requests
from agentbranch.engine.readers.vllm.requests import label_id_order as label_id_order
from agentbranch.engine.readers.vllm.requests import sampling_params as sampling_params

__all__ = ["DIFFUSION_ARCHITECTURES", "MAX_LOGPROB_TOKEN_IDS", "VLLMReader"]
