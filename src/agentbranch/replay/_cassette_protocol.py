"""What the cassette's views (its reader, chat cache and teacher calls) use of a cassette:
named by this protocol, not by importing ``Cassette`` back, they and the cassette never
import each other, even for annotations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.replay.format import ReaderInfo, TeacherEntry
from agentbranch.replay.modes import RecordMode

__all__ = ["Answered", "CassetteStore"]

#: Requests read live, each with its reads (what ``record_reads`` records).
Answered = Sequence[tuple[ReadRequest, list[LabelRead]]]


class CassetteStore(Protocol):
    """The recorded reads, chat exchanges and teacher calls of one cassette file."""

    path: Path
    mode: RecordMode
    readers: dict[str, ReaderInfo]
    chat_cache: Any
    teacher_calls: Any

    def lookup_read(self, reader_id: str, request: ReadRequest) -> list[LabelRead] | None: ...
    def record_reads(self, reader_id: str, info: ReaderInfo, answered: Answered) -> None: ...
    def read_miss(self, reader_id: str, request: ReadRequest, why: str) -> Exception: ...

    def next_repeat(self, key: str) -> str: ...
    def lookup_chat(self, prompt: str, llm_string: str) -> list[Any] | None: ...
    def record_chat(self, prompt: str, llm_string: str, generations: Sequence[Any]) -> None: ...
    def chat_miss(self, prompt: str, llm_string: str) -> Exception: ...
    def clear_chats(self) -> None: ...
    def holds_chat(self, prompt: str, llm_string: str) -> bool: ...

    def lookup_teacher(self, key: str) -> TeacherEntry | None: ...
    def record_teacher(self, entry: TeacherEntry) -> None: ...
    def holds_teacher(self, key: str) -> bool: ...
    def teacher_miss(self, call: Any) -> Exception: ...
    def sampled(
        self, key: str, live: Callable[[], bool], unrecorded: Callable[[], bool]
    ) -> bool: ...
