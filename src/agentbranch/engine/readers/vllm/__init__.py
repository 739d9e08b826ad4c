"""``VLLMReader``: structured reads through vLLM's offline ``LLM`` API, in process.
Importing this package imports neither vLLM nor torch.
"""

from __future__ import annotations

# ``x as x``: re-exported (benchmarks and the vLLM tier build requests with them), not
# in ``__all__``.
from agentbranch.engine.readers.vllm.diffusion import DIFFUSION_ARCHITECTURES
from agentbranch.engine.readers.vllm.reader import VLLMReader
from agentbranch.engine.readers.vllm.requests import MAX_LOGPROB_TOKEN_IDS
from agentbranch.engine.readers.vllm.requests import engine_requests as engine_requests
from agentbranch.engine.readers.vllm.requests import sampling_params as sampling_params

__all__ = ["DIFFUSION_ARCHITECTURES", "MAX_LOGPROB_TOKEN_IDS", "VLLMReader"]
