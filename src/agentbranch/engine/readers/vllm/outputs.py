"""Folding vLLM's outputs (per output position, the logprobs of the label ids asked for)
back into reads' label logprobs per slot; a missing position or label id is a
``ReaderError``, never a guess."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from agentbranch.core.errors import ReaderError
from agentbranch.core.reads import SlotLogprobs, TokenRead
from agentbranch.engine.readers.vllm.requests import EngineRequest

__all__ = ["fold_outputs", "slot_reads"]


def slot_reads(
    read: TokenRead,
    logprobs_by_id: Sequence[Mapping[int, float]],
    token_ids: Sequence[int],
) -> list[SlotLogprobs]:
    """Fold a read's output into ``SlotLogprobs``: ``logprobs_by_id[p]`` maps label id
    → logprob at output position ``p`` (merged over the read's split requests),
    ``token_ids`` are the output's tokens (the argmax canvas, or the greedy token)."""
    out = []
    for slot in read.slots:
        pos = slot.position
        if pos >= len(logprobs_by_id):
            raise ReaderError(
                f"vLLM returned logprobs for {len(logprobs_by_id)} positions; the slot at "
                f"{pos} is missing (max_tokens too small?)"
            )
        at = logprobs_by_id[pos]
        ids = list(dict.fromkeys(i for group in slot.label_ids for i in group))
        missing = [i for i in ids if i not in at]
        if missing:
            raise ReaderError(
                f"vLLM returned no logprob for label token(s) {missing}; are they outside "
                "the model's vocabulary?"
            )
        out.append(
            SlotLogprobs(
                logprobs=tuple(max(at[i] for i in group) for group in slot.label_ids),
                label_mass=sum(math.exp(at[i]) for i in ids),
                argmax_is_label=len(token_ids) > pos and token_ids[pos] in ids,
            )
        )
    return out


def fold_outputs(
    reads: Sequence[TokenRead], requests: Sequence[EngineRequest], outputs: Sequence[Any]
) -> list[list[SlotLogprobs]]:
    """Each read's ``SlotLogprobs`` from its requests' outputs (``vllm.RequestOutput``,
    one per request, in order), merging split requests."""
    merged: list[list[dict[int, float]]] = [[] for _ in reads]
    tokens: list[list[int]] = [[] for _ in reads]
    for request, output in zip(requests, outputs):
        if not output.outputs:
            raise ReaderError("vLLM returned a request without output")
        completion = output.outputs[0]
        if completion.finish_reason == "error":
            raise ReaderError("vLLM reported a generation error for a read")
        if not completion.logprobs:
            raise ReaderError(
                "vLLM returned no logprobs; the LLM must allow logprob_token_ids (vLLM >= 0.31)"
            )
        positions = merged[request.read_index]
        for p, at in enumerate(completion.logprobs):
            if p >= len(positions):
                positions.append({})
            positions[p].update((i, float(at[i].logprob)) for i in request.label_ids if i in at)
        tokens[request.read_index] = list(completion.token_ids)
    return [slot_reads(r, merged[i], tokens[i]) for i, r in enumerate(reads)]
