"""The reader protocol: a batch of ``ReadRequest`` in, one ``LabelRead`` per question out.

``Reader`` declares everything the engine, the coalescer and learning ask of a reader,
each with a default, so a reader overrides what it can do and nothing is probed.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from agentbranch.core.errors import ConfigurationError, ReaderError
from agentbranch.core.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.core.teacher_calls import TeacherCalls
from agentbranch.engine.readers.generation import Generator

__all__ = ["Reader", "WrappingReader", "require_reader"]

#: How many wrappers deep ``Reader.chain`` looks (a loop of wrappers ends there).
MAX_WRAPPERS = 16


class Reader(ABC):
    """Turns read requests into label reads, batched.

    Subclasses set ``name`` (the reader kind) and ``model`` (the served model id) and
    implement ``read``; ``max_options`` is the size of one read's label set (the engine
    splits larger questions). What a reader can do beyond reading is declared here with
    the default it gets:

    * ``coalesce_wait_s`` (0.002): the coalescer's quiet gap; 0 for a reader that
      batches again downstream. ``concurrent_batches`` (1): batches read at once.
      ``pipelined_batch`` (``None``): at most this many requests per read.
    * ``reading_settings()``: the settings that reshape its confidences (the reading
      fingerprint); ``reading_ignores`` names constructor arguments that do not.
    * ``inner`` (``None``): the reader this one reads through (``WrappingReader``).
    * ``unrecorded()`` (itself): the reader for reads no recorded run holds.
    * ``teacher_calls`` and ``cassette`` (``None``): the replay recording it reads through.
    * ``embed(texts)`` and ``written_scores(vectors, spec)`` (``None``): what learning
      fits heads with (``EmbeddedReader``).
    * ``generator()`` (``None``): generations on its own model, for ``LocalChatModel.on``.
    """

    name: str = "reader"
    model: str = "unknown"
    max_options: int = 26
    coalesce_wait_s: float = 0.002
    concurrent_batches: int = 1
    pipelined_batch: int | None = None
    reading_ignores: tuple[str, ...] = ()
    inner: Reader | None = None
    teacher_calls: TeacherCalls | None = None
    cassette: Any = None
    embed: Callable[[Sequence[str]], Any] | None = None
    written_scores: Callable[[Any, QuestionSpec], Any] | None = None

    @abstractmethod
    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        """Read every request; ``result[i][j]`` answers ``requests[i].questions[j]``.
        ``result[i]`` may instead be the ``ReaderError`` request ``i`` failed with: the
        engine raises it for that request's caller only."""

    def read_each(
        self,
        requests: Sequence[ReadRequest],
        deliver: Callable[[int, list[LabelRead] | BaseException], None],
    ) -> None:
        """Read every request and hand request ``i``'s reads (or the error it failed
        with) to ``deliver(i, reads)``; the coalescer reads through this. By default one
        ``read`` of the whole batch; a reader whose requests finish apart overrides it
        to deliver each the moment it is answered."""
        reads = self.read(requests)
        if len(reads) != len(requests):
            raise ReaderError(
                f"reader {self.name!r} answered {len(reads)} of {len(requests)} batched requests"
            )
        for index, request_reads in enumerate(reads):
            deliver(index, request_reads)

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        """Async ``read``; by default ``read`` in a worker thread."""
        return await asyncio.to_thread(self.read, requests)

    def load(self) -> None:
        """Load the model if it is loaded lazily (idempotent); the engine calls it before
        the first read, outside ``latency_s``."""

    def warmup(self) -> None:
        """``load()`` plus the one-off work a first read would pay (a first forward)."""
        self.load()

    def close(self) -> None:
        """Release held resources (engines, HTTP pools). Idempotent."""

    def reading_settings(self) -> dict[str, Any]:
        """The settings that reshape this reader's confidences, where they differ from the
        default: every constructor argument with a default that the reader holds under
        the same name, but those in ``reading_ignores`` (a setting nobody declared
        counts: a wasted restart of learning at worst, never a threshold earned on
        another scale). A value that is not plain data counts by its type."""
        try:
            params = inspect.signature(type(self).__init__).parameters
        except (TypeError, ValueError):
            return {}
        out: dict[str, Any] = {}
        for name, param in params.items():
            if (
                param.default is inspect.Parameter.empty
                or param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)
                or name in self.reading_ignores
                or name not in vars(self)
            ):
                continue
            value = vars(self)[name]
            try:
                same = bool(value == param.default)
            except Exception:  # noqa: BLE001 - an odd value counts as changed
                same = False
            if not same:
                kind = type(value)
                out[name] = value if is_plain(value) else f"<{kind.__module__}.{kind.__qualname__}>"
        return out

    def unrecorded(self) -> Reader:
        """This reader for reads that are no part of a recorded run (a learning
        version's trial reads). Default: itself."""
        return self

    def generator(self, *, timeout_s: float | None = None) -> Generator | None:
        """Generations on this reader's own model (served as a chat model by
        ``LocalChatModel.on``), or ``None``: by default a reader cannot generate.
        ``timeout_s``: a generation that waits longer raises, where supported."""
        return None

    def chain(self) -> Iterator[Reader]:
        """This reader, then each reader it reads through (``inner``), outermost first
        (at most ``MAX_WRAPPERS``)."""
        reader: Reader | None = self
        for _ in range(MAX_WRAPPERS):
            if reader is None:
                return
            yield reader
            reader = reader.inner

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_plain(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def require_reader(reader: object, what: str = "reader") -> None:
    """``ConfigurationError`` unless ``reader`` is a ``Reader`` (the engine uses what the
    base class declares)."""
    if not isinstance(reader, Reader):
        raise ConfigurationError(
            f"{what} must be an agentbranch Reader (TransformersReader, RemoteReader, "
            f"EmbeddedReader, ScriptedReader ...), got {type(reader).__name__}; a reader "
            "of your own subclasses agentbranch.Reader (it declares what the engine asks "
            "of a reader, with defaults) and implements read()"
        )


class WrappingReader(Reader):
    """A reader in front of another (the coalescer, fault injection): it answers with the
    wrapped reader's identity and forwards loading, warm-up and closing to it. Subclasses
    set ``self.inner`` and implement ``read``."""

    inner: Reader

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def model(self) -> str:  # type: ignore[override]
        return self.inner.model

    @property
    def max_options(self) -> int:  # type: ignore[override]
        return self.inner.max_options

    def load(self) -> None:
        self.inner.load()

    def warmup(self) -> None:
        self.inner.warmup()

    def close(self) -> None:
        self.inner.close()
