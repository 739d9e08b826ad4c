"""The vLLM requests and ``SamplingParams`` of planned token reads.

A read whose label ids are more than ``logprob_token_ids`` holds is sent as several
requests with the same prompt and canvas (a seeded one-step read is deterministic, and
prefix caching prefills the prompt once); a constrained read cannot be split (its
normalisation would change) and is refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.reads import TokenRead
from agentbranch.engine.readers.vllm.diffusion import diffusion_extra_args

if TYPE_CHECKING:
    from vllm import SamplingParams

__all__ = [
    "MAX_LOGPROB_TOKEN_IDS",
    "EngineRequest",
    "Mode",
    "engine_requests",
    "sampling_params",
]

Mode = Literal["diffusion", "next_token"]
#: vLLM's cap on ``SamplingParams.logprob_token_ids`` (``vllm.sampling_params``).
MAX_LOGPROB_TOKEN_IDS = 128


@dataclass(frozen=True)
class EngineRequest:
    """One vLLM request: which token read it serves and which label ids it asks for."""

    read_index: int
    prompt_ids: list[int]
    label_ids: list[int]
    max_tokens: int
    extra_args: dict[str, Any] | None = None
    temperature: float | None = None


def engine_requests(
    reads: Sequence[TokenRead],
    *,
    mode: Mode,
    constrained: bool = False,
    max_steps: int = 1,
    max_ids: int = MAX_LOGPROB_TOKEN_IDS,
) -> list[EngineRequest]:
    """The vLLM requests for ``reads`` (several per read when its label ids exceed
    ``max_ids``)."""
    out: list[EngineRequest] = []
    for index, read in enumerate(reads):
        # The ids in vLLM's order: a single slot's labels in label order
        # (``NextTokenStrategy``/single canvas reads), a joint canvas's sorted (``read_joint``).
        if len(read.slots) == 1:
            ids = list(dict.fromkeys(i for group in read.slots[0].label_ids for i in group))
        else:
            ids = sorted({i for slot in read.slots for group in slot.label_ids for i in group})
        if not ids:
            raise ConfigurationError("a token read without label ids cannot be read")
        if constrained and len(ids) > max_ids:
            raise ConfigurationError(
                f"a constrained read normalises over its label ids, and this read has "
                f"{len(ids)} (vLLM allows {max_ids} per request, so it would be split). "
                "Use fewer questions per joint read or constrained=False."
            )
        shape: dict[str, Any]
        if mode == "diffusion":
            extra = diffusion_extra_args(read, constrained=constrained, max_steps=max_steps)
            shape = {"max_tokens": read.read_length, "extra_args": extra}
        else:  # the label at the reply's first token, greedy, as /v1/systemone reads
            shape = {"max_tokens": 1, "temperature": 0.0}
        out.extend(
            EngineRequest(index, list(read.prompt_ids), ids[start : start + max_ids], **shape)
            for start in range(0, len(ids), max_ids)
        )
    return out


def sampling_params(request: EngineRequest, *, engine: bool = False) -> SamplingParams:
    """The ``vllm.SamplingParams`` of one engine request (as vLLM's strategies build
    them). ``engine``: for ``LLMEngine.add_request``, without the deep copy
    (``skip_clone``) and the detokenizing a read does not need."""
    from vllm import SamplingParams

    kwargs: dict[str, Any] = {
        "max_tokens": request.max_tokens,
        "logprob_token_ids": list(request.label_ids),
    }
    if engine:
        kwargs["skip_clone"] = True
        kwargs["detokenize"] = False
    if request.temperature is not None:
        kwargs["temperature"] = request.temperature
    if request.extra_args is not None:
        kwargs["extra_args"] = json.loads(json.dumps(request.extra_args))
    return SamplingParams(**kwargs)
