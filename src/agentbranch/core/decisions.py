"""Decisions: the engine's answers, with their full label distribution and uncertainty.

``confidence = 1 − H / ln K`` over the renormalised label distribution (1: all mass on
one option, 0: uniform), with ``entropy``, ``margin`` and ``label_mass`` beside it.
``to_langchain()`` converts to the ``langchain_core.decisions`` answer types.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from langchain_core.decisions import (
    ChoiceAnswer,
    ClassifierResponse,
    NoulAnswer,
    ScoreAnswer,
)
from pydantic import BaseModel, ConfigDict

__all__ = ["Decision", "Decisions", "confidence_from", "entropy"]


def entropy(probs: Sequence[float]) -> float:
    """Shannon entropy in nats."""
    return -sum(p * math.log(p) for p in probs if p > 0.0)


def confidence_from(probs: Sequence[float]) -> float:
    """``1 − H/ln K``, clipped to [0, 1]."""
    k = len(probs)
    if k < 2:
        return 1.0
    return min(1.0, max(0.0, 1.0 - entropy(probs) / math.log(k)))


class Decision(BaseModel):
    """One answered question.

    ``label`` is the chosen option's name (``"yes"``/``"no"`` for yes/no questions, the
    level's name for scores); ``probabilities`` maps every option name to its
    probability. Scores also carry ``expected`` (Σ level·p, 0-based) and ``level`` (the
    most probable level's index).
    """

    model_config = ConfigDict(frozen=True)

    question_id: str
    type: Literal["choice", "noul", "score"]
    label: str
    index: int
    options: list[str]
    probabilities: dict[str, float]
    entropy: float
    confidence: float
    margin: float
    #: ``None``: unknown (the server did not say); never a made-up number.
    label_mass: float | None
    argmax_is_label: bool = True
    agreement: float = 1.0
    expected: float | None = None
    reader: str
    model: str
    latency_s: float
    calibrated: bool = False
    #: Fingerprint of the reading settings that shaped ``confidence`` (draws,
    #: permutations, joint canvas, instructions, calibration temperature, the reader's
    #: scoring settings); ``None`` when all are the defaults. Earned thresholds key
    #: their evidence by it (``agentbranch.engine.engine``).
    reading: str | None = None

    @classmethod
    def from_probs(
        cls, *, options: Sequence[str], probs: Sequence[float], **fields: Any
    ) -> Decision:
        """Build a decision from a normalised distribution over ``options``; ``fields``
        are the model's others (``question_id``, ``type``, ``label_mass``, ``reader``...)."""
        top = max(range(len(probs)), key=probs.__getitem__)
        ordered = sorted(probs, reverse=True)
        label_mass = fields.pop("label_mass")
        score = fields["type"] == "score"
        return cls(
            label=options[top],
            index=top,
            options=list(options),
            probabilities={o: float(p) for o, p in zip(options, probs)},
            entropy=entropy(probs),
            confidence=confidence_from(probs),
            margin=float(ordered[0] - (ordered[1] if len(ordered) > 1 else 0.0)),
            label_mass=None if label_mass is None else float(label_mass),
            expected=float(sum(i * p for i, p in enumerate(probs))) if score else None,
            **fields,
        )

    @property
    def probs(self) -> list[float]:
        """Probabilities in option order."""
        return [self.probabilities[o] for o in self.options]

    def to_langchain(self) -> ChoiceAnswer | NoulAnswer | ScoreAnswer:
        """The ``langchain_core.decisions`` answer (our confidence as theirs)."""
        if self.type == "noul":
            return NoulAnswer(type="noul", noul=self.probabilities["yes"])
        if self.type == "choice":
            return ChoiceAnswer(
                type="choice",
                choice=self.label,
                probabilities=dict(self.probabilities),
                confidence=self.confidence,
            )
        return ScoreAnswer(
            type="score",
            score=float(self.expected or 0.0),
            legend=dict(enumerate(self.options)),
            probabilities=dict(enumerate(self.probs)),
            confidence=self.confidence,
        )

    def to_record(self) -> dict[str, Any]:
        """A plain, JSON-safe dict (for graph state, checkpoints and logs)."""
        return self.model_dump(mode="json")


class Decisions(Mapping[str, Decision]):
    """The answers to one ``decide`` call, keyed by question id, in question order."""

    def __init__(
        self,
        decisions: Mapping[str, Decision],
        *,
        latency_s: float,
        usage: Mapping[str, int] | None = None,
        request_id: str | None = None,
    ) -> None:
        self._decisions = dict(decisions)
        self.latency_s = latency_s
        #: Token usage of the read, when the reader reports it (token readers, servers).
        self.usage = dict(usage) if usage is not None else None
        #: The server's request id, when the reader reports one.
        self.request_id = request_id

    def __getitem__(self, question_id: str) -> Decision:
        return self._decisions[question_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._decisions)

    def __len__(self) -> int:
        return len(self._decisions)

    def __repr__(self) -> str:
        inner = ", ".join(
            f"{k}={d.label!r} ({d.confidence:.2f})" for k, d in self._decisions.items()
        )
        return f"Decisions({inner})"

    def to_langchain(self) -> ClassifierResponse:
        """A ``langchain_core.decisions.ClassifierResponse``."""
        model = next(iter(self._decisions.values())).model if self._decisions else ""
        return ClassifierResponse(
            model=model,
            answers={k: d.to_langchain() for k, d in self._decisions.items()},
            usage=self.usage,
            request_id=self.request_id,
        )

    def to_records(self) -> dict[str, dict[str, Any]]:
        """Plain dicts keyed by question id."""
        return {k: d.to_record() for k, d in self._decisions.items()}
