"""Question types: each one's label set, reply instruction and prompt text.

The text matches vLLM's ``entrypoints/openai/decisions/question_types.py`` character
for character, so a read built here is the read vLLM's own decisions endpoint builds.
Adding a question type means adding one ``QuestionType`` to ``QUESTION_TYPES``.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from agentbranch.core.reads import QuestionSpec

__all__ = ["QUESTION_TYPES", "QuestionType", "question_type"]


@dataclass(frozen=True)
class QuestionType:
    """How one kind of question is labelled and asked."""

    name: str
    #: The labels of a question's options, in option order.
    label_set: tuple[str, ...]
    reply_instruction: str
    #: The most options this type allows (before label-set chunking); the fewest is 2.
    max_options: int = 255
    #: An option's line, with and without a description.
    described: str = "{label}: {option} - {description}"
    plain: str = "{label}: {option}"
    min_options: int = 2

    def body(self, q: QuestionSpec) -> str:
        """The labelled options and the reply instruction."""
        lines = [
            (self.described if description else self.plain).format(
                label=label, option=option, description=description
            )
            for label, option, description in zip(q.labels, q.options, q.descriptions)
        ]
        lines.append(self.reply_instruction)
        return "\n".join(lines)

    def prompt(self, q: QuestionSpec) -> str:
        """The question as the model reads it, after the state (single read)."""
        body = self.body(q)
        return f"Question: {q.instructions}\n{body}" if q.instructions else body

    def joint_prompt(self, number: int, q: QuestionSpec) -> str:
        """A numbered question in a joint read. The heading shows even without
        instructions so each answer line's number matches a question."""
        head = f"Question {number}:"
        if q.instructions:
            head = f"{head} {q.instructions}"
        return f"{head}\n{self.body(q)}"


_TYPES = (
    QuestionType(
        "choice", tuple(string.ascii_uppercase), "Answer with the letter of one option only."
    ),
    # Without the label in the prompt, models answer "Yes"/"No" instead.
    QuestionType(
        "noul",
        ("yes", "no"),
        "Answer with yes or no only.",
        max_options=2,
        described="{label}: {description}",
        plain="{label}",
    ),
    # 0-indexed like the answer, so a level's label is its score.
    QuestionType(
        "score",
        tuple(string.digits),
        "Answer with the number of one level only.",
        max_options=10,
        described="{label}: {option}",
    ),
)
QUESTION_TYPES: dict[str, QuestionType] = {t.name: t for t in _TYPES}


def question_type(name: str) -> QuestionType:
    """The registered type called ``name``."""
    return QUESTION_TYPES[name]
