"""What a miss says: the nearest recorded request and the fields that differ."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentbranch.replay.format import ChatEntry, ReadEntry, ReaderInfo, TeacherEntry
from agentbranch.replay.keys import (
    digest,
    last_content,
    messages_differences,
    request_differences,
    short,
    similarity,
    text_diff,
)

Diffs = list[tuple[str, str]]

HOW_TO_RECORD = (
    "Record it: pytest --agentbranch-record=new (adds the missing entries) or "
    "--agentbranch-record=all (re-records the cassette); Cassette(path, mode=...) outside pytest."
)


#: What a miss says when the nearest entry's summary shows no difference.
UNSEEN = (
    "a field its summary does not keep (it was recorded by an older agentbranch, whose "
    "summaries leave out e.g. a question's examples; re-record to see which)"
)


#: The same for a chat exchange (summaries keep each message's role, content, tool calls).
UNSEEN_CHAT = (
    "a part of the messages their summary does not keep (a message's name, ids or extra arguments)"
)


def nearest_read(
    summary: dict[str, Any],
    reader_id: str,
    entries: Sequence[ReadEntry],
    readers: Mapping[str, ReaderInfo],
) -> tuple[ReadEntry | None, Diffs]:
    """The recorded read closest to ``summary`` (same reader first) and how it differs."""
    pool = [e for e in entries if e.reader == reader_id] or list(entries)
    nearest, diffs = _nearest_request(pool, lambda e: summary, summary["state"] or "")
    if nearest is not None and nearest.reader != reader_id:
        info = readers.get(nearest.reader)
        diffs.insert(0, ("reader", f"{nearest.reader} -> {reader_id}"))
        if info is not None:
            diffs.insert(1, ("model", f"recorded by {info.name} ({info.model})"))
    return nearest, diffs


#: The same for a learning version's miss.
UNSEEN_VERSION = (
    "no field: the recording asked this decision fewer times (repeats of a decision are "
    "replayed in order)"
)


def nearest_decision(
    question_id: str, state: str, question: Mapping[str, Any], entries: Sequence[ReadEntry]
) -> tuple[ReadEntry | None, Diffs]:
    """The recorded read of a decision closest to one of question ``question_id`` (its
    summary fields ``question``: ``type``, ``text``, ``options``) on ``state`` (the
    reads that asked that question first), and how it differs: a learning question's
    decision that the cassette holds no version for, compared as its read would be."""
    pool = [
        e
        for e in entries
        if any(q.get("id") == question_id for q in e.request.get("questions", []))
    ] or list(entries)

    def asked(e: ReadEntry) -> dict[str, Any]:
        qs = [
            {**q, **question} if q.get("id") == question_id else q
            for q in e.request.get("questions", [])
        ]
        return {
            **e.request,
            "state": short(state),
            "state_sha": digest(state)[:16],
            "questions": qs,
        }

    return _nearest_request(pool, asked, state)


def _nearest_request(
    pool: Sequence[ReadEntry], asked: Callable[[ReadEntry], dict[str, Any]], state: str
) -> tuple[ReadEntry | None, Diffs]:
    """The read of ``pool`` whose request differs in the fewest fields from what is asked
    (``asked(entry)``; then the most similar state), and how it differs."""
    if not pool:
        return None, []
    nearest = min(
        pool,
        key=lambda e: (
            len(request_differences(e.request, asked(e))),
            -similarity(e.request.get("state") or "", state),
        ),
    )
    return nearest, request_differences(nearest.request, asked(nearest))


def nearest_chat(
    messages: list[dict[str, Any]],
    model: str,
    llm_string: str,
    name: str,
    entries: Sequence[ChatEntry],
    chat_models: Mapping[str, dict[str, str]],
) -> tuple[ChatEntry | None, Diffs]:
    """The recorded exchange closest to ``messages`` sent to ``model``, and how it differs."""
    nearest, diffs = _nearest(messages, model, entries, lambda e: e.messages, lambda e: e.model)
    if nearest is not None and nearest.model != model:
        was = chat_models.get(nearest.model, {})
        llm = text_diff(was.get("llm_string", ""), llm_string, width=50)
        diffs.insert(0, ("model", f"{was.get('name', nearest.model)} -> {name} (llm_string {llm})"))
    return nearest, diffs


def nearest_teacher(
    teacher: str, summary: Any, entries: Sequence[TeacherEntry]
) -> tuple[TeacherEntry | None, Diffs]:
    """The recorded teacher call (of the same role and question) closest to ``summary``
    sent to ``teacher``, and how it differs."""

    def as_messages(value: Any) -> list[dict[str, Any]]:
        if isinstance(value, list):
            return value
        return [{"role": "input", "content": json.dumps(value, sort_keys=True, default=str)}]

    new = as_messages(summary)
    nearest, diffs = _nearest(
        new, teacher, entries, lambda e: as_messages(e.input), lambda e: e.teacher
    )
    if nearest is not None and nearest.teacher != teacher:
        diffs.insert(0, ("teacher", f"{nearest.teacher} -> {teacher}"))
    return nearest, diffs


def _nearest(
    messages: list[dict[str, Any]],
    who: str,
    entries: Sequence[Any],
    messages_of: Callable[[Any], list[dict[str, Any]]],
    who_of: Callable[[Any], str],
) -> tuple[Any, Diffs]:
    """The entry whose messages are closest to ``messages`` sent to ``who`` (fewest
    differing fields, then the most similar last message), and how they differ."""
    if not entries:
        return None, []
    last = last_content(messages)

    def distance(e: Any) -> tuple[int, float]:
        old = messages_of(e)
        n = len(messages_differences(old, messages)) + (who_of(e) != who)
        return n, -similarity(last_content(old), last)

    nearest = min(entries, key=distance)
    return nearest, messages_differences(messages_of(nearest), messages)


def explain(
    head: str,
    what: str,
    nearest: ReadEntry | ChatEntry | TeacherEntry | None,
    diffs: Diffs,
    empty: str,
    unseen: str = UNSEEN,
) -> str:
    """The miss message: ``head``, then the nearest recorded ``what`` and its field diff
    (``unseen`` when the summaries show none; ``empty`` when there is nothing to compare
    with), then how to record."""
    lines = [head]
    if nearest is not None:
        fields = ", ".join(f for f, _ in diffs) or unseen
        where = f"line {nearest.line}" if nearest.line else "recorded this run"
        lines.append(f"Nearest recorded {what} ({where}) differs in: {fields}")
        lines += [f"  {f}: {d}" for f, d in diffs]
    else:
        lines.append(empty)
    lines.append(HOW_TO_RECORD)
    return "\n".join(lines)


def fields_note(diffs: Diffs) -> str:
    return f" — differs in {', '.join(f for f, _ in diffs)}" if diffs else ""


__all__ = [
    "HOW_TO_RECORD",
    "UNSEEN",
    "UNSEEN_CHAT",
    "UNSEEN_VERSION",
    "explain",
    "fields_note",
    "nearest_chat",
    "nearest_decision",
    "nearest_read",
    "nearest_teacher",
]
