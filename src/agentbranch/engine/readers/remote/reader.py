"""``RemoteReader`` itself: its settings, and one request's way from body to reads.

One HTTP request per ``ReadRequest``; a batch's requests go out concurrently (a thread
pool, or ``asyncio.gather``). Failures stay per request: the error of one request (invalid
answer, timeout, refusal, unavailable) stands in place of its reads alone.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from typing import Any

import httpx

from agentbranch.core.errors import ConfigurationError, InvalidReadError, ReaderError
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine.readers.base import Reader
from agentbranch.engine.readers.remote.apis import APIS, DIALECTS, endpoint
from agentbranch.engine.readers.remote.masking import Redactor
from agentbranch.engine.readers.remote.spec import SPEC_MAX_OPTIONS
from agentbranch.engine.readers.remote.transport import Connection, RemoteUnavailableError, Retry
from agentbranch.engine.readers.remote.wire import DEFAULT_MAX_OPTIONS

__all__ = ["RemoteReader"]

#: One request's reads, or the ``ReaderError`` that stands for them.
_Reads = list[LabelRead] | ReaderError


class RemoteReader(Reader):
    """A ``Reader`` over a vLLM ``/v1/systemone`` (or ``/v1/decisions``) server, or a
    server that speaks the published System One spec (``dialect="spec"``).

    Args:
        base_url: the server, e.g. ``http://localhost:8000`` or a KServe
            InferenceService URL; the API's path is joined to its path (unless it ends in
            it) and its query string kept. ``user:password@`` in it is sent as HTTP Basic
            auth; ``reader.url`` and every message show it with secrets masked (``***``).
        model: the served model name to ask for (vLLM's ``--served-model-name``);
            ``None`` lets a vLLM server use its only model (``/v1/systemone`` only: a
            Decisions request and a spec request must name it).
        dialect: what the server's ``/v1/systemone`` answers mean: ``"vllm"`` (the
            default) or ``"spec"``, the published System One spec's (``model`` required,
            up to 255 options in one read, label mass unknown: ``None``; docs/vllm.md).
        api: ``"systemone"`` (vLLM ≥ 0.32) or ``"decisions"`` (vLLM ≥ 0.33's OpenAI-style
            Decisions API; sends ``joint`` for joint reads on DiffusionGemma).
        max_options: the most options the server labels in one read (default 26 for
            vLLM, 255 for a spec server, whose larger choices are refused, not split).
        extra_body: merged into every request body (``cache_salt``, ``priority`` ...;
            ``/v1/decisions`` knows only ``cache_salt`` and ``safety_identifier``).
        api_key: sent as ``Authorization: Bearer <api_key>`` (vLLM ``--api-key``,
            OpenShift AI token authentication).
        headers: extra HTTP headers on every request.
        timeout_s: read/write timeout of one HTTP attempt; ``connect_timeout_s`` for
            connecting.
        max_connections: HTTP pool size and the most requests in flight at once, for
            the whole reader (every thread and event loop together).
        verify: TLS verification (``False``, a CA bundle path, or an ``ssl.SSLContext``).
        transport / async_transport: custom httpx transports. The engine's coalescer
            reads through ``read`` on worker threads, for async callers too: an
            ``async_transport`` without a ``transport`` is refused there.
        max_retries: further attempts after a transient failure (connection error, 429,
            502, 503, 504); ``backoff_s`` doubles per attempt up to ``max_backoff_s``
            (with jitter; a ``Retry-After`` header is honoured up to that cap).
    """

    name = "remote"
    #: The server batches concurrent requests itself: send each read at once.
    coalesce_wait_s = 0.0

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        dialect: str = "vllm",
        api: str = "systemone",
        max_options: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        max_connections: int = 32,
        verify: Any = True,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
        max_retries: int = 3,
        backoff_s: float = 0.25,
        max_backoff_s: float = 4.0,
    ) -> None:
        if max_retries < 0 or max_connections < 1 or timeout_s <= 0:
            raise ConfigurationError(
                "max_retries must be >= 0, max_connections >= 1 and timeout_s > 0"
            )
        if api not in APIS:
            raise ConfigurationError(f"api must be one of {sorted(APIS)}, got {api!r}")
        if api == "decisions" and not model:
            raise ConfigurationError(
                "api='decisions' needs model=...: a Decisions request names the served model"
            )
        if dialect not in DIALECTS:
            raise ConfigurationError(
                f"dialect must be one of {sorted(DIALECTS)}, got {dialect!r}: 'vllm' for a "
                "vLLM server, 'spec' for a server that speaks the published System One spec"
            )
        if max_options is None:
            max_options = SPEC_MAX_OPTIONS if dialect == "spec" else DEFAULT_MAX_OPTIONS
        if dialect == "spec":
            if api != "systemone":
                raise ConfigurationError(
                    "dialect='spec' is a /v1/systemone dialect; api='decisions' is vLLM's only"
                )
            if not model:
                raise ConfigurationError(
                    "dialect='spec' needs model=...: a System One spec request names its "
                    "model (e.g. model='jev-latest'; or set AGENTBRANCH_REMOTE_MODEL)"
                )
            if not 2 <= max_options <= SPEC_MAX_OPTIONS:
                raise ConfigurationError(
                    f"max_options must be in [2, {SPEC_MAX_OPTIONS}] for dialect='spec', got "
                    f"{max_options!r}"
                )
            if extra_body and "instructions" in extra_body:
                raise ConfigurationError(
                    "dialect='spec': a System One spec request has no top-level "
                    "'instructions' (a server ignores it, or refuses the request); pass them "
                    "as DecisionEngine(instructions=...), which go first in every question's"
                )
        self.api = api
        self.dialect = dialect
        self._api = DIALECTS[dialect] if api == "systemone" else APIS[api]
        url, basic = endpoint(base_url, api)
        if basic and api_key:
            raise ConfigurationError(
                "base_url carries credentials (user:password@) and api_key is set too; "
                "give the credentials once"
            )
        self.requested_model = model
        self.model = model or "unknown"
        self.max_options = max_options
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.extra_body = dict(extra_body or {})
        # No content-type here: every post sends json=, for which httpx sets it.
        headers = dict(headers or {})
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        elif basic:
            headers["authorization"] = basic
        self._redact = Redactor(headers, api_key, base_url)
        self._connection = Connection(
            url,
            headers=headers,
            redact=self._redact,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            max_connections=max_connections,
            verify=verify,
            transport=transport,
            async_transport=async_transport,
        )
        #: The endpoint as shown in messages and ``repr``: query values masked (``***``).
        self.url = self._connection.url
        # Its threads start on first use.
        self._pool = ThreadPoolExecutor(max_connections, thread_name_prefix="agentbranch-remote")
        #: The coalescer's batches in flight: the server batches requests itself.
        self.concurrent_batches = max_connections

    def _body(self, request: ReadRequest) -> dict[str, Any]:
        for q in request.questions:
            if len(q.options) > self.max_options:
                raise ConfigurationError(
                    f"question {q.id!r} has {len(q.options)} options in one read; the "
                    f"server labels at most {self.max_options}. Build the reader with the "
                    "server's limit as max_options so the engine splits the question."
                )
        return self._api.build(request, model=self.requested_model, extra=self.extra_body)

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        """The wait after failed attempt ``attempt`` (0 for the first): ``backoff_s ×
        2^attempt`` capped at ``max_backoff_s``, with jitter (50-100 %); a ``Retry-After``
        header on ``response`` lengthens it, up to the cap."""
        delay = min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + random.random() / 2)
        after = None if response is None else response.headers.get("retry-after")
        try:
            return delay if after is None else min(self.max_backoff_s, max(delay, float(after)))
        except ValueError:
            return delay

    def _reads(self, request: ReadRequest, response: httpx.Response) -> _Reads:
        """One attempt's reads, or the ``InvalidReadError`` that stands for them when the
        answer is invalid (so it fails this request's caller only). Raises ``Retry`` when
        the attempt is worth another try."""
        data = self._connection.answer(response)
        if isinstance(data, InvalidReadError):
            return data
        if isinstance(data.get("model"), str) and self.requested_model is None:
            self.model = data["model"]
        try:
            return self._api.parse(request, data)
        except ReaderError as e:  # the server's answer is quoted: it may echo a secret
            error = type(e)(self._redact(str(e)))
            if isinstance(error, InvalidReadError):
                return error  # in place of this request's reads; the engine raises it
            raise error from None

    def _wait(self, attempt: int, failed: Retry) -> float:
        """The wait after ``failed``, attempt number ``attempt`` (0 for the first);
        ``RemoteUnavailableError`` when it was the last."""
        if attempt == self.max_retries:
            raise RemoteUnavailableError(
                f"{self.url} is unavailable after {attempt + 1} attempts ({failed}). "
                "Check that the server is up and reachable, or raise max_retries."
            ) from None
        return self._delay(attempt, failed.response)

    def _read_one(self, client: httpx.Client, request: ReadRequest) -> _Reads:
        if not request.questions:
            return []
        body = self._body(request)
        for attempt in itertools.count():
            try:
                return self._reads(request, self._connection.post(client, body))
            except Retry as e:
                time.sleep(self._wait(attempt, e))
        raise AssertionError("unreachable")

    async def _aread_one(self, client: httpx.AsyncClient, request: ReadRequest) -> _Reads:
        if not request.questions:
            return []
        body = self._body(request)
        for attempt in itertools.count():
            try:
                return self._reads(request, await self._connection.apost(client, body))
            except Retry as e:
                await asyncio.sleep(self._wait(attempt, e))
        raise AssertionError("unreachable")

    def _read_or_error(self, client: httpx.Client, request: ReadRequest) -> _Reads:
        """``_read_one``, with a ``ReaderError`` (timeout, unavailable, refused) returned
        in place of the reads: it fails this request's caller alone."""
        try:
            return self._read_one(client, request)
        except ReaderError as e:
            return e

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        requests = list(requests)
        client = self._connection.client()
        if len(requests) <= 1:  # one request: its error is raised, as the only one
            return [self._read_one(client, r) for r in requests]
        futures = [self._pool.submit(self._read_or_error, client, r) for r in requests]
        return [f.result() for f in futures]  # type: ignore[misc]

    def read_each(
        self,
        requests: Sequence[ReadRequest],
        deliver: Callable[[int, list[LabelRead] | BaseException], None],
    ) -> None:
        """``read``, handing each request's reads (or the error that stands for them)
        to ``deliver`` as soon as its own answer arrives: one HTTP request per request,
        none sent twice, none waiting on another."""
        requests = list(requests)
        client = self._connection.client()
        if len(requests) == 1:
            deliver(0, self._read_or_error(client, requests[0]))
            return

        def one(index: int, request: ReadRequest) -> None:
            # Delivered from the request's own thread, before its future completes.
            try:
                outcome: _Reads | BaseException = self._read_one(client, request)
            except BaseException as e:  # noqa: BLE001 - handed to that request's caller
                outcome = e
            deliver(index, outcome)

        wait_all([self._pool.submit(one, i, r) for i, r in enumerate(requests)])

    async def _aread_or_error(self, client: httpx.AsyncClient, request: ReadRequest) -> _Reads:
        try:
            return await self._aread_one(client, request)
        except ReaderError as e:
            return e

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        client = await self._connection.aclient()
        if len(requests) == 1:
            return [await self._aread_one(client, requests[0])]
        return list(  # type: ignore[arg-type]
            await asyncio.gather(*(self._aread_or_error(client, r) for r in requests))
        )

    async def aclose(self) -> None:
        """Close the HTTP pools; the running loop's async client is closed here, other
        loops' clients when their loop shuts down."""
        self.close()
        await self._connection.aclose()

    def close(self) -> None:
        self._connection.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def reading_settings(self) -> dict[str, Any]:
        """None: the server's settings shape its reads; none of the client's arguments does."""
        return {}

    def __repr__(self) -> str:
        dialect = f", dialect={self.dialect!r}" if self.dialect != "vllm" else ""
        return f"RemoteReader({self.url!r}, model={self.model!r}, api={self.api!r}{dialect})"
