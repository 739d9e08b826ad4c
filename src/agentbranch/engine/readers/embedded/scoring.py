"""Option scores from similarities: the description and example blend (``combine``),
each option's prototype, and the uniform answer when there is nothing to read."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentbranch.core.reads import LabelRead, QuestionSpec
from agentbranch.engine.readers.embedded.temperatures import log_softmax

__all__ = ["Comparisons", "combine", "head_reads", "label_read", "prototypes", "uniform"]


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


@dataclass(frozen=True)
class Comparisons:
    """Everything a state is compared with for one question, stacked into one matrix
    (one product per read instead of one per text: every small torch operation gives
    the GIL away and must win it back), and where each option's part sits in it."""

    #: ``(rows, dim)`` embeddings: descriptions, examples, prototypes (``None``: no row).
    matrix: Any
    #: Row of each option's description (``None``: it has none).
    descriptions: tuple[int | None, ...]
    #: Rows ``[start, end)`` of each option's examples.
    examples: tuple[tuple[int, int], ...]
    #: Row of each option's prototype (``None``: it has no examples).
    prototypes: tuple[int | None, ...]

    @classmethod
    def of(
        cls, texts: Sequence[str | None], examples: Sequence[Sequence[str]], vecs: dict[str, Any]
    ) -> Comparisons:
        """The comparisons of options described by ``texts`` (``hypothesis_texts``)
        with ``examples`` (``option_examples``), from their embeddings ``vecs``."""
        import torch

        rows: list[Any] = []

        def add(vec: Any) -> int:
            rows.append(vec)
            return len(rows) - 1

        described = tuple(add(vecs[t]) if t else None for t in texts)
        spans = []
        for ex in examples:
            start = len(rows)
            rows.extend(vecs[e] for e in ex)
            spans.append((start, len(rows)))
        protos = tuple(add(p) if p is not None else None for p in prototypes(examples, vecs))
        matrix = torch.stack(rows) if rows else None
        return cls(matrix, described, tuple(spans), protos)

    def similarities(self, states: Any) -> list[list[float]]:
        """Each state's (``(n, dim)`` embeddings) similarity with every row."""
        if self.matrix is None:
            return [[] for _ in range(len(states))]
        return (states @ self.matrix.T).tolist()

    def parts(
        self, sims: Sequence[float]
    ) -> tuple[list[float | None], list[list[float]], list[float | None]]:
        """One state's similarities (a row of ``similarities``) split per option: with
        its description, with each of its examples, with its prototype."""
        return (
            [sims[i] if i is not None else None for i in self.descriptions],
            [list(sims[a:b]) for a, b in self.examples],
            [sims[i] if i is not None else None for i in self.prototypes],
        )


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


def head_reads(q: QuestionSpec, states: Any, written: Any = None) -> list[LabelRead] | None:
    """The reads of ``q`` by its learned head (``QuestionSpec.head``) for ``states``
    (``(n, dim)`` embeddings), one matrix product for them all; a head that reads the
    question as written too (``LinearHead.written``) is given ``written``, the written
    read's option scores for the same states (``(n, len(q.options))``). ``None`` when
    ``q`` carries no head, or one that cannot read it (other options, another
    embedder's size, written scores it needs and does not have): then the question is
    read by similarity as written."""
    head = q.head
    if head is None or not head.reads(q.options) or states.shape[-1] != head.embedding_dim:
        return None
    x = states.detach().cpu().numpy()
    if head.written:
        if written is None or tuple(head.options) != tuple(q.options):
            return None
        import numpy as np

        with np.errstate(all="ignore"):  # (scores that are not finite read uniform)
            x = np.hstack([x, head.written * np.asarray(written, dtype=np.float64)])
    logp = head.log_probs(x, q.options)
    return [
        LabelRead(
            logprobs=tuple(row),
            extras={"source": "head", "head": head.digest, "calibrated": False},
        )
        for row in logp.tolist()
    ]


def label_read(scores: list[float], temperature: float, source: str) -> LabelRead:
    """The read of one question: the options' similarity ``scores`` at ``temperature``
    (``source``: where the temperature came from; fitted unless ``"explicit"``)."""
    return LabelRead(
        logprobs=tuple(log_softmax(scores, temperature)),
        label_mass=1.0,
        argmax_is_label=True,
        agreement=1.0,
        extras={
            "similarities": scores,
            "temperature": temperature,
            "source": source,
            # a fitted temperature (shipped, or leave-one-out on the examples)
            "calibrated": source != "explicit",
        },
    )
