"""Option scores from similarities: the description and example blend (``combine``),
each option's prototype, and the uniform answer when there is nothing to read."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from agentbranch.core.reads import LabelRead, QuestionSpec


def prototypes(examples: Sequence[Sequence[str]], vecs: dict[str, Any]) -> list[Any]:
    """Each option's prototype: the L2-normalised mean of its example embeddings
    (``None`` for an option without examples)."""
    import torch

    return [
        torch.nn.functional.normalize(torch.stack([vecs[e] for e in ex]).mean(0), dim=0)
        if ex
        else None
        for ex in examples
    ]


def uniform(q: QuestionSpec, reason: str) -> LabelRead:
    """Every option equally likely: the reader has nothing to read (``reason``)."""
    n = len(q.options)
    return LabelRead(
        logprobs=tuple([-math.log(n)] * n), extras={"no_signal": reason, "temperature": None}
    )


def combine(
    description: Sequence[float | None],
    examples: Sequence[Sequence[float]],
    top_k: int = 3,
    example_weight: float = 0.7,
    prototypes: Sequence[float | None] | None = None,
    prototype_weight: float = 0.75,
    described: Sequence[bool] | None = None,
    full_weight_examples: int = 1,
) -> list[float]:
    """Per option: its example score (``prototype_weight`` × its prototype similarity +
    the rest × the mean of its ``top_k`` best example similarities; the top-k mean alone
    without ``prototypes``), blended with its description similarity by
    ``example_weight`` (whichever it has, when only one). An option ``described`` by a
    text of its own with fewer than ``full_weight_examples`` examples blends them by
    that share of ``example_weight`` (few examples are a weaker sign than a
    description). An option with neither scores -1 (the lowest cosine)."""
    out = []
    protos = list(prototypes) if prototypes is not None else [None] * len(description)
    own = list(described) if described is not None else [False] * len(description)
    for d, ex, p, has_text in zip(description, examples, protos, own):
        if ex:
            best = sorted(ex, reverse=True)[:top_k]
            e = sum(best) / len(best)
            if p is not None:
                e = prototype_weight * p + (1 - prototype_weight) * e
            w = example_weight
            if has_text:
                w *= min(1.0, len(ex) / full_weight_examples)
            out.append(e if d is None else w * e + (1 - w) * d)
        else:
            out.append(d if d is not None else -1.0)
    return out
