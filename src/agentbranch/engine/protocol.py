"""``Engine``: what policies, integrations and tools ask of a decision engine.

``DecisionEngine`` is the engine, and its methods' docstrings say what each promises; the
layers above type what they are given by this protocol, so they name the few things
they use and nothing of how the engine does them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentbranch.core.decisions import Decisions
    from agentbranch.core.questions import Questions
    from agentbranch.core.teacher_calls import TeacherCalls
    from agentbranch.engine.calibration import Calibration
    from agentbranch.engine.readers.base import Reader

__all__ = ["Engine"]


class Engine(Protocol):
    """A decision engine (``DecisionEngine``), as the layers above it use one."""

    reader: Reader
    calibration: Calibration | None

    def decide(
        self, state: Any, questions: Questions, *, log_decisions: bool = ...
    ) -> Decisions: ...

    async def adecide(
        self, state: Any, questions: Questions, *, log_decisions: bool = ...
    ) -> Decisions: ...

    def decide_many(
        self,
        states: Sequence[Any],
        questions: Questions | Sequence[Questions],
        *,
        log_decisions: bool = ...,
    ) -> list[Decisions]: ...

    async def adecide_many(
        self,
        states: Sequence[Any],
        questions: Questions | Sequence[Questions],
        *,
        log_decisions: bool = ...,
    ) -> list[Decisions]: ...

    def reading_for(self, question_id: str, question: Any) -> str | None: ...

    def unrecorded(self) -> Engine: ...

    @property
    def teacher_calls(self) -> TeacherCalls | None: ...
