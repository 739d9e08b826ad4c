"""Length-aware batches for the embedded reader's forwards.

A forward pads every text of its batch to the batch's longest, and a padded token costs
what a real one does: one long review among 63 short states made each of them cost 256
tokens. So a read tokenises all its texts once, sorts them by token count across the
whole read (states, option texts and examples alike), and cuts the sorted texts into
batches of similar length, each at most ``max_count`` texts and ``max_tokens`` padded
tokens (a text longer than that is a batch of its own). The embeddings come back in
the caller's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def length_batches(lengths: Sequence[int], max_count: int, max_tokens: int) -> list[list[int]]:
    """Indices into ``lengths``, shortest first, cut into batches of at most
    ``max_count`` indices whose count × longest stays within ``max_tokens``."""
    if max_count < 1 or max_tokens < 1:
        raise ValueError("length_batches needs max_count >= 1 and max_tokens >= 1")
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:
        # Ascending order: text i is the longest of the batch it joins.
        if batch and (len(batch) >= max_count or (len(batch) + 1) * lengths[i] > max_tokens):
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    return batches


def pad_values(tokenizer: Any) -> dict[str, int]:
    """The padding value of each of ``tokenizer``'s keys (``padded``; others pad with 0)."""
    return {"input_ids": tokenizer.pad_token_id, "token_type_ids": tokenizer.pad_token_type_id}


def padded(
    encoding: Mapping[str, Sequence[Sequence[int]]],
    rows: Sequence[int],
    pad_values: Mapping[str, int],
) -> dict[str, Any]:
    """The tokenizer's (unpadded) ``encoding`` of ``rows``, right-padded to their
    longest, as ``(len(rows), longest)`` long tensors under the tokenizer's own keys and
    in its order (the traced embedding runs only on the keys it was traced with).
    ``pad_values``: the padding value of each key (0 when absent)."""
    import torch

    ids = encoding["input_ids"]
    width = max(len(ids[i]) for i in rows)
    out = {}
    for key, values in encoding.items():
        pad = pad_values.get(key, 0)
        out[key] = torch.tensor(
            [list(values[i]) + [pad] * (width - len(values[i])) for i in rows], dtype=torch.long
        )
    return out
