"""Drift between two cassettes of the same run (``agentbranch replay diff``; docs/replay.md).

Entries are paired by key, then by a looser key (a reworded question or prompt, another
model); a paired question whose top label (of the read's own, uncalibrated distribution)
differs is a flip, and so is a paired exchange whose reply differs.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentbranch.core.decisions import confidence_from, entropy
from agentbranch.replay.format import CassetteData, ChatEntry, ReadEntry, TeacherEntry, load
from agentbranch.replay.keys import (
    digest,
    last_content,
    read_text,
    reply_text,
    request_differences,
    short,
)


@dataclass
class DecisionChange:
    """One question of a paired read, on both sides."""

    reader: str
    state: str
    question: str
    old_label: str
    new_label: str
    old_confidence: float
    new_confidence: float
    old_entropy: float
    new_entropy: float
    changed_fields: list[str] = field(default_factory=list)

    @property
    def flipped(self) -> bool:
        return self.old_label != self.new_label


@dataclass
class ChatChange:
    """One paired chat exchange."""

    old_model: str
    new_model: str
    prompt: str
    old_reply: str
    new_reply: str
    flipped: bool  # the reply changed


@dataclass
class CassetteDiff:
    """What changed from the ``old`` cassette to the ``new`` one."""

    old: str
    new: str
    old_models: dict[str, str]
    new_models: dict[str, str]
    decisions: list[DecisionChange]
    chats: list[ChatChange]
    added: list[str]
    removed: list[str]

    @property
    def flips(self) -> int:
        return sum(d.flipped for d in self.decisions) + sum(c.flipped for c in self.chats)

    @property
    def changed(self) -> bool:
        """Anything flipped, or the run asked other requests."""
        return bool(self.flips or self.added or self.removed)

    def to_json(self) -> dict[str, Any]:
        return {
            "old": self.old,
            "new": self.new,
            "old_models": self.old_models,
            "new_models": self.new_models,
            "summary": {
                "decisions": len(self.decisions),
                "flipped_decisions": sum(d.flipped for d in self.decisions),
                "chat_exchanges": len(self.chats),
                "changed_replies": sum(c.flipped for c in self.chats),
                "added": len(self.added),
                "removed": len(self.removed),
            },
            "decisions": [
                {**asdict(d), "flipped": d.flipped, "confidence_change": _delta(d)}
                for d in self.decisions
            ],
            "chats": [asdict(c) for c in self.chats],
            "added": self.added,
            "removed": self.removed,
        }


def _delta(d: DecisionChange) -> float:
    return round(d.new_confidence - d.old_confidence, 6)


def read_distribution(logprobs: tuple[float, ...]) -> list[float]:
    """The label distribution of one read (softmax of its label log-probabilities)."""
    top = max(logprobs)
    if top == -math.inf:
        return [1.0 / len(logprobs)] * len(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    z = sum(weights)
    return [w / z for w in weights]


def _models(data: CassetteData) -> dict[str, str]:
    out = {rid: f"{r.name} ({r.model})" for rid, r in data.readers.items()}
    out.update({mid: m["name"] for mid, m in data.chat_models.items()})
    return out


def _loose(e: ReadEntry) -> tuple[Any, ...]:
    r = e.request
    return (
        e.reader,
        r.get("state_sha", r.get("state")),
        tuple(q["id"] for q in r.get("questions", [])),
        r.get("draws"),
    )


def _pair(
    old: dict[Any, Any], new: dict[Any, Any], loose: Any
) -> tuple[list[tuple[Any, Any]], list[Any], list[Any]]:
    """Pairs by key, then by ``loose`` key where it is unique on both sides."""
    pairs = [(e, new[k]) for k, e in old.items() if k in new]
    rest_old = [e for k, e in old.items() if k not in new]
    rest_new = [e for k, e in new.items() if k not in old]
    count_old = Counter(loose(e) for e in rest_old)
    count_new = Counter(loose(e) for e in rest_new)
    unique = {k for k, n in count_old.items() if n == 1 and count_new[k] == 1}
    by_loose = {loose(e): e for e in rest_new}
    pairs += [(e, by_loose[loose(e)]) for e in rest_old if loose(e) in unique]
    removed = [e for e in rest_old if loose(e) not in unique]
    return pairs, removed, [e for e in rest_new if loose(e) not in unique]


def _read_changes(a: ReadEntry, b: ReadEntry) -> list[DecisionChange]:
    fields = [f for f, _ in request_differences(a.request, b.request)]
    out = []
    for qa, qb, ra, rb in zip(a.request["questions"], b.request["questions"], a.reads, b.reads):
        pa, pb = read_distribution(ra.logprobs), read_distribution(rb.logprobs)
        oa, ob = qa.get("options"), qb.get("options")
        la = oa[pa.index(max(pa))] if oa else str(pa.index(max(pa)))
        lb = ob[pb.index(max(pb))] if ob else str(pb.index(max(pb)))
        out.append(
            DecisionChange(
                reader=b.reader,
                state=short(b.request.get("state"), 60) or "",
                question=qb["id"],
                old_label=la,
                new_label=lb,
                old_confidence=round(confidence_from(pa), 6),
                new_confidence=round(confidence_from(pb), 6),
                old_entropy=round(entropy(pa), 6),
                new_entropy=round(entropy(pb), 6),
                changed_fields=fields,
            )
        )
    return out


def _chat_change(models: tuple[str, str], prompt: str, replies: tuple[str, str]) -> ChatChange:
    return ChatChange(*models, short(prompt, 60) or "", *replies, replies[0] != replies[1])


def _read_label(e: ReadEntry) -> str:
    return f"read {e.reader} {read_text(e.request)}"


def _chat_label(e: ChatEntry, models: dict[str, str]) -> str:
    return f"chat {models.get(e.model, e.model)} {short(last_content(e.messages), 50)!r}"


def _teacher_prompt(e: TeacherEntry) -> str:
    if isinstance(e.input, list) and e.input and isinstance(e.input[-1], dict):
        return str(e.input[-1].get("content"))
    return repr(e.input)


def _teacher_label(e: TeacherEntry) -> str:
    return f"{e.role} {e.teacher} of {e.question!r} {short(_teacher_prompt(e), 50)!r}"


def diff_cassettes(old: str | Path, new: str | Path) -> CassetteDiff:
    """Compare two cassettes (``CassetteFormatError`` if either cannot be read)."""
    a, b = load(old), load(new)
    ma, mb = _models(a), _models(b)
    pairs, removed, added = _pair(a.reads, b.reads, _loose)
    decisions = [c for x, y in pairs for c in _read_changes(x, y)]
    cpairs, cremoved, cadded = _pair(a.chats, b.chats, lambda e: digest(repr(e.messages)))
    chats = [
        _chat_change(
            (ma.get(x.model, x.model), mb.get(y.model, y.model)),
            last_content(y.messages),
            (reply_text(x.reply), reply_text(y.reply)),
        )
        for x, y in cpairs
    ]
    # A policy's other teacher calls (agentbranch.replay.teachers) read like chat exchanges.
    tpairs, tremoved, tadded = _pair(
        a.teachers, b.teachers, lambda e: (e.role, e.question, digest(repr(e.input)))
    )
    chats += [
        _chat_change(
            (x.teacher, y.teacher),
            _teacher_prompt(y),
            (reply_text([x.reply]), reply_text([y.reply])),
        )
        for x, y in tpairs
    ]
    # Flips first, then the largest confidence changes.
    decisions.sort(key=lambda d: (not d.flipped, -abs(d.new_confidence - d.old_confidence)))
    return CassetteDiff(
        old=str(old),
        new=str(new),
        old_models=ma,
        new_models=mb,
        decisions=decisions,
        chats=chats,
        added=[_read_label(e) for e in added]
        + [_chat_label(e, mb) for e in cadded]
        + [_teacher_label(e) for e in tadded],
        removed=[_read_label(e) for e in removed]
        + [_chat_label(e, ma) for e in cremoved]
        + [_teacher_label(e) for e in tremoved],
    )


__all__ = ["CassetteDiff", "ChatChange", "DecisionChange", "diff_cassettes"]
