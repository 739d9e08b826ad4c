"""The cassette's teacher calls: a policy's calls that are not reads (``teacher`` lines),
audits' draws (``sample`` lines), and what a miss says (``_missed``: of a teacher call,
and of the cassette's reads and chats too).

``CassetteTeacherEntries`` is mixed into ``agentbranch.replay.cassette.Cassette``, whose
tables and file it uses; ``agentbranch.replay.teachers`` decides what is asked of it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentbranch.replay import format as fmt
from agentbranch.replay.format import TeacherEntry
from agentbranch.replay.keys import chat_key, short
from agentbranch.replay.misses import UNSEEN_CHAT, explain, fields_note, nearest_teacher

if TYPE_CHECKING:
    from agentbranch.replay.teachers import CassetteTeachers

__all__ = ["CassetteTeacherEntries"]


class CassetteTeacherEntries:
    """The teacher half of ``Cassette`` (see module doc)."""

    path: Any
    mode: str
    misses: list[str]
    audit_misses: list[str]
    _shown: str
    _lock: Any
    _chats: dict[str, Any]
    _teachers: dict[str, TeacherEntry]
    _played: set[Any]
    _samples: dict[str, dict[str, Any]]
    _sample_seen: dict[str, int]
    _teacher_calls: CassetteTeachers | None
    _commit: Callable[..., None]
    _per_decision: Callable[..., dict[str, Any]]
    held_repeat: Callable[[str, Any], str | None]
    _miss_error: type[Exception]  # the cassette's ReplayMissError

    def _init_teachers(self) -> None:
        self._teachers = {}  # by key (agentbranch.replay.teachers)
        #: The misses of audits: raised on an audit's worker thread, where they fail the
        #: audit but not the run (the pytest plugin fails the test that made them).
        self.audit_misses = []
        # Audits' draws (whether each decision was audited), by decision like thresholds.
        self._samples = {}
        self._sample_seen = {}
        self._teacher_calls = None

    @property
    def teacher_calls(self) -> CassetteTeachers:
        """The policy's teacher calls through this cassette (``Generate`` fallbacks of
        any Runnable, audits, reviewers): engines reading through one of its readers
        find it (``DecisionEngine.teacher_calls``); see ``agentbranch.replay.teachers``."""
        with self._lock:
            if self._teacher_calls is None:
                from agentbranch.replay.teachers import CassetteTeachers

                self._teacher_calls = CassetteTeachers(self)  # type: ignore[arg-type]
            return self._teacher_calls

    def holds_chat(self, prompt: str, llm_string: str) -> bool:
        """Whether this cassette holds a reply to the exchange (nothing is played)."""
        with self._lock:
            return chat_key(prompt, llm_string) in self._chats

    def lookup_teacher(self, key: str) -> TeacherEntry | None:
        """The recorded teacher call ``key`` (a repeat: ``held_repeat``; played), or
        ``None``."""
        with self._lock:
            held = self.held_repeat(key, self._teachers)
            entry = None if held is None else self._teachers[held]
            if entry is not None:
                self._played.add(("teacher", entry.role, entry.key))
            return entry

    def holds_teacher(self, key: str) -> bool:
        with self._lock:
            return key in self._teachers

    def record_teacher(self, entry: TeacherEntry) -> None:
        if self.mode == "passthrough":
            return

        def lines() -> list[dict[str, Any]]:
            self._played.add(("teacher", entry.role, entry.key))
            return [fmt.teacher_line(entry)]

        self._commit(lines)

    def teacher_miss(self, call: Any, key: str) -> Exception:
        """The ``ReplayMissError`` for the teacher call ``call``
        (``core.teacher_calls.TeacherCall``) this cassette cannot answer: the call, the
        nearest recorded call of the same role and question and how its input differs,
        how to record it. Kept in ``misses`` (an audit's also in ``audit_misses``)."""
        from agentbranch.replay.teachers import describe, identity, input_summary

        name = identity(call.teacher)
        summary = input_summary(call.input)
        with self._lock:
            entries = [
                t
                for t in self._teachers.values()
                if (t.role, t.question) == (call.role, call.question_id)
            ]
        nearest, diffs = nearest_teacher(name, summary, entries)
        head = (
            f"cassette {self._shown} (mode {self.mode!r}) has no answer of "
            f"{describe(call, name)} to this input ({excerpt(summary)!r}). "
            "Replay calls no teacher."
        )
        empty = self._empty(
            f"The cassette holds no {call.role} call of question {call.question_id!r}."
        )
        return self._missed(
            f"{call.role} {name} of {call.question_id!r} {excerpt(summary, 50)!r}",
            explain(head, "call", nearest, diffs, empty, UNSEEN_CHAT),
            diffs,
            audit=call.role == "audit",
        )

    def _empty(self, holds_none: str) -> str:
        """What a miss says when nothing recorded is near: no file yet, or ``holds_none``."""
        if not self.path.exists():
            return f"There is no cassette file at {self.path} yet."
        return holds_none

    def _missed(self, line: str, message: str, diffs: Any, *, audit: bool) -> Any:
        """Keep the miss ``line`` (with the fields ``diffs`` names) in ``misses``, and an
        audit's in ``audit_misses`` too; the error to raise (the cassette's
        ``ReplayMissError``) says ``message``."""
        with self._lock:
            self.misses.append(line + fields_note(diffs))
            if audit:
                self.audit_misses.append(self.misses[-1])
        return self._miss_error(message)

    def _asked_as(self, name: str) -> tuple[Any, str]:
        """The teacher call a chat model is being invoked for here (or ``None``), and
        what a chat miss says of it."""
        from agentbranch.replay.teachers import current_call, describe

        call = current_call()
        return call, "" if call is None else f", asked as {describe(call, name)}"

    def sampled(self, key: str, live: Callable[[], bool], unrecorded: Callable[[], bool]) -> bool:
        """Whether the next decision with ``key`` (question and state; repeats numbered
        in order) is audited: as recorded when replaying, else ``live()`` (the audit's
        draw), recorded; ``unrecorded()`` in replay-only mode when the cassette was
        recorded before draws were kept."""
        got = self._per_decision(
            key,
            lambda: {"audited": bool(live())},
            self._sample_seen,
            self._samples,
            fmt.sample_line,
            "",
            otherwise=lambda: {"audited": bool(unrecorded())},
        )
        return bool(got["audited"])

    def _stale_teacher(self, key: str) -> list[dict[str, Any]]:
        """The stale-list entry of the teacher call ``key`` (none if it is gone)."""
        t = self._teachers.get(key)
        if t is None:
            return []
        summary = f"{t.role} of {t.question!r} {excerpt(t.input, 50)!r}"
        return [{"kind": "teacher", "line": t.line, "model": t.teacher, "summary": summary}]


def excerpt(summary: Any, width: int = 60) -> str | None:
    """The last message's content of a teacher input summary (or the payload)."""
    if isinstance(summary, list) and summary and isinstance(summary[-1], dict):
        return short(str(summary[-1].get("content")), width)
    return short(json.dumps(summary, sort_keys=True, default=str), width)
