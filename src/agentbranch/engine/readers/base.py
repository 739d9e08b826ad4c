"""The reader protocol: a batch of ``ReadRequest`` in, one ``LabelRead`` per question out.

Readers know nothing of LangGraph, policies or decisions. ``Reader`` declares everything
the engine, the coalescer and learning ask of a reader, each with a default, so a reader
overrides what it can do and nothing is probed. ``ScriptedReader`` is the mock transport
for tests of the layers above.
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

__all__ = ["Reader", "WrappingReader", "require_reader"]

#: How many wrappers deep ``Reader.chain`` looks (a loop of wrappers ends there).
MAX_WRAPPERS = 16


class Reader(ABC):
    """Turns read requests into label reads, batched.

    Subclasses set ``name`` (the reader kind, e.g. ``"transformers"``) and ``model``
    (the served model id), and implement ``read``. ``aread`` defaults to running
    ``read`` in a worker thread; readers with a native async path override it.
    ``max_options`` is how many options one question read may carry (the size of the
    label set); the engine splits larger questions into several reads.

    What a reader can do beyond reading is declared here, with the default a reader
    that does not override it gets:

    * ``coalesce_wait_s`` (0.002): the coalescer's default quiet gap for a burst;
      0 for a reader that batches again downstream (a server).
    * ``concurrent_batches`` (1): batches the coalescer reads at once.
    * ``pipelined_batch`` (``None``): at most this many requests per read when the
      reader reads best in parts.
    * ``reading_settings()``: the settings that reshape its confidences (the reading
      fingerprint, ``agentbranch.engine.engine``). By default every constructor
      argument with a default that the reader holds under the same name and that
      differs from that default, but those named in ``reading_ignores`` (``()``), the
      arguments that do not reshape confidences (timeouts, devices, batch sizes). A
      changed setting changes ``Decision.reading``, and ``Earned`` starts learning
      again: a setting nobody declared counts (a wasted restart at worst), never the
      reverse (a threshold earned on another scale).
    * ``inner`` (``None``): the reader this one reads through (``WrappingReader``).
    * ``unrecorded()`` (the reader itself): the reader for reads that are no part of a
      recorded run (``CassetteReader``).
    * ``teacher_calls`` and ``cassette`` (``None``): the replay recording this reader
      reads through, for a policy's teacher calls and earned thresholds.
    * ``embed`` and ``written_scores`` (``None``): functions learning fits heads with,
      ``embed(texts) -> vectors`` and ``written_scores(vectors, spec) -> scores``
      (``EmbeddedReader``).
    * ``generator()`` (``None``): generations on the reader's own model, which
      ``LocalChatModel.on(reader)`` serves as a LangChain chat model (``VLLMReader``,
      ``TransformersReader``).
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
        """Read every request and hand request ``i``'s reads to ``deliver(i, reads)``;
        ``reads`` may be the error that request failed with (it fails that request's
        caller alone). The coalescer reads through this. By default one ``read`` of the
        whole batch, then each request's reads in order (what ``read`` raises, this
        raises). A reader whose requests finish apart (a server, one HTTP request each)
        overrides it to deliver each request the moment it is answered."""
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
        """Load the model if it is loaded lazily (idempotent). The engine calls it before
        the first read, outside ``latency_s``. Default: nothing to load."""

    def warmup(self) -> None:
        """``load()`` plus the one-off work a first read would pay (a first forward).
        ``DecisionEngine.warmup()`` / ``DecisionEngine(eager=True)`` call it."""
        self.load()

    def close(self) -> None:
        """Release held resources (engines, HTTP pools). Idempotent."""

    def reading_settings(self) -> dict[str, Any]:
        """The settings that reshape this reader's confidences, with their values, where
        they differ from the default: every constructor argument with a default that the
        reader holds under the same name, except those named in ``reading_ignores``. So
        a reader (or a subclass) that declares nothing still starts learning again when
        one of its settings changes; a reader holding a setting under another name
        overrides this. A value that is not plain data counts by its type (its ``repr``
        may name a memory address, new in every process)."""
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
                out[name] = value if _is_plain(value) else _type_of(value)
        return out

    def unrecorded(self) -> Reader:
        """This reader for reads that are no part of a recorded run (a learning
        version's trial reads, ``DecisionEngine.unrecorded``). Default: itself."""
        return self

    def generator(self, *, timeout_s: float | None = None) -> Any:
        """Generations on this reader's own model (``agentbranch.integrations.local_chat``
        wraps them in a chat model), or ``None``: by default a reader cannot generate.
        ``timeout_s``: a generation that waits longer raises, where the reader supports it."""
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


def _is_plain(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _type_of(value: Any) -> str:
    kind = type(value)
    return f"<{kind.__module__}.{kind.__qualname__}>"


def require_reader(reader: object, what: str = "reader") -> None:
    """``ConfigurationError`` unless ``reader`` is a ``Reader``: the engine and the
    coalescer use what the base class declares, so a reader must subclass it."""
    if not isinstance(reader, Reader):
        raise ConfigurationError(
            f"{what} must be an agentbranch Reader (TransformersReader, RemoteReader, "
            f"EmbeddedReader, ScriptedReader ...), got {type(reader).__name__}; a reader "
            "of your own subclasses agentbranch.Reader (it declares what the engine asks "
            "of a reader, with defaults) and implements read()"
        )


class WrappingReader(Reader):
    """A reader in front of another (the coalescer, fault injection): it answers with the
    wrapped reader's identity and forwards loading, warm-up and closing to it.

    Subclasses set ``self.inner`` and implement ``read``."""

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
