"""Helpers for the tests of learning on canvas readers (tests/test_learn_nearest.py,
tests/test_learn_replay.py): a scripted canvas reader that is sure of a state only when
the question shows it learned few-shot lines, a teacher, a deterministic fake encoder."""

from __future__ import annotations

import random
import re
import threading
import zlib
from typing import Any

import numpy as np
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import agentbranch as ab

SPORT = [
    "The striker scored twice as the home side won the league match",
    "She won the tennis final in three sets on the centre court",
    "The marathon runner broke the course record by a minute",
    "Their goalkeeper saved a penalty in the cup semi-final",
    "The cyclist took the yellow jersey after the mountain stage",
    "The rugby team lost the derby after a late try",
]
COOKING = [
    "Simmer the onions in butter until soft, then add the rice",
    "Knead the dough for ten minutes and let it rise overnight",
    "Roast the chicken with lemon and garlic for an hour",
    "Whisk the eggs with sugar until pale before folding in flour",
    "Season the soup with salt, pepper and a little fresh thyme",
    "Fry the garlic gently so it does not burn, then add tomatoes",
]
WRITTEN = {"yes": ["A football match report"], "no": ["A recipe for bread"]}
QUESTION = ab.yes_no("Is this about sport?", yes="news", no="text", examples=WRITTEN)
N_WRITTEN = sum(len(v) for v in WRITTEN.values())


def stream(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        yes = rng.random() < 0.5
        out.append((f"{rng.choice(SPORT if yes else COOKING)} (note {i})", "yes" if yes else "no"))
    return out


def truth_of(state: str) -> str:
    return "yes" if any(s in state for s in SPORT) else "no"


def canvas_script(state: str, q: Any) -> dict[str, float]:
    """Unsure (0.5/0.5) on the question as written; sure and right once it shows
    learned few-shot lines (more examples than the written ones)."""
    if sum(len(e) for e in q.examples) <= N_WRITTEN:
        return {"yes": 0.5, "no": 0.5}
    right = truth_of(state)
    return {o: (0.97 if o == right else 0.03) for o in q.options}


def canvas_reader() -> ab.ScriptedReader:
    return ab.ScriptedReader({"sport": canvas_script}, model="canvas")


class FakeEncoder:
    """Bag of hashed words, L2-normalised: texts sharing words are similar. Counts calls."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0
        self.texts: list[str] = []

    def __call__(self, texts: Any) -> np.ndarray:
        self.calls += 1
        self.texts.extend(texts)
        out = np.full((len(texts), self.dim), 1e-3)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                out[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class Teacher(BaseChatModel):
    """Answers the truth of the state in the prompt."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "teacher"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kw: Any) -> ChatResult:
        with _lock:
            self.calls += 1
        label = truth_of(str(messages[-1].content))
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(f'{{"label": "{label}"}}'))]
        )


_lock = threading.Lock()
