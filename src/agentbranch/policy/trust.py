"""The trust seam: what a policy asks of the source of its take threshold.

``Policy(take_at=...)`` is a number (``Fixed``, the trivial source) or a ``TrustSource``
(``agentbranch.policy.earned.Earned``, which lives in a package above this one: nothing
in ``policy/`` imports it). The resolver, the fallbacks and the audits call the methods
below and nothing else of the source; each has the default of a source that learns
nothing, so a new source writes ``in_force`` and what it needs of the rest.
"""

from __future__ import annotations

import typing
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentbranch.core.questions import Question

__all__ = ["Asked", "Fixed", "TRUSTS", "Threshold", "Trust", "TrustSource"]

#: The trust values a question can be in (one place: the records and reports use these).
Trust = Literal["learning", "earned", "withdrawn", "fixed"]
TRUSTS: tuple[str, ...] = typing.get_args(Trust)


@dataclass(frozen=True)
class Threshold:
    """The threshold in force for one question: ``take_at`` (``None``: nothing is taken)
    and ``trust``."""

    take_at: float | None
    trust: Trust


@dataclass(frozen=True)
class Asked:
    """The question asked for one decision when its source learns versions of it:
    ``question`` (its threshold and evidence are this question's: a learned version or
    the question as written), ``read`` (what the engine reads: it, or it with few-shot
    lines), ``version`` (its index) and ``probability_map`` (what the source marks the
    record with, ``TrustSource.mark``)."""

    question: Question
    read: Question
    version: int = 0
    probability_map: Any = field(default=None, compare=False)


class TrustSource(ABC):
    """Where a policy's take threshold comes from (see the module docstring).

    A source other than ``Fixed`` learns from the teacher's labels: a policy with one
    needs a label source (a ``Generate`` fallback or an ``Audit`` with a teacher), its
    decisions carry an identity (``agentbranch.policy.records.decision_identity``), and
    every label the resolution or an audit obtains is given to ``observe_label``.
    """

    #: The highest threshold it ever uses (``Policy(review_below=...)`` stays at or below).
    max_take_at: float = 1.0
    #: Whether the question asked may be a version the source learned (``asked``); asking
    #: may read a store or embed the state, so the resolver asks off the event loop.
    asks_versions: bool = False

    @abstractmethod
    def in_force(
        self,
        question_id: str,
        question: Question,
        reader: str | None,
        model: str | None,
        reading: str | None = None,
    ) -> Threshold:
        """The threshold in force for a decision of ``question_id`` read by ``reader`` and
        ``model`` with reading settings ``reading`` (the decision path calls it)."""

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
        self,
        question_id: str,
        question: Question,
        banded: dict[str, Any],
        *,
        source: str,
        teacher_label: str,
        rate: float,
        decision: str | None = None,
        state: Any = None,
        audit_rate: float | None = None,
    ) -> None:
        """The teacher's label ``teacher_label`` of the decision whose banded record (its
        first read) is ``banded``: ``source`` is ``"fallback"``, ``"review"`` or
        ``"audit"``, ``rate`` the probability it was labelled with, ``decision`` its
        identity (default ``banded["decision_id"]``), ``state`` the state read and
        ``audit_rate`` the share of takes the policy audits. Never raises for a label it
        cannot keep but a configuration error."""

    def suspended_take_at(
        self, question_id: str, question: Question, reader: str | None, model: str | None
    ) -> float | None:
        """While the band of ``question_id`` is suspended for missing audits, the
        threshold it would take at (its audits then probe the decisions it would take);
        ``None``: not suspended, or nothing to take."""
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

    def in_force(
        self,
        question_id: str,
        question: Question,
        reader: str | None,
        model: str | None,
        reading: str | None = None,
    ) -> Threshold:
        return self._threshold

    def __repr__(self) -> str:
        return f"Fixed({self.take_at})"
