"""``CassetteReader``: a reader that answers from a cassette and records through a live one.

The live reader is built only when something must be read live (a miss in ``new`` mode,
every read in ``all`` and ``passthrough``), so a replay never loads a model. Replayed
decisions report the reader as ``replay:<recorded reader>`` and the recorded model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine.readers.base import Reader, WrappingReader
from agentbranch.replay.format import ReaderInfo

if TYPE_CHECKING:
    from agentbranch.replay._cassette_protocol import CassetteStore


class CassetteReader(Reader):
    """Reads of reader ``id`` in ``cassette``; ``live`` (a ``Reader`` or a function that
    builds one) answers what must be read live. Made by ``Cassette.reader``."""

    def __init__(
        self, cassette: CassetteStore, live: Reader | Callable[[], Reader] | None, *, id: str
    ) -> None:
        self.cassette = cassette
        self.id = id
        # A policy deciding with an engine on this reader records and replays its teacher
        # calls with the cassette's.
        self.teacher_calls = cassette.teacher_calls
        self._live_arg = live
        self._live: Reader | None = live if isinstance(live, Reader) else None
        self._build_lock = threading.Lock()
        self._live_loaded = False
        # Whether this run replays this reader is fixed at creation, so every decision of
        # the run reports the same reader name.
        self._recorded = cassette.readers.get(id) if cassette.mode in ("new", "none") else None

    # -- identity (what the engine reads before reading) ---------------------------------

    @property
    def name(self) -> str:  # type: ignore[override]
        if self._recorded is not None:
            return f"replay:{self._recorded.name}"
        return self._identity().name

    @property
    def model(self) -> str:  # type: ignore[override]
        return self._identity().model

    @property
    def max_options(self) -> int:  # type: ignore[override]
        return self._identity().max_options

    def _identity(self) -> ReaderInfo:
        """The recorded reader, else the live one, else an unknown one."""
        if self._recorded is not None:
            return self._recorded
        live = self._live_or_none()
        if live is None:
            return ReaderInfo("replay:unknown", "unknown")
        return ReaderInfo(live.name, live.model, live.max_options)

    def unrecorded(self) -> Reader:
        """This reader for reads that are no part of the recorded run (a learning
        version's trial reads): read live and not recorded; in mode ``none`` they are a
        ``ReplayMissError``."""
        return _Unrecorded(self)

    @property
    def embed(self) -> Any:
        """The live reader's ``embed``, so a learning policy fits the same versions
        through a cassette as without one (``None`` when this run reads nothing live)."""
        live = self._live_or_none()
        return None if live is None else live.embed

    @property
    def written_scores(self) -> Any:
        """The live reader's ``written_scores``, as ``embed``."""
        live = self._live_or_none()
        return None if live is None else live.written_scores

    def _live_or_none(self) -> Reader | None:
        """The live reader, built now if this run may read live at all."""
        if self.cassette.mode == "none" or self._live_arg is None:
            return None
        return self._live_reader()

    def _live_reader(self) -> Reader:
        with self._build_lock:
            if self._live is None:
                assert self._live_arg is not None and not isinstance(self._live_arg, Reader)
                built = self._live_arg()
                if not isinstance(built, Reader):
                    raise ConfigurationError(
                        f"the reader factory of cassette reader {self.id!r} returned "
                        f"{type(built).__name__}, not a Reader"
                    )
                self._live = built
            if not self._live_loaded:  # readers that load lazily load before their first read
                self._live.load()
                self._live_loaded = True
            return self._live

    # -- reading ---------------------------------------------------------------------

    def _plan(
        self, requests: Sequence[ReadRequest]
    ) -> tuple[list[list[LabelRead] | None], list[int]]:
        mode = self.cassette.mode
        if mode in ("all", "passthrough"):
            if self._live_arg is None:
                raise ConfigurationError(
                    f"cassette {self.cassette.path} is in mode {mode!r}, which reads live, "
                    f"but reader {self.id!r} was given no reader; pass one (or a function "
                    "that builds one) to Cassette.reader"
                )
            return [None] * len(requests), list(range(len(requests)))
        answers = [self.cassette.lookup_read(self.id, r) for r in requests]
        missing = [i for i, a in enumerate(answers) if a is None]
        if missing and (mode == "none" or self._live_arg is None):
            why = (
                "Replay (mode 'none') reads no model."
                if mode == "none"
                else "No live reader was given to record it with."
            )
            raise self.cassette.read_miss(self.id, requests[missing[0]], why)
        return answers, missing

    def _merge(
        self,
        requests: Sequence[ReadRequest],
        answers: list[list[LabelRead] | None],
        missing: list[int],
        got: list[list[LabelRead]],
    ) -> list[list[LabelRead]]:
        """``answers`` with the live reads ``got`` of the ``missing`` ones, recorded."""
        if missing:
            live = self._live_reader()
            info = ReaderInfo(live.name, live.model, live.max_options)
            answered = [(requests[i], a) for i, a in zip(missing, got)]
            self.cassette.record_reads(self.id, info, answered)
            for i, answer in zip(missing, got):
                answers[i] = answer
        return [a for a in answers if a is not None]

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        answers, missing = self._plan(requests)
        got = self._live_reader().read([requests[i] for i in missing]) if missing else []
        return self._merge(requests, answers, missing, got)

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        answers, missing = self._plan(requests)
        got = await self._live_reader().aread([requests[i] for i in missing]) if missing else []
        return self._merge(requests, answers, missing, got)

    def _reads_live_from_the_start(self) -> bool:
        mode = self.cassette.mode
        live_run = mode in ("all", "passthrough") or (mode == "new" and self._recorded is None)
        return live_run and self._live_arg is not None

    def load(self) -> None:
        """Build and load the live reader when this run reads live from the start (a
        replay never loads a model; a miss in ``new`` mode loads it then)."""
        if self._reads_live_from_the_start():
            self._live_reader()

    def warmup(self) -> None:
        """``load()`` plus the live reader's own warm-up, when this run reads live."""
        if self._reads_live_from_the_start():
            self._live_reader().warmup()

    def close(self) -> None:
        """Close the live reader if this reader built it (a passed ``Reader`` stays the
        caller's)."""
        if self._live is not None and self._live is not self._live_arg:
            self._live.close()


class _Unrecorded(WrappingReader):
    """``CassetteReader.unrecorded()``: the same reader identity, reading live only."""

    inner: CassetteReader

    def __init__(self, of: CassetteReader) -> None:
        self.inner = of  # reading settings, cassette and teacher calls are the reader's

    embed = property(lambda self: self.inner.embed)
    written_scores = property(lambda self: self.inner.written_scores)

    def _live(self, requests: Sequence[ReadRequest]) -> Reader:
        of = self.inner
        if of.cassette.mode == "none" or of._live_arg is None:
            raise of.cassette.read_miss(
                of.id,
                requests[0],
                "It is a learning read of a labelled state, which only a live run makes.",
            )
        return of._live_reader()

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        return self._live(requests).read(requests)

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        return await self._live(requests).aread(requests)

    def close(self) -> None:
        """The live reader is the cassette reader's to close."""


__all__ = ["CassetteReader"]
