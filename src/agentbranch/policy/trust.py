"""The trust seam: what a policy asks of the source of its take threshold.

``Policy(take_at=...)`` is a number (``Fixed``) or a ``TrustSource`` (``Earned``, in a
package above this one). The resolver, fallbacks and audits call only the methods below,
each with the default of a source that learns nothing; a ``QuestionKey`` names the
trust a decision reads and feeds.
"""

from __future__ import annotations

import hashlib
import json
import typing
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from agentbranch.core.questions import Question

__all__ = [
    "Asked",
    "Fixed",
    "QuestionKey",
    "TRUSTS",
    "Threshold",
    "TeacherLabel",
    "Trust",
    "TrustSource",
    "evidence_key",
]

#: The trust values a question can be in (one place: the records and reports use these).
Trust = Literal["learning", "earned", "withdrawn", "fixed"]
TRUSTS: tuple[str, ...] = typing.get_args(Trust)


@dataclass(frozen=True)
class Threshold:
    """The threshold in force for one question: ``take_at`` (``None``: nothing is taken)
    and ``trust``."""

    take_at: float | None
    trust: Trust


def evidence_key(
    question_id: str,
    question: Any,
    reader: str | None,
    model: str | None,
    reading: str | None = None,
) -> str:
    """The key evidence is kept under: a hash of the question's identity (its whole
    ``model_dump``), reader, model and ``reading`` (``Decision.reading``: the settings
    that shape the confidence; ``None``, not hashed in, when all are the defaults).
    Change any of them and the question learns again: a threshold earned on one
    confidence scale never serves another."""
    spec = question.model_dump(mode="json") if hasattr(question, "model_dump") else question
    identity = {"id": question_id, "question": spec, "reader": reader, "model": model}
    if reading is not None:
        identity["reading"] = reading
    blob = json.dumps(identity, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class QuestionKey:
    """Which trust a decision reads and feeds: the question (``question_id`` and the
    question as asked), the ``reader`` and ``model`` that read it, and ``reading``, the
    fingerprint of its reading settings (``Decision.reading``). ``evidence_key`` is the
    key its evidence is kept under."""

    question_id: str
    question: Any
    reader: str | None = None
    model: str | None = None
    reading: str | None = None

    @property
    def evidence_key(self) -> str:
        return evidence_key(self.question_id, self.question, self.reader, self.model, self.reading)

    def asking(self, question: Any) -> QuestionKey:
        """The same key for another version of the question (a learned read of it)."""
        return replace(self, question=question)

    def read_with(self, reading: str | None) -> QuestionKey:
        """The same key under other reading settings."""
        return replace(self, reading=reading)


@dataclass(frozen=True)
class TeacherLabel:
    """The teacher's ``label`` of one decision: ``source`` is ``"fallback"``,
    ``"review"`` or ``"audit"``, ``rate`` the probability the decision was labelled with,
    ``state`` the state read and ``audit_rate`` the share of takes the policy audits."""

    label: str
    source: Literal["fallback", "review", "audit"]
    rate: float
    state: Any = None
    audit_rate: float | None = None


@dataclass(frozen=True)
class Asked:
    """The question asked for one decision when its source learns versions of it:
    ``question`` (whose threshold and evidence count), ``read`` (what the engine reads),
    ``version`` (its index) and ``probability_map`` (for ``TrustSource.mark``)."""

    question: Question
    read: Question
    version: int = 0
    probability_map: Any = field(default=None, compare=False)


class TrustSource(ABC):
    """Where a policy's take threshold comes from. A source other than ``Fixed`` learns
    from the teacher's labels: its policy needs a label source, its decisions carry an
    identity, and every label obtained is given to ``observe_label``."""

    #: The highest threshold it ever uses (``Policy(review_below=...)`` stays at or below).
    max_take_at: float = 1.0
    #: Whether the question asked may be a version the source learned (``asked``); asking
    #: may read a store or embed the state, so the resolver asks off the event loop.
    asks_versions: bool = False

    @abstractmethod
    def in_force(self, key: QuestionKey) -> Threshold:
        """The threshold in force for a decision of ``key`` (the decision path calls it)."""

    @property
    def settings(self) -> dict[str, Any]:
        """What audit records carry of the source (``"earned"``), for reports."""
        return {}

    def asked(self, engine: Any, questions: Mapping[str, Question], text: str) -> dict[str, Asked]:
        """For each of ``questions`` (this source's) whose version in force is asked about
        the rendered state ``text``, what is asked; a question left out is asked as
        written. Called only when ``asks_versions``."""
        return {}

    def mark(self, record: dict[str, Any], asked: Asked) -> None:
        """Write into the decision record what ``asked`` says of the read that decided."""

    def observe_label(
        self, question_id: str, question: Question, banded: dict[str, Any], label: TeacherLabel
    ) -> None:
        """The teacher's ``label`` of the decision whose banded record (its first read,
        with its identity ``decision_id``) is ``banded``. Never raises for a label it
        cannot keep but a configuration error."""

    def suspended_take_at(self, key: QuestionKey) -> float | None:
        """While ``key``'s band is suspended for missing audits, the threshold it would take
        at (its audits probe those decisions); ``None``: not suspended or nothing to take."""
        return None

    def audit_arrived(self, question_id: str, reader: str | None, model: str | None) -> None:
        """A due audit of this question's decisions came and was used."""

    def audit_missing(
        self, question_id: str, reader: str | None, model: str | None, why: str = ""
    ) -> None:
        """A due audit never came (``why``: dropped, timed out, failed)."""


class Fixed(TrustSource):
    """A hand-chosen threshold (``Policy(take_at=0.8)``): trust ``"fixed"``, learns nothing."""

    def __init__(self, take_at: float) -> None:
        self.take_at = float(take_at)
        self.max_take_at = self.take_at
        self._threshold = Threshold(self.take_at, "fixed")

    def in_force(self, key: QuestionKey) -> Threshold:
        return self._threshold

    def __repr__(self) -> str:
        return f"Fixed({self.take_at})"
