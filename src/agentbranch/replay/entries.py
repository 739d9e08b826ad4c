"""What a loaded cassette holds: the entries of each kind, and the file's header facts
(``agentbranch.replay.format`` reads and writes them as lines)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentbranch.core.reads import LabelRead


@dataclass
class ReaderInfo:
    """Which reader recorded the reads of one reader id."""

    name: str
    model: str
    max_options: int = 26


@dataclass
class ReadEntry:
    """One recorded read request (``request`` is its readable summary)."""

    reader: str
    key: str
    request: dict[str, Any]
    reads: list[LabelRead]
    line: int | None = None


@dataclass
class ChatEntry:
    """One recorded chat-model exchange; ``reply`` is LangChain generations as dicts."""

    model: str
    key: str
    messages: list[dict[str, Any]]
    reply: list[dict[str, Any]]
    line: int | None = None


@dataclass
class TeacherEntry:
    """One recorded teacher call (``schema.TeacherLine``)."""

    role: str
    question: str
    teacher: str
    key: str
    input: Any
    reply: dict[str, Any]
    line: int | None = None


@dataclass
class CassetteData:
    """A loaded cassette: header facts and entries by key, in file order (a later line
    with the same key replaces the entry)."""

    readers: dict[str, ReaderInfo] = field(default_factory=dict)
    chat_models: dict[str, dict[str, str]] = field(default_factory=dict)
    #: By ``(reader id, key)``.
    reads: dict[tuple[str, str], ReadEntry] = field(default_factory=dict)
    chats: dict[str, ChatEntry] = field(default_factory=dict)
    #: The values in force per recorded decision, by kind and decision key: an Earned
    #: threshold (``{"take_at", "trust"}``), a learning question's version (``{"version",
    #: "asked", "read"}``) and whether it was audited (``{"audited"}``).
    decided: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=lambda: {"threshold": {}, "version": {}, "sample": {}}
    )
    #: Teacher calls that are not chat exchanges (``TeacherEntry``).
    teachers: dict[str, TeacherEntry] = field(default_factory=dict)
    #: The format version of the file (0 for pre-v1), ``None`` before its first line.
    version: int | None = None
    recording: str | None = None


__all__ = ["CassetteData", "ChatEntry", "ReadEntry", "ReaderInfo", "TeacherEntry"]
