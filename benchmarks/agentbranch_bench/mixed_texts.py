"""Texts of the lengths real traffic has, made deterministically (no download): short
uniform tickets, a mixed set (median about 36 tokens, a few past 256, as user reviews
or chat turns are), and long texts.

Each text is sentences drawn with a fixed seed from a pool of support and review
sentences until it reaches a length drawn from a log-normal distribution; every text
ends with its own number, so no two are equal (nothing is de-duplicated or cached)."""

from __future__ import annotations

import math
import random

from agentbranch_bench.workload import THREAD, TICKETS

__all__ = ["TEXT_SETS", "long_texts", "mixed_texts", "short_texts"]

#: Sentences texts are made of (support tickets, a billing thread, reviews).
SENTENCES = [
    *TICKETS,
    *(line.split(": ", 1)[-1] for line in THREAD.replace("\n", " ").split(". ")),
    "The film drags in the middle but the last half hour is worth the wait.",
    "I expected more from the director after his last two movies.",
    "The acting is wooden and the dialogue sounds like it was written by a committee.",
    "A quiet, beautiful story about a family that never says what it means.",
    "Honestly the best thing about it was the soundtrack.",
    "My kids loved it, I fell asleep twice.",
    "The plot twist was obvious from the first scene, which spoiled the whole thing.",
    "It is a shame the studio cut twenty minutes, you can feel the gaps.",
    "Delivery was late again and nobody answered the phone when I called.",
    "The new update moved every button and now I cannot find the export menu.",
    "Support told me to reinstall the app, which deleted all my saved drafts.",
    "Thanks for the quick fix yesterday, everything works as expected now.",
    "We would like to upgrade twenty seats to the enterprise plan next month.",
    "The invoice PDF is blank when opened on a phone.",
    "Is there a way to share a dashboard with someone outside our company?",
    "The sync between the desktop and the mobile app loses comments.",
]

#: Median length of the mixed set, in words before the sentence that reaches it (~36 MiniLM tokens).
MIXED_MEDIAN_WORDS = 20
#: Spread of the mixed set's log-normal lengths: about 1.5% of its texts pass 256 tokens.
MIXED_SIGMA = 1.0


def _text(rng: random.Random, words: int, i: int) -> str:
    out: list[str] = []
    n = 0
    while n < words:
        sentence = rng.choice(SENTENCES)
        out.append(sentence)
        n += len(sentence.split())
    return " ".join(out) + f" (#{i})"


def short_texts(n: int) -> list[str]:
    """``n`` one-sentence tickets (about 15 tokens each)."""
    return [f"{TICKETS[i % len(TICKETS)]} (#{i})" for i in range(n)]


def mixed_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` texts of log-normal length: median about 36 tokens, a few past 256."""
    rng = random.Random(seed)
    return [
        _text(rng, max(3, round(rng.lognormvariate(math.log(MIXED_MEDIAN_WORDS), MIXED_SIGMA))), i)
        for i in range(n)
    ]


def long_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` texts of 180 to 260 words (about 230 to 330 tokens: most are cut at 256)."""
    rng = random.Random(seed)
    return [_text(rng, rng.randint(180, 260), i) for i in range(n)]


#: The text sets the encoder benchmark compares on.
TEXT_SETS = {"short": short_texts, "mixed": mixed_texts, "long": long_texts}
