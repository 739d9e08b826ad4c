"""Length-aware batches for the embedded reader's forwards: a forward pads every text
to its batch's longest, and a padded token costs what a real one does, so a read's texts
are sorted by token count and cut where the forwards cost least (``length_batches``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "forward_cost",
    "length_batches",
    "padded",
]

#: The cost model of a forward, in padded tokens: a fixed cost (the model's Python and
#: kernel launches, whatever its size) plus each padded token, whose cost grows with the
#: batch's length (attention compares every token with every other). Fitted to MiniLM's
#: forwards on CPU (1-64 texts of 8-256 tokens): time ≈ a + b·n·L + c·n·L² with a/b ≈ 60
#: tokens and b/c ≈ 360 tokens.
FORWARD_OVERHEAD_TOKENS = 64
ATTENTION_TOKENS = 384


def forward_cost(count: int, longest: int) -> float:
    """What a forward of ``count`` texts padded to ``longest`` tokens costs, in tokens."""
    return FORWARD_OVERHEAD_TOKENS + count * longest * (1 + longest / ATTENTION_TOKENS)


def length_batches(lengths: Sequence[int], max_count: int, max_tokens: int) -> list[list[int]]:
    """Indices into ``lengths``, shortest first, cut into batches of at most
    ``max_count`` indices whose count × longest stays within ``max_tokens``.

    Each batch costs ``forward_cost`` (its padded tokens, dearer when long, plus a
    forward's overhead), and the cuts minimise the sum (dynamic programming over the sorted
    lengths, ``O(len × max_count)``); a text longer than ``max_tokens`` is a batch of its
    own."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    sizes = [lengths[i] for i in order]
    n = len(sizes)
    best = [0.0] * (n + 1)  # best[j]: least cost of the first j sorted texts
    start = [0] * (n + 1)  # start[j]: where the last batch of that best cut begins
    for j in range(1, n + 1):
        longest = sizes[j - 1]  # sorted: the last text is the longest of any batch ending here
        per_text = longest * (1 + longest / ATTENTION_TOKENS)
        cost, cut = best[j - 1] + FORWARD_OVERHEAD_TOKENS + per_text, j - 1  # a batch of its own
        for i in range(j - 2, max(-1, j - 1 - max_count), -1):
            count = j - i
            if count * longest > max_tokens:
                break  # earlier starts only add texts
            c = best[i] + FORWARD_OVERHEAD_TOKENS + count * per_text
            if c <= cost:  # ties: the larger batch (fewer forwards)
                cost, cut = c, i
        best[j], start[j] = cost, cut
    batches: list[list[int]] = []
    j = n
    while j > 0:
        batches.append(order[start[j] : j])
        j = start[j]
    batches.reverse()
    return batches


def padded(
    encoding: Mapping[str, Sequence[Sequence[int]]], rows: Sequence[int], tokenizer: Any
) -> dict[str, Any]:
    """``tokenizer``'s (unpadded) ``encoding`` of ``rows``, right-padded to their
    longest with its pad ids (0 for keys it has none for), as ``(len(rows), longest)``
    long tensors under its own keys and in its order (the traced embedding runs only on
    the keys it was traced with)."""
    import torch

    ids = encoding["input_ids"]
    width = max(len(ids[i]) for i in rows)
    pads = {"input_ids": tokenizer.pad_token_id, "token_type_ids": tokenizer.pad_token_type_id}
    out = {}
    for key, values in encoding.items():
        pad = pads.get(key, 0)
        out[key] = torch.tensor(
            [list(values[i]) + [pad] * (width - len(values[i])) for i in rows], dtype=torch.long
        )
    return out
