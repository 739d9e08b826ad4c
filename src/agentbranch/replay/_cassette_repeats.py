"""The cassette's repeats: a teacher call or chat exchange asked again in one test.

A recording asks the teacher each time the run does, as the live run it records, and
keeps each answer under its own key (``next_repeat``: the call's key, then ``key#1``,
``key#2`` ...), so a replay answers the repeats in order. ``CassetteRepeats`` is mixed
into ``agentbranch.replay.cassette.Cassette``, which counts repeats per test."""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

__all__ = ["CassetteRepeats"]

#: The chat repeat this context looked up and the model is answering live: (cassette,
#: exchange key, the repeat's key); LangChain records the reply in the same context.
_ASKED: contextvars.ContextVar[tuple[int, str, str] | None] = contextvars.ContextVar(
    "agentbranch_chat_asked", default=None
)


class CassetteRepeats:
    """The repeats half of ``Cassette`` (see module doc)."""

    mode: str
    _lock: Any

    def _init_repeats(self) -> None:
        self._repeats: dict[str, int] = {}  # times each key was asked in this test
        self._highest: dict[str, int] = {}  # the highest repeat the file holds of each

    def next_repeat(self, key: str) -> str:
        """The key of the next time this test asks the teacher call or chat exchange
        ``key``: ``key`` the first time, then ``key#1``, ``key#2`` ..."""
        with self._lock:
            n = self._repeats.get(key, 0)
            self._repeats[key] = n + 1
            return key if n == 0 else f"{key}#{n}"

    def held_repeat(self, repeat: str, table: Mapping[str, Any]) -> str | None:
        """The key ``table`` answers the repeat ``repeat`` under: that repeat; in mode
        ``none``, when the recording asked less often than this run, the last repeat it
        recorded (a cassette recorded before repeats were numbered holds one answer per
        input, and a replay may ask it again); ``None`` when not held."""
        if repeat in table or self.mode != "none":
            return repeat if repeat in table else None
        base, _, n = repeat.partition("#")
        with self._lock:
            for i in range(min(int(n or 0), self._highest.get(base, -1)), -1, -1):
                if (key := base if i == 0 else f"{base}#{i}") in table:
                    return key
        return None

    def _held(self, key: str) -> None:
        """Note the repeat ``key`` as held by the file."""
        base, _, n = key.partition("#")
        i = int(n) if n.isdigit() else 0
        if i > self._highest.get(base, -1):
            self._highest[base] = i

    def _asked_live(self, key: str, repeat: str) -> None:
        """The chat exchange ``key`` is answered live as ``repeat`` in this context."""
        _ASKED.set((id(self), key, repeat))

    def _answered_as(self, key: str) -> str:
        """The repeat a reply to the chat exchange ``key`` is recorded as: the one this
        context looked up, else (recorded without a lookup) the one the next lookup asks."""
        asked = _ASKED.get()
        if asked is not None and asked[:2] == (id(self), key):
            _ASKED.set(None)
            return asked[2]
        # Written without a lookup (the cache used as LangChain's ``BaseCache``: update,
        # then lookup): the repeat the next lookup asks for, so that lookup finds it.
        with self._lock:
            n = self._repeats.get(key, 0)
        return key if n == 0 else f"{key}#{n}"
