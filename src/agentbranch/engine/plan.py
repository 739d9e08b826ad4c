"""Question expansion: one user question → the question reads that answer it.

* **Chunks.** A choice with more options than one read's label set (26 letters, or the
  reader's ``max_options``) is split into balanced chunks, each read as its own question
  in the same batch. Each option's score is its label's full-vocabulary probability in
  the read that showed it; the answer is those scores renormalised over all options.
* **Permutations** (debiasing). With ``permutations=P`` a choice is also read in ``P``
  cyclic option orders; each option's score is its probability averaged over the
  orders, which cancels the model's preference for early letters.

Both happen in one batched read; ``combine`` folds the reads back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from agentbranch.engine.question_types import question_type
from agentbranch.engine.reads import LabelRead, QuestionSpec


@dataclass(frozen=True)
class Unit:
    """One question read and where its options sit in the user's question."""

    spec: QuestionSpec
    option_indices: tuple[int, ...]


@dataclass(frozen=True)
class Combined:
    """The folded read of one user question: scores over all its options."""

    scores: list[float]  # full-vocabulary probabilities, not normalised
    label_mass: float
    argmax_is_label: bool
    agreement: float


def _balanced(n: int, size: int) -> list[range]:
    count = -(-n // size)
    step, extra = divmod(n, count)
    bounds = [i * step + min(i, extra) for i in range(count + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


def expand(spec: QuestionSpec, *, max_options: int, permutations: int = 1) -> list[Unit]:
    """The reads for ``spec`` (whose ``labels`` may be empty when it is too large)."""
    label_set = question_type(spec.type).label_set
    # Readers without label tokens (embedded, scripted) may take more options per read
    # than the label set has; those reads carry no labels.
    size = max_options
    chunks = _balanced(len(spec.options), size)
    orders = max(1, permutations) if spec.type == "choice" else 1
    units = []
    for chunk in chunks:
        idx = list(chunk)
        for p in range(orders if len(idx) > 1 else 1):
            shift = (p * len(idx)) // orders
            order = idx[shift:] + idx[:shift]
            units.append(
                Unit(
                    QuestionSpec(
                        id=spec.id,
                        type=spec.type,
                        instructions=spec.instructions,
                        options=tuple(spec.options[i] for i in order),
                        descriptions=tuple(spec.descriptions[i] for i in order),
                        labels=label_set[: len(order)] if len(order) <= len(label_set) else (),
                        examples=tuple(spec.examples[i] for i in order) if spec.examples else (),
                    ),
                    tuple(order),
                )
            )
    return units


def combine(n_options: int, units: Sequence[Unit], reads: Sequence[LabelRead]) -> Combined:
    """Fold unit reads into scores over the ``n_options`` options of the question."""
    total = [0.0] * n_options
    count = [0] * n_options
    for unit, read in zip(units, reads):
        for i, lp in zip(unit.option_indices, read.logprobs):
            total[i] += math.exp(lp) if lp > -math.inf else 0.0
            count[i] += 1
    return Combined(
        scores=[t / c if c else 0.0 for t, c in zip(total, count)],
        label_mass=sum(r.label_mass for r in reads) / len(reads),
        argmax_is_label=all(r.argmax_is_label for r in reads),
        agreement=sum(r.agreement for r in reads) / len(reads),
    )


def normalise(scores: Sequence[float], temperature: float = 1.0) -> list[float] | None:
    """``p_i ∝ score_i^(1/T)``; ``None`` when no option has any probability."""
    positive = [s for s in scores if s > 0]
    if not positive:
        return None
    logs = [math.log(s) / temperature if s > 0 else -math.inf for s in scores]
    top = max(logs)
    weights = [math.exp(x - top) if x > -math.inf else 0.0 for x in logs]
    z = sum(weights)
    return [w / z for w in weights]
