"""What the embedder compares a state with, per option: the hypothesis text (an option's
description, or its name read as words), its examples, and whether a question gives it
anything to read at all (``missing_signal``)."""

from __future__ import annotations

import re

from agentbranch.core.reads import QuestionSpec

__all__ = ["described", "hypothesis_texts", "missing_signal", "option_examples", "option_texts"]

#: Word boundaries inside an identifier: ``AddToPlaylist``, ``getWeather``, ``URLCheck``.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _readable(name: str) -> str:
    """An option name as words (``add_to_playlist``, ``AddToPlaylist``, ``add-to-playlist``
    → ``add to playlist``): the embedder is uncased, so ``AddToPlaylist`` would read as
    one unknown word."""
    words = _CAMEL.sub(" ", name).replace("_", " ").replace("-", " ")
    return " ".join(words.split()) or name


def hypothesis_texts(q: QuestionSpec) -> list[str | None]:
    """The description text that stands for each option of ``q`` (``None``: none).

    Yes/no: the ``yes``/``no`` descriptions only; the question's instructions are not
    used (a question text attracts every state on its topic, whatever the answer)."""
    if q.type == "noul":
        yes_desc, no_desc = (q.descriptions + (None, None))[:2]
        return [yes_desc if option == "yes" else no_desc for option in q.options]
    if q.type == "score":
        return [_readable(o) for o in q.options]
    return [
        f"{_readable(o)}: {d}" if d else _readable(o) for o, d in zip(q.options, q.descriptions)
    ]


def option_examples(q: QuestionSpec) -> list[tuple[str, ...]]:
    """Each option's example texts (empty tuples when the question has none)."""
    return list(q.examples) if q.examples else [() for _ in q.options]


def option_texts(q: QuestionSpec) -> list[str]:
    """Every text ``q``'s options are compared with: descriptions, then examples."""
    return [t for t in hypothesis_texts(q) if t] + [e for ex in option_examples(q) for e in ex]


def missing_signal(q: QuestionSpec) -> str | None:
    """Why the embedder has nothing to read ``q`` by (``None``: it has something).

    Found from the question alone; a yes/no whose two descriptions embed alike is
    caught at read time (``EmbeddedReader``)."""
    examples = option_examples(q)
    if q.type == "noul":
        texts = hypothesis_texts(q)
        bare = [o for o, t, e in zip(q.options, texts, examples) if not t and not e]
        if bare:
            return (
                f"yes/no question {q.id!r} does not describe {' or '.join(bare)!s}: a "
                "sentence embedder cannot answer a bare question (it would follow the "
                "topic, not the answer). Describe both answers (yes_no(..., yes='...', "
                "no='...')) or give examples={'yes': [...], 'no': [...]}"
            )
    if q.type == "score":
        bare = [o for o, e in zip(q.options, examples) if not e and len(_readable(o).split()) < 3]
        if bare:
            return (
                f"score question {q.id!r} has bare-word levels {bare}: one or two words "
                "say too little for a sentence embedder. Describe each level as a "
                "situation ('calm, polite message') or give examples={level: [...]}"
            )
    return None


def described(q: QuestionSpec) -> list[bool]:
    """Which options have a description of their own (not just their name read as
    words): a yes/no answer's ``yes=``/``no=`` text, a choice option's description."""
    if q.type == "noul":
        return [t is not None for t in hypothesis_texts(q)]
    if q.type == "choice":
        return [d is not None for d in q.descriptions]
    return [False] * len(q.options)
