"""The teacher calls a policy makes (a ``Generate`` fallback, an audit, a reviewer), as
something a recording of the run can answer: ``TeacherCalls``, which a replay cassette
implements and an engine reading through one exposes (``DecisionEngine.teacher_calls``),
so the policy never imports the replay.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

#: What a teacher call is for: a ``Generate`` fallback's answer, an audit's (or an audit
#: probe's) label, a reviewer's answer.
Role = Literal["generate", "audit", "review"]


@dataclass(frozen=True)
class TeacherCall:
    """One call of a teacher: ``teacher`` (a LangChain Runnable, or the reviewer
    function) asked ``input`` (the messages sent, or the review payload) for
    question ``question_id``."""

    role: Role
    question_id: str
    teacher: Any
    input: Any


@runtime_checkable
class TeacherCalls(Protocol):
    """Answers teacher calls: ``call(c, invoke)`` returns the reply to ``c``, calling
    ``invoke(model)`` (with ``c.teacher`` or a copy of it the recording attached itself
    to) only when the reply must be asked live. ``audited(c, state, draw)`` says whether
    the decision of ``c.question_id`` on the rendered ``state`` is audited (by the
    audit call ``c``): ``draw()`` on a live run, recorded, and what was recorded on a
    replay, so a replay audits exactly the decisions the recording audited."""

    def call(self, call: TeacherCall, invoke: Callable[[Any], Any]) -> Any: ...

    async def acall(self, call: TeacherCall, invoke: Callable[[Any], Awaitable[Any]]) -> Any: ...

    def audited(self, call: TeacherCall, state: str, draw: Callable[[], bool]) -> bool: ...


def teacher_calls_of(engine: Any) -> TeacherCalls | None:
    """What answers ``engine``'s teacher calls (``engine.teacher_calls``), or ``None``
    when they go live."""
    got = getattr(engine, "teacher_calls", None)
    return got if isinstance(got, TeacherCalls) else None


__all__ = ["Role", "TeacherCall", "TeacherCalls", "teacher_calls_of"]
