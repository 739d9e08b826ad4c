"""Which labelled states a learned version shows as examples, and the question it reads.

A version without a head or pool is the question with its labelled states added after
its hand-written ``examples=`` (``with_learned``): per option a bounded, deterministic
choice (``select``), spread over the embedder's space when more than fit (``spread``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agentbranch.core.examples import MAX_EXAMPLES_PER_OPTION, Examples
from agentbranch.core.questions import Question, as_compiled

#: Learned examples per option (bounded: they are compared with, or rendered on, every read).
PER_OPTION = 32


def spread(vectors: Any, k: int) -> list[int]:
    """``k`` row indices of ``vectors`` (``(n, dim)``, L2-normalised) spread over the
    space: the row nearest the mean first, then each time the row farthest from those
    chosen (ties: the earliest). All rows when ``n <= k``."""
    x = np.asarray(vectors, dtype=float)
    n = len(x)
    if n <= k:
        return list(range(n))
    chosen = [int(np.argmax(x @ x.mean(0)))]
    nearest = x @ x[chosen[0]]  # similarity to the closest chosen row
    for _ in range(k - 1):
        nearest[chosen] = np.inf
        nxt = int(np.argmin(nearest))
        chosen.append(nxt)
        nearest = np.maximum(nearest, x @ x[nxt])
    return sorted(chosen)


def select(
    texts: Sequence[str],
    labels: Sequence[str],
    options: Sequence[str],
    vectors: Any = None,
    per_option: int = PER_OPTION,
    written: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, list[str]]:
    """The learned examples per option from labelled ``texts`` (in label order), less
    duplicates and the hand-written ``written``: at most ``per_option`` (and the room
    ``MAX_EXAMPLES_PER_OPTION`` leaves), ``spread`` by ``vectors``, else the most recent."""
    written = written or {}
    out: dict[str, list[str]] = {}
    for option in options:
        room = min(per_option, MAX_EXAMPLES_PER_OPTION - len(written.get(option, [])))
        seen = set(written.get(option, []))
        rows = []
        for i, (t, y) in enumerate(zip(texts, labels)):
            if y == option and t.strip() and t not in seen:
                seen.add(t)
                rows.append(i)
        if room <= 0 or not rows:
            continue
        if len(rows) > room and vectors is not None:
            rows = [rows[j] for j in spread([vectors[i] for i in rows], room)]
        out[option] = [texts[i] for i in rows[-room:]]  # (else the most recent)
    return out


def question_examples(question: Question) -> Examples:
    """The examples a question carries (``{}`` when none)."""
    return dict(as_compiled(question).examples or {})


def merged(written: Examples, learned: Mapping[str, Sequence[str]]) -> Examples:
    """``written`` examples with ``learned`` ones after them, per option (empty dropped)."""
    out = {o: list(v) for o, v in written.items()}
    for option, texts in learned.items():
        out.setdefault(option, []).extend(texts)
    return {o: v for o, v in out.items() if v}


def with_learned(question: Question, learned: dict[str, list[str]]) -> Question:
    """``question`` with ``learned`` examples after its own (a new question, so a new
    evidence key). ``question`` itself when nothing was learned."""
    if not any(learned.values()):
        return question
    return as_compiled(question).replace(examples=merged(question_examples(question), learned))


__all__ = [
    "PER_OPTION",
    "merged",
    "question_examples",
    "select",
    "spread",
    "with_learned",
]
