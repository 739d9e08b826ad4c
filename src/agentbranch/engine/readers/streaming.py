"""Streaming a generation: the text pieces a generator hands out as the model produces them.

A generator's ``stream(request)`` (and ``astream``) yields ``str`` pieces, then ONE
``GenerationResult``; joined, the pieces are the result's text.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Sequence
from typing import Any, TypeVar

from agentbranch.core.at_exit import join_at_exit
from agentbranch.engine.readers.generation import cut_at_stop

__all__ = ["StreamText", "TokenText", "iterate_in_thread"]

T = TypeVar("T")


class StreamText:
    """The pieces of one generation's text that may be handed out.

    Never text at or past a stop string (an end of the text that may start one is held
    back until the next token shows), never half a character (a trailing U+FFFD waits
    for its next byte). Joined, the pieces are the text the finished generation keeps.
    """

    def __init__(self, stop: Sequence[str] = ()) -> None:
        self._stops = [s for s in stop if s]
        self.emitted = ""
        self.stopped = False

    def update(self, text: str) -> str:
        """The new piece, given the whole text so far (``""`` when nothing is safe yet).
        Sets ``stopped`` once a stop string appeared: nothing after it is ever handed out."""
        if self.stopped:
            return ""
        safe, self.stopped = cut_at_stop(text, self._stops)
        if not self.stopped:
            safe = text[: len(text) - self._held(text)].rstrip("\ufffd")
        if len(safe) <= len(self.emitted) or not safe.startswith(self.emitted):
            return ""
        piece = safe[len(self.emitted) :]
        self.emitted = safe
        return piece

    def _held(self, text: str) -> int:
        """Length of the longest end of ``text`` that is the start of a stop string
        (``text`` holds none whole)."""
        return max(
            (k for stop in self._stops for k in range(1, len(stop)) if text.endswith(stop[:k])),
            default=0,
        )

    def finish(self, text: str) -> str:
        """The rest of the final ``text`` (already cut at its stop string) not yet handed
        out; ``""`` if the final text does not extend what was handed out."""
        if not text.startswith(self.emitted):
            return ""
        rest = text[len(self.emitted) :]
        self.emitted = text
        return rest


class TokenText:
    """The text of a growing list of generated token ids, as the whole reply decodes:
    ids after the first end-of-sequence id are ignored, padding is dropped."""

    def __init__(self, tokenizer: Any, eos: set[int], pad: int | None, limit: int) -> None:
        self.tokenizer = tokenizer
        self.eos = eos
        self.pad = pad if pad is not None and pad not in eos else None
        self.limit = limit
        self.ids: list[int] = []  # every id received (up to limit)
        self.ended: int | None = None  # index of the first end-of-sequence id

    def push(self, ids: Iterable[int]) -> str:
        """Add new ids; the whole text so far."""
        for t in ids:
            if self.ended is not None or len(self.ids) >= self.limit:
                break
            if t in self.eos:
                self.ended = len(self.ids)
            self.ids.append(int(t))
        ids = self.ids if self.ended is None else self.ids[: self.ended]
        reply = [t for t in ids if t != self.pad]  # (``pad`` is None when it is no id)
        return self.tokenizer.decode(reply, skip_special_tokens=True)


_END = object()
#: Seconds between the pump's checks, while the consumer holds an item, that it left
_POLL_S = 0.1


async def iterate_in_thread(
    make: Callable[[threading.Event], Generator[T, None, None]],
) -> AsyncIterator[T]:
    """Items of the blocking generator ``make(cancel)``, iterated in a worker thread, each
    asked for only once the consumer took the one before, then closed. ``cancel`` is set
    when the consumer stops early (or fails); the generator should then end soon."""
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[Any] = asyncio.Queue()
    cancel = threading.Event()
    wanted = threading.Semaphore(1)  # released each time the consumer takes an item

    def hand(item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody listens
            loop.call_soon_threadsafe(items.put_nowait, item)

    def pump() -> None:
        try:
            with contextlib.closing(make(cancel)) as it:
                while not cancel.is_set():
                    if not wanted.acquire(timeout=_POLL_S):  # the consumer holds an item
                        continue
                    if cancel.is_set() or (item := next(it, _END)) is _END:
                        break
                    hand((item, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            hand((None, e))
        else:
            hand((_END, None))

    pumping = threading.Thread(target=pump, name="agentbranch-stream", daemon=True)
    pumping.start()
    join_at_exit(pumping)  # (it may be inside the generator's native code at exit)
    try:
        while True:
            item, error = await items.get()
            wanted.release()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item
    finally:
        cancel.set()
