"""Whether a text holds anything to read.

A state whose text is empty, blank, punctuation, symbols (emoji) or chat-template markup
tokens only (``<turn|>``, ``<|im_end|>``, ``</s>``, ``[SEP]``) carries no evidence for
any answer: readers that can tell (the embedded reader) answer it uniformly, so a policy
falls back instead of taking an answer read from nothing. ``render_state`` renders
LangChain messages whose content is all like this as the empty text, so a message list
and the bare string read alike.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["has_readable_text"]

#: Chat-template markup: angle-bracket tokens without spaces (``<turn|>``, ``<|turn>``,
#: ``<|im_start|>``, ``</s>``, ``<end_of_turn>``) and BERT's bracket tokens. A URL or an
#: address in angle brackets (``<https://…>``, ``<a@b.c>``) is not markup: it has a
#: ``:``, ``.`` or ``@``.
_MARKUP = re.compile(r"<[A-Za-z0-9_|/-]{1,64}>|\[(?:CLS|SEP|PAD|MASK|UNK)\]")


def has_readable_text(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit outside markup tokens (see module doc).

    >>> [has_readable_text(t) for t in ["", " \\n", "?!", "🙂", "<turn|>", "ok?", "42"]]
    [False, False, False, False, False, True, True]
    """
    for ch in _MARKUP.sub(" ", text):
        if unicodedata.category(ch)[0] in "LN":
            return True
    return False
