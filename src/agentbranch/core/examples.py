"""Labelled examples on questions: ``examples={option: [texts...]}``.

Every question type takes example states per answer; a question with examples is a
``CompiledQuestion`` (``langchain_core``'s questions forbid extra fields). The embedded
reader compares the state with each option's examples; canvas readers render them as
few-shot lines (``instructions_with_examples``). This module checks and renders them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentbranch.core.errors import InvalidQuestionError

__all__ = [
    "MAX_EXAMPLES_PER_OPTION",
    "Examples",
    "check_examples",
    "instructions_with_examples",
]

#: At most this many examples per option (they are embedded or rendered on every read).
MAX_EXAMPLES_PER_OPTION = 50

Examples = dict[str, list[str]]


def check_examples(qid: str, options: Sequence[str], examples: Any) -> Examples:
    """``examples`` validated against ``options``: a mapping option → list of non-empty
    texts, every key an option. Raises ``InvalidQuestionError`` saying what to fix."""
    where = f"question {qid!r}: " if qid else ""
    if not isinstance(examples, Mapping):
        raise InvalidQuestionError(
            f"{where}examples must be a mapping option -> list of example texts, e.g. "
            f"{{{options[0]!r}: ['...', '...']}}; got {type(examples).__name__}"
        )
    out: Examples = {}
    for key, texts in examples.items():
        if key not in options:
            raise InvalidQuestionError(
                f"{where}examples name {key!r}, which is not an option; use one of {list(options)}"
            )
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise InvalidQuestionError(
                f"{where}examples[{key!r}] must be a list of texts, got {type(texts).__name__}"
            )
        if any(not isinstance(t, str) or not t.strip() for t in texts):
            raise InvalidQuestionError(f"{where}examples[{key!r}] must be non-empty strings")
        if len(texts) > MAX_EXAMPLES_PER_OPTION:
            raise InvalidQuestionError(
                f"{where}examples[{key!r}] has {len(texts)} texts; at most "
                f"{MAX_EXAMPLES_PER_OPTION} per option (pick the most typical ones)"
            )
        if texts:
            out[str(key)] = [str(t) for t in texts]
    if not out:
        raise InvalidQuestionError(f"{where}examples are empty; omit examples= instead")
    return out


def instructions_with_examples(instructions: str, options: Sequence[str], examples: Any) -> str:
    """The question's instructions followed by its examples as few-shot lines, which is
    how canvas readers show them (``"Where is my refund?" -> billing``, one a line after
    ``Examples:``). ``examples`` is ``QuestionSpec.examples``; without any the
    instructions are returned unchanged, so such reads stay identical to vLLM's own."""
    if not examples:
        return instructions
    lines = [
        '"' + " ".join(text.split()).replace('"', "'") + f'" -> {option}'
        for option, texts in zip(options, examples)
        for text in texts
    ]
    if not lines:
        return instructions
    head = f"{instructions}\n" if instructions else ""
    return head + "Examples:\n" + "\n".join(lines)
