"""``VLLMReader``: structured reads through vLLM's offline ``LLM`` API, in process.

Two modes, chosen from the served model's config unless given:

* ``"diffusion"`` — DiffusionGemma: each read is one read-only request with ONE
  denoising step over a seeded canvas (``constrained`` and ``max_steps`` options).
* ``"next_token"`` — any causal model: the label is read at the reply's first token,
  as vLLM's ``/v1/systemone`` does.

One worker thread owns the ``LLM`` and adds every call's requests to vLLM's running
batch, so concurrent decisions share vLLM's steps. Build the reader in the main module
of a script under ``if __name__ == "__main__":`` — vLLM starts worker processes.

The package, one job per module:

* ``reader`` — ``VLLMReader``: options, planning, waiting for results, lifecycle.
* ``worker`` — the engine worker thread that owns the ``LLM`` and batches reads on it.
* ``requests`` — planned token reads to vLLM requests and ``SamplingParams``.
* ``outputs`` — vLLM's outputs back to per-slot label logprobs.
* ``diffusion`` / ``next_token`` — what each mode detects, plans and asks vLLM for.
* ``capacity`` — the start-up capacity warnings of a diffusion engine.
* ``llm`` — building, checking and shutting down the ``vllm.LLM``.

Importing this package imports neither vLLM nor torch; vLLM is imported when a reader
builds an ``LLM`` or sends requests.
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
