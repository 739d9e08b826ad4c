"""Helpers for the tests of learning on canvas readers (tests/test_learn_nearest.py,
tests/test_learn_replay.py): a scripted canvas reader that is sure of a state only when
the question shows it learned few-shot lines, a teacher, a deterministic fake encoder."""

from __future__ import annotations

import re
import zlib
from typing import Any

import _learn_fixtures as lf
import numpy as np
from _lg_fixtures import LabelTeacher

import agentbranch as ab

SPORT = lf.SPORT[:6]
COOKING = lf.COOKING[:6]
WRITTEN = {"yes": ["A football match report"], "no": ["A recipe for bread"]}
QUESTION = ab.yes_no("Is this about sport?", yes="news", no="text", examples=WRITTEN)
N_WRITTEN = sum(len(v) for v in WRITTEN.values())


def stream(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` labelled sport ("yes") and cooking ("no") states."""
    return lf.labelled_stream(n, seed, SPORT, COOKING)


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


class Teacher(LabelTeacher):
    """Answers the truth of the state in the prompt."""

    llm_type = "teacher"

    def label_of(self, text: str) -> str:
        return truth_of(text)
