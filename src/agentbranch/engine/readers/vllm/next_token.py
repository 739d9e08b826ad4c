"""The next-token path: a label read at the first token of a causal model's reply.

Any causal model (Qwen3, Llama ...) is read as vLLM's ``/v1/systemone`` reads it: the
``NextTokenPlanner`` builds the prompt as vLLM's ``NextTokenStrategy`` does, and the
label is read at the reply's first token with one greedy forward pass over the full
vocabulary::

    SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=label_ids)

(``constrained`` and ``max_steps`` are diffusion options; a next-token reader refuses
them.)
"""

from __future__ import annotations

from typing import Any

from agentbranch.engine.canvas import NextTokenPlanner

__all__ = ["NEXT_TOKEN_MAX_TOKENS", "NEXT_TOKEN_TEMPERATURE", "next_token_planner"]

#: A next-token read generates one token: the reply's first.
NEXT_TOKEN_MAX_TOKENS = 1
#: Greedy, as ``/v1/systemone`` reads.
NEXT_TOKEN_TEMPERATURE = 0.0


def next_token_planner(tokenizer: Any, **prompt: Any) -> NextTokenPlanner:
    """The ``NextTokenPlanner`` for the served model; ``prompt``: its prompt settings
    (``max_model_len``, ``chat_template``, ``special_tokens``, ``template_kwargs``)."""
    return NextTokenPlanner(tokenizer, **prompt)
