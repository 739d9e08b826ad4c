"""Helpers for the tests of ``Earned(learn=True)`` on the embedded reader
(tests/test_learn_loop.py, test_learn_gate.py, test_learn_stored_bets.py,
test_bench_learning.py): a yes/no question "is this about sport?", labelled streams of
sport and cooking sentences (``labelled_stream``: also _learn_canvas's and
_learn_store's), a teacher that knows each sentence's label, and a resolver that learns
at once (no background thread, one writer)."""

from __future__ import annotations

import random

from _lg_fixtures import LabelTeacher

import agentbranch as ab
from agentbranch.policy import Earned, Generate, Policy, Resolver

SPORT = [
    "The striker scored twice as the home side won the league match",
    "She won the tennis final in three sets on the centre court",
    "The marathon runner broke the course record by a minute",
    "Their goalkeeper saved a penalty in the cup semi-final",
    "The cyclist took the yellow jersey after the mountain stage",
    "The rugby team lost the derby after a late try",
    "He swam the fastest 100 metres of the season at the trials",
    "The boxer kept his title with a knockout in the fifth round",
]
COOKING = [
    "Simmer the onions in butter until soft, then add the rice",
    "Knead the dough for ten minutes and let it rise overnight",
    "Roast the chicken with lemon and garlic for an hour",
    "Whisk the eggs with sugar until pale before folding in flour",
    "Season the soup with salt, pepper and a little fresh thyme",
    "Fry the garlic gently so it does not burn, then add tomatoes",
    "Bake the cake at 180 degrees until a skewer comes out clean",
    "Chop the herbs finely and stir them into the warm sauce",
]
QUESTION = ab.yes_no("Is this about sport?", yes="news", no="text")


def labelled_stream(
    n: int,
    seed: int,
    yes: list[str],
    no: list[str],
    *,
    tag: str = "note",
    start: int = 0,
) -> list[tuple[str, str]]:
    """``n`` distinct states ``"<a sentence> (<tag> i)"`` with their labels: ``yes`` for
    a sentence drawn from ``yes``, else ``no`` (a fair coin per state, seeded)."""
    rng = random.Random(seed)
    out = []
    for i in range(start, start + n):
        is_yes = rng.random() < 0.5
        base = rng.choice(yes if is_yes else no)
        out.append((f"{base} ({tag} {i})", "yes" if is_yes else "no"))
    return out


def stream(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` labelled sport ("yes") and cooking ("no") states."""
    return labelled_stream(n, seed, SPORT, COOKING)


class Teacher(LabelTeacher):
    """Answers the truth of the state named in the prompt."""

    llm_type = "teacher"
    truth: dict[str, str]

    def label_of(self, text: str) -> str:
        return next(y for s, y in self.truth.items() if s in text)


def learning_resolver(engine: ab.DecisionEngine, earned: Earned, truth: dict[str, str]) -> Resolver:
    """A resolver of ``QUESTION`` whose teacher answers ``truth``; ``earned`` learns at
    once, as the only writer of its store."""
    earned.learner.background = False  # fit at once: deterministic for the test
    earned.learner.settle_s = 0  # one writer: no other replica's labels to wait for
    policy = Policy(take_at=earned, fallbacks=[Generate(Teacher(truth=truth))])
    return Resolver(engine, {"sport": QUESTION}, policy)
