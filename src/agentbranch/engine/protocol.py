"""``Engine``: what policies, integrations and tools ask of a decision engine.

``DecisionEngine`` is the engine; the layers above type what they are given by this
protocol, so they name the few things they use (decide, its batched and async forms,
the reader, the calibration, the reading fingerprint, the views a replay needs) and
nothing of how the engine does them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentbranch.core.decisions import Decisions
    from agentbranch.core.teacher_calls import TeacherCalls
    from agentbranch.engine.calibration import Calibration
    from agentbranch.engine.readers.base import Reader

__all__ = ["Engine"]


class Engine(Protocol):
    """A decision engine (``DecisionEngine``), as the layers above it use one."""

    #: The reader reads go to (``Reader`` declares what it can do).
    reader: Reader
    #: Temperatures per question or type, or ``None``.
    calibration: Calibration | None
    #: Why ``from_env`` chose the reader (``None`` when built directly).
    selection_reason: str | None

    def decide(
        self,
        state: Any,
        questions: Mapping[str, Any],
        *,
        draws: int | None = None,
        log_decisions: bool = True,
    ) -> Decisions: ...

    async def adecide(
        self,
        state: Any,
        questions: Mapping[str, Any],
        *,
        draws: int | None = None,
        log_decisions: bool = True,
    ) -> Decisions: ...

    def decide_many(
        self,
        states: Sequence[Any],
        questions: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        draws: int | None = None,
        log_decisions: bool = True,
    ) -> list[Decisions]: ...

    async def adecide_many(
        self,
        states: Sequence[Any],
        questions: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        draws: int | None = None,
        log_decisions: bool = True,
    ) -> list[Decisions]: ...

    def reading_for(self, question_id: str, question: Any) -> str | None:
        """The reading fingerprint a decision of ``question`` carries."""
        ...

    def unrecorded(self) -> Engine:
        """This engine for reads that are no part of a recorded run."""
        ...

    @property
    def teacher_calls(self) -> TeacherCalls | None:
        """What answers a policy's teacher calls (a replay), or ``None``."""
        ...

    def warmup(self) -> Engine: ...

    def close(self) -> None: ...
