"""The embedded reader's embedding (MiniLM, mean pooling, L2 normalisation), eager or as
a TorchScript trace, which runs without taking the GIL back between operations
(docs/design.md, "Why it is built this way"). The trace is used only once it gives the
eager embeddings on texts of another count and length than it was traced on (a trace
bakes in whatever Python decided at trace time); otherwise the reader stays eager.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "Embedding",
    "eager_embedding",
    "traced_embedding",
]

logger = logging.getLogger("agentbranch")

#: ``tokenizer output -> (n, dim) L2-normalised mean-pooled embeddings``.
Embedding = Callable[[Mapping[str, Any]], Any]


def eager_embedding(model: Any) -> Embedding:
    """The embedding computed by ``model`` step by step from Python."""
    module = _pooled(model)
    return lambda batch: module(**batch)


def traced_embedding(model: Any, tokenizer: Any, device: str) -> Embedding | None:
    """The embedding through a checked trace, or ``None`` when ``model`` cannot be
    traced faithfully (the reader then stays eager)."""
    import torch

    def tokens(texts: tuple[str, ...]) -> dict[str, Any]:
        return dict(tokenizer(list(texts), padding=True, return_tensors="pt").to(device))

    eager = _pooled(model)
    try:
        probe = tokens(("a b", "hello there"))
        with warnings.catch_warnings():
            # "Converting a tensor to a Python boolean might cause the trace to be
            # incorrect": the check below is what tells whether it is.
            warnings.simplefilter("ignore")
            with torch.no_grad():
                # check_trace=False: torch's own check traces it all again on the same
                # inputs (twice the cost); ours below reads other shapes.
                module = torch.jit.trace(
                    eager, example_kwarg_inputs=probe, strict=False, check_trace=False
                )
        keys = tuple(probe)

        def embedding(batch: Mapping[str, Any]) -> Any:
            if tuple(batch) != keys:  # another set of inputs: the eager module reads it
                return eager(**batch)
            return module(**batch)

        # Texts of another count and other lengths than the trace was made on.
        check = tokens(("one", "a longer sentence with quite a few more words in it", "x y z"))
        with torch.inference_mode():
            expected, got = eager(**check), embedding(check)
        if got.shape != expected.shape or float((got - expected).abs().max()) > 1e-5:
            logger.debug("embedded reader: the traced embedding differs from the model's")
            return None
    except Exception as e:  # noqa: BLE001 - any failure leaves the eager model in charge
        logger.debug("embedded reader: tracing the embedding failed (%s)", e)
        return None
    return embedding


def _pooled(model: Any) -> Any:
    """A module: ``model``'s last hidden states, mean-pooled over the attention mask
    and L2-normalised (the sentence-transformers MiniLM recipe)."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
            hidden = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=-1)

    return Pooled().eval()
