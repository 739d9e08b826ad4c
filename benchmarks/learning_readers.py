"""The reads ``learning.py`` streams: each question's states embedded once, the written
question's read of every state, and the learners that fit a new version of the read
from labelled states (``examples``: the library's learned examples on the embedded
reader; ``head``: the shipped logistic head on the embeddings, with its out-of-fold
confidence map, a temperature and a shift per option; ``head_temperature``: the same
head with the temperature alone; ``head_t1``: without a map)."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import embedded_calibration as ec
import numpy as np

from agentbranch.core.questions import to_spec
from agentbranch.core.reads import QuestionSpec
from agentbranch.engine.readers import embedded as emb
from agentbranch.policy.earned.learn import examples as lx
from agentbranch.policy.earned.learn import head as lh


@dataclass
class Reads:
    """One version's read of every state of a question (by state index)."""

    conf: np.ndarray  # 1 - H/ln K
    pred: np.ndarray  # option index
    top: np.ndarray  # top probability

    @classmethod
    def of(cls, probs: np.ndarray) -> Reads:
        k = probs.shape[1]
        p = np.clip(probs, 1e-12, 1.0)
        h = -(probs * np.log(p)).sum(1)
        conf = np.clip(1.0 - h / math.log(k), 0.0, 1.0)
        return cls(conf, probs.argmax(1), probs.max(1))

    def take_order(self, order: np.ndarray) -> Reads:
        return Reads(self.conf[order], self.pred[order], self.top[order])

    take = take_order

    def accuracy(self, label: np.ndarray) -> float:
        return float((self.pred == label).mean())


@dataclass
class Question:
    id: str
    spec: QuestionSpec
    texts: list[str]
    emb: np.ndarray  # (n, dim) L2-normalised
    label: np.ndarray  # true option index
    option_vecs: dict[str, np.ndarray]  # options' and written examples' embeddings
    base: Reads

    @property
    def vecs(self) -> dict[str, Any]:
        """text -> torch vector: options, written examples, states (built once)."""
        cached = self.__dict__.get("_vecs")
        if cached is None:
            import torch

            cached = {t: torch.from_numpy(v) for t, v in self.option_vecs.items()}
            cached.update((t, torch.from_numpy(v)) for t, v in zip(self.texts, self.emb))
            self.__dict__["_vecs"] = cached
        return cached

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_vecs"}


_READER: emb.EmbeddedReader | None = None


def reader() -> emb.EmbeddedReader:
    global _READER
    if _READER is None:
        _READER = emb.EmbeddedReader().load()
    return _READER


def read_spec(q: Question, spec: QuestionSpec) -> Reads:
    """The embedded reader's read of every state of ``q`` asked ``spec`` (its own read
    path on the states' embeddings)."""
    import torch

    r = reader()
    answers = r._answers(torch.from_numpy(q.emb), spec, q.vecs)
    logp = np.array([a.logprobs for a in answers])
    p = np.exp(logp - logp.max(1, keepdims=True))
    return Reads.of(p / p.sum(1, keepdims=True))


def load_questions(sets: dict) -> dict[str, Question]:
    """Every question of ``sets`` on its set's held-out part (one embedding per text)."""
    r = reader()
    out: dict[str, Question] = {}
    start = time.perf_counter()
    for name, load in sets.items():
        fit, held = load()
        tasks = ec.tasks_for(name, fit, seed=ec.DRAWS[0])
        states = r.embed([i.text for i in held])
        specs = [to_spec(t.id, t.question) for t in tasks]  # type: ignore[arg-type]
        extra = sorted(
            {
                t
                for s in specs
                for t in [
                    *emb.hypothesis_texts(s),
                    *(e for ex in emb.option_examples(s) for e in ex),
                ]
                if t
            }
        )
        vecs = {t: v.copy() for t, v in zip(extra, r.embed(extra).numpy())}
        for task, spec in zip(tasks, specs):
            written = {e for ex in emb.option_examples(spec) for e in ex}
            rows, labels = [], []
            for k, item in enumerate(held):
                truth = task.truth(item)
                if truth is None or item.text[:600] in written:
                    continue
                rows.append(k)
                labels.append(spec.options.index(truth))
            texts = [held[k].text for k in rows]
            x = states[rows].numpy().copy()
            q = Question(task.id, spec, texts, x, np.array(labels), vecs, None)  # type: ignore[arg-type]
            q.base = read_spec(q, spec)
            out[task.id] = q
        print(f"read {name}: {len(held)} texts ({time.perf_counter() - start:.0f}s)")
    return out


def load_or_read(sets: dict, path: Any = None) -> dict[str, Question]:
    """``load_questions``, cached in ``path`` (a pickle this script wrote)."""
    import pickle

    if path is not None and path.is_file():
        cached = pickle.loads(path.read_bytes())
        if set(cached["sets"]) >= set(sets):
            return {k: q for k, q in cached["questions"].items() if k.split(".")[0] in sets}
    questions = load_questions(sets)
    if path is not None:
        path.write_bytes(pickle.dumps({"sets": list(sets), "questions": questions}))
    return questions


class ExamplesLearner:
    """A version = the question with its labelled states as examples (the library's)."""

    def __init__(self, per_option: int = lx.PER_OPTION) -> None:
        self.per_option = per_option

    def __repr__(self) -> str:
        return f"learned examples (at most {self.per_option} per option, spread)"

    def fit(self, q: Question, train: np.ndarray, y: np.ndarray) -> Reads:
        options = list(q.spec.options)
        written = {o: list(ex) for o, ex in zip(options, emb.option_examples(q.spec)) if ex}
        learned = lx.select(
            [q.texts[i] for i in train],
            [options[k] for k in y],
            options,
            vectors=q.emb[train],
            per_option=self.per_option,
            written=written,
        )
        examples = tuple(tuple(written.get(o, [])) + tuple(learned.get(o, [])) for o in options)
        return read_spec(q, dataclasses.replace(q.spec, examples=examples))


class HeadLearner:
    """A version = what ``Earned(learn=True)`` ships for the embedded reader: the
    question with a logistic head fitted on the embeddings of the labelled states
    (``agentbranch.policy.earned.learn.head.fit_head``), read by the reader's own head read;
    while fewer than two options are labelled, the learned examples instead."""

    def __init__(self, c: float = lh.C, calibrate: bool = True, shift: bool = True) -> None:
        self.c, self.calibrate, self.shift = c, calibrate, shift

    def __repr__(self) -> str:
        if not self.calibrate:
            return f"logistic on the embeddings (C={self.c}), no confidence map (temperature 1)"
        fitted = "temperature and per-option shift" if self.shift else "temperature alone"
        return (
            f"the {'shipped ' if self.shift else ''}learned head: logistic on the embeddings "
            f"(C={self.c}), its {fitted} fitted {lh.FOLDS}-fold out-of-fold on the same labels"
        )

    def fit(self, q: Question, train: np.ndarray, y: np.ndarray) -> Reads:
        options = list(q.spec.options)
        head = lh.fit_head(
            options,
            q.emb[train],
            [options[k] for k in y],
            c=self.c,
            calibrate=self.calibrate,
            shift=self.shift,
        )
        if head is None:
            return ExamplesLearner().fit(q, train, y)
        return read_spec(q, dataclasses.replace(q.spec, head=head))


LEARNERS = {
    "off": lambda: None,
    "examples": ExamplesLearner,
    "examples48": lambda: ExamplesLearner(48),
    "head": HeadLearner,
    "head_temperature": lambda: HeadLearner(shift=False),
    "head_t1": lambda: HeadLearner(calibrate=False),
}
