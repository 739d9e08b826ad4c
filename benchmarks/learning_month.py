"""A month of labels: ``Earned(learn=True)`` streamed 100,000 labelled decisions, with
RSS and CPU per decision printed in blocks (they stay flat after warm-up: what a fit
reads is a bounded sample per option, ``agentbranch.policy.earned.learn.loop``).

The path users run, above the reader: a ``Resolver`` (what a decide node calls) with
``Earned(precision=0.9, learn=True, store=<JSON Lines file>)``, a ``Generate`` teacher
that knows the answers, ``Audit(rate=0.2)``, versions fitted on the learner's thread.
The reader is a ``ScriptedReader`` with an ``embed`` (``TopicReader``): each text's
embedding is a fixed vector of its topic plus noise, cached, so 100,000 decisions finish
in minutes on 2 shared cores; its read of the question as written is a noisy
similarity, and of a learned version the version's own logistic head applied to the
embedding and the written read's option scores (the real head,
``agentbranch.policy.earned.learn.head.fit_head``, fitted on the real sample). What is measured is the library's per-label cost: evidence, the version
ladder, trial reads, fits and the store, not a model.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/learning_month.py [--decisions 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import agentbranch as ab
from agentbranch.policy import Audit, Earned, Generate, Policy, Resolver

TOPICS = ["billing", "outage", "feature"]
QUESTION = ab.choice("Which team should handle this ticket?", TOPICS)
DIM = 64


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def ticket(i: int, rng: random.Random) -> tuple[str, str]:
    topic = rng.choice(TOPICS)
    return f"ticket {i}: a customer writes about {topic} ({rng.random():.6f})", topic


class TopicReader(ab.ScriptedReader):
    """A scripted reader with an embedder: topic vector plus noise per text (see the
    module doc); it reads a learned version with the version's head."""

    def __init__(self, seed: int = 0, noise: float = 1.6) -> None:
        super().__init__({"team": self._read})
        rng = np.random.default_rng(seed)
        self._centres = {t: rng.normal(size=DIM) for t in TOPICS}
        self._noise = noise
        self._cache: dict[str, np.ndarray] = {}

    def _vector(self, text: str) -> np.ndarray:
        v = self._cache.get(text)
        if v is None:
            topic = next(t for t in TOPICS if f"about {t}" in text)
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            v = self._centres[topic] + self._noise * rng.normal(size=DIM)
            v = v / np.linalg.norm(v)
            if len(self._cache) > 20_000:  # bounded: a cache, not a memory of the stream
                self._cache.clear()
            self._cache[text] = v
        return v

    def embed(self, texts: list[str]) -> Any:
        import torch

        return torch.from_numpy(np.stack([self._vector(t) for t in texts]))

    def written_scores(self, states: Any, q: Any) -> np.ndarray:
        """The written read's option scores (each state's similarity to each option's
        topic direction): what a learned head reads beside the embedding."""
        x = np.asarray(states, dtype=np.float64)
        return np.stack(
            [x @ (self._centres[o] / np.linalg.norm(self._centres[o])) for o in q.options], 1
        )

    def _read(self, state: str, q: Any) -> dict[str, float]:
        x = self._vector(state)
        if q.head is not None:
            if q.head.written:  # it reads the written scores beside the embedding
                scores = self.written_scores(x[None, :], q)[0]
                x = np.concatenate([x, q.head.written * scores])
            w, b = np.asarray(q.head.weights), np.asarray(q.head.bias)
            z = (w @ x + b) / q.head.temperature
            p = np.exp(z - z.max())
            p /= p.sum()
            return dict(zip(q.head.classes, p.tolist()))
        z = np.array([x @ (c / np.linalg.norm(c)) for c in self._centres.values()]) * 2.0
        p = np.exp(z - z.max())
        p /= p.sum()
        return dict(zip(TOPICS, p.tolist()))


class Teacher(BaseChatModel):
    """Answers the topic named in the prompt (the truth)."""

    @property
    def _llm_type(self) -> str:
        return "topic-teacher"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kw: Any) -> ChatResult:
        text = str(messages[-1].content)
        topic = next(t for t in TOPICS if f"about {t}" in text)
        reply = AIMessage(json.dumps({"label": topic}))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def run(
    decisions: int,
    store: Path,
    block: int = 10_000,
    background: bool = True,
    on_fit: Any = None,
    out: Any = print,
    per_option: int | None = None,
) -> tuple[list[dict[str, float]], Resolver]:
    """Stream ``decisions`` tickets; returns one row per ``block`` decisions and the
    resolver. ``on_fit``
    is called with what each fit reads (the labelled states); ``per_option``: the
    learner's bound per option (default the library's)."""
    earned = Earned(precision=0.9, level=0.95, store=str(store), learn=True)
    learner = earned.learner
    learner.background = background
    if per_option is not None:
        learner.fit_per_option = per_option
    if on_fit is not None:
        fit = learner._version

        def spy(q: Any, j: int, labelled: list) -> Any:
            on_fit(j, labelled)
            return fit(q, j, labelled)

        learner._version = spy
    audit = Audit(rate=0.2, seed=0)
    policy = Policy(take_at=earned, fallbacks=[Generate(Teacher())], audit=audit)
    reader = TopicReader()
    resolver = Resolver(ab.DecisionEngine(reader), {"team": QUESTION}, policy)
    rng = random.Random(0)
    rows = []
    taken = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i in range(decisions):
        text, _ = ticket(i, rng)
        rec = resolver.resolve(text)["team"]
        taken += rec["decided_by"] == "engine"
        if (i + 1) % block == 0:
            audit.flush()
            reader.calls.clear()  # (the scripted reader's log of its reads: not the library's)
            cpu, wall = time.process_time(), time.perf_counter()
            q = next(iter(learner._questions.values()))
            row = {
                "decisions": i + 1,
                "rss_mb": round(_rss_mb(), 1),
                "cpu_ms_per_decision": round((cpu - cpu0) / block * 1e3, 3),
                "wall_ms_per_decision": round((wall - wall0) / block * 1e3, 3),
                "taken_share": round(taken / block, 3),
                "labels": q.labels.count,
                "versions": len(q.ladder.rungs) - 1,
                "in_force": q.ladder.deciding.index,
                "fit_sample": q.labels.sampled,
                "digest_kib": round(q.labels.nbytes / 1024, 1),
                "store_mb": round(store.stat().st_size / 2**20, 1),
            }
            rows.append(row)
            out(
                f"{row['decisions']:>7} {row['rss_mb']:>8.1f} {row['cpu_ms_per_decision']:>8.3f} "
                f"{row['wall_ms_per_decision']:>8.3f} {row['taken_share']:>6.3f} "
                f"{row['labels']:>7} {row['versions']:>3} {row['in_force']:>3} "
                f"{row['fit_sample']:>6} {row['digest_kib']:>8.1f} {row['store_mb']:>8.1f}"
            )
            taken = 0
            cpu0, wall0 = cpu, wall
    audit.close()
    return rows, resolver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--block", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    print(
        f"{'decided':>7} {'RSS MB':>8} {'CPU ms':>8} {'wall ms':>8} {'taken':>6} "
        f"{'labels':>7} {'ver':>3} {'use':>3} {'sample':>6} {'dig KiB':>8} {'store MB':>8}"
    )
    fits: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rows, _ = run(
            args.decisions,
            Path(tmp) / "evidence.jsonl",
            block=args.block,
            on_fit=lambda j, labelled: fits.append((j, len(labelled))),
        )
    print("fits (version, labelled states read):", fits)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "decisions": args.decisions,
        "reader": "TopicReader (ScriptedReader with cached synthetic embeddings, real heads)",
        "python": sys.version.split()[0],
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "blocks": rows,
        "fits": fits,
    }
    (args.out / "learning_month.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
