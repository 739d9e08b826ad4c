"""The HTTP side of ``RemoteReader`` (``Connection``): pooled clients, one POST, and
each status mapped to an answer, a retry or an error."""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any, NoReturn

import httpx

from agentbranch.core.errors import (
    ConfigurationError,
    InvalidReadError,
    ReaderError,
    ReaderTimeoutError,
)
from agentbranch.core.files import DuplicateKeyError, unique_object
from agentbranch.core.redact import redact_url
from agentbranch.engine.readers.remote.gate import Gate
from agentbranch.engine.readers.remote.masking import QuietURL, Redactor

__all__ = [
    "Connection",
    "RemoteRequestError",
    "RemoteUnavailableError",
    "Retry",
    "server_message",
]

#: Statuses worth another try: rate limited, or a gateway/backend not ready yet.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


class Retry(Exception):
    """An attempt worth another try (connection error, 429/502/503/504)."""

    def __init__(self, why: str, response: httpx.Response | None) -> None:
        super().__init__(why)
        self.response = response


class RemoteRequestError(ReaderError):
    """The server refused (4xx) or redirected (3xx) a request; not retried.
    ``status_code`` and ``server_message`` say why (for a redirect, where to)."""

    def __init__(self, message: str, *, status_code: int, server_message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.server_message = server_message


class RemoteUnavailableError(ReaderError):
    """The server could not be reached or stayed unavailable through every retry."""


def server_message(response: httpx.Response) -> str:
    """What the server said in an error response (vLLM's ``{"error": {"message"}}``,
    ``{"detail"}`` ..., else the start of the body)."""
    try:
        data = json.loads(response.content)
    except (ValueError, RecursionError):
        return response.text[:500] or response.reason_phrase
    if isinstance(data, Mapping):
        error = data.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        for key in ("message", "detail"):
            if data.get(key):
                return str(data[key])
    return str(data)[:500]


async def _client_holder(client: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    """Keeps a loop's client; ``asyncio.run`` closes open async generators on its own
    loop before closing it (``shutdown_asyncgens``), which closes the client there."""
    try:
        yield client
    finally:
        await client.aclose()


#: The most of an answer's body that is read (decoded); a decisions answer is a few KB,
#: so more is a wrong server, and reading on would only cost memory.
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class _Body:
    """A response body read chunk by chunk, refused once it passes ``MAX_ANSWER_BYTES``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > MAX_ANSWER_BYTES:
            raise ReaderError(
                f"{self.url} answered more than {MAX_ANSWER_BYTES // (1024 * 1024)} MiB; a "
                "decisions answer is a few KB: is base_url the vLLM server?"
            )

    def response(self, streamed: httpx.Response) -> httpx.Response:
        """``streamed`` with its body in memory: already decoded, so without the
        ``Content-Encoding`` and ``Content-Length`` of the encoded body."""
        headers = [
            (k, v)
            for k, v in streamed.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length")
        ]
        return httpx.Response(
            streamed.status_code,
            headers=headers,
            content=bytes(self.data),
            request=streamed.request,
            extensions=streamed.extensions,
        )


class Connection:
    """One reader's HTTP connection to its endpoint ``url`` (``self.url`` shows it
    masked): one pooled ``httpx.Client`` for the sync path, one ``httpx.AsyncClient`` per
    event loop (closed when that loop shuts down), and ONE in-flight limit (``Gate``) for
    them all. Redirects are not followed: they would resend the request and its
    credentials elsewhere."""

    def __init__(
        self,
        url: httpx.URL,
        *,
        headers: Mapping[str, str],
        redact: Redactor,
        timeout_s: float,
        connect_timeout_s: float,
        max_connections: int,
        verify: Any,
        transport: httpx.BaseTransport | None,
        async_transport: httpx.AsyncBaseTransport | None,
    ) -> None:
        #: The endpoint as shown in messages and ``repr``: query values masked (``***``).
        self.url = redact_url(str(url))
        # What requests go to: the real query string, printed as ``self.url``.
        self._request_url = QuietURL(url, self.url)
        self.redact = redact
        #: What every client of this connection is made with (but its transport).
        self._options: dict[str, Any] = {
            "headers": dict(headers),
            "timeout": httpx.Timeout(timeout_s, connect=connect_timeout_s, pool=None),
            "limits": httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            "verify": verify,
            "follow_redirects": False,  # a redirect is an error (status_error)
        }
        self._transport = transport
        self._async_transport = async_transport
        self._client: httpx.Client | None = None
        # One AsyncClient per event loop (a pool belongs to the loop it runs on), held by
        # an async generator so the loop closes it when it shuts down.
        self._aclients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncIterator[Any]]
        ] = weakref.WeakKeyDictionary()
        self._gate = Gate(max_connections)
        self._lock = threading.Lock()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ReaderError("this RemoteReader is closed; create a new one")

    def client(self) -> httpx.Client:
        """The pooled sync client (made on first use)."""
        with self._lock:
            self._check_open()
            if self._transport is None and self._async_transport is not None:
                # Silently connecting to the URL would bypass the transport given.
                raise ConfigurationError(
                    "this RemoteReader has an async_transport but no transport, and a sync "
                    f"read would connect to {self.url} itself. The engine's coalescer (on "
                    "by default) reads through the sync path on worker threads, for async "
                    "callers too: pass transport= as well, or use "
                    "DecisionEngine(reader, batching=False) with adecide only"
                )
            if self._client is None:
                self._client = httpx.Client(**self._options, transport=self._transport)
            return self._client

    async def aclient(self) -> httpx.AsyncClient:
        """The running event loop's pooled async client (made on first use there)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_open()
            held = self._aclients.get(loop)
            if held is not None:
                return held[0]
            client = httpx.AsyncClient(**self._options, transport=self._async_transport)
            holder = _client_holder(client)
            self._aclients[loop] = (client, holder)
        await holder.__anext__()  # registers the generator with this loop
        return client

    def close(self) -> None:
        """Refuse further requests and close the sync pool."""
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """``close``, and close the running loop's async client (other loops' clients
        close when their loop shuts down)."""
        held = self._aclients.get(asyncio.get_running_loop())
        self.close()
        if held is not None:
            await held[1].aclose()  # type: ignore[attr-defined]

    def _request(self, client: httpx.Client | httpx.AsyncClient, body: Any) -> httpx.Request:
        """The POST of ``body``; its URL prints with the query values masked
        (``QuietURL``: httpx logs ``str(request.url)``)."""
        request = client.build_request("POST", self._request_url, json=body)
        request.url = self._request_url
        return request

    def post(self, client: httpx.Client, body: Any) -> httpx.Response:
        """One POST of ``body`` through the gate: the response whatever its status, a
        ``Retry`` for a connection failure, ``ReaderTimeoutError`` for a read timeout.
        The body is read up to ``MAX_ANSWER_BYTES`` (decoded) and no further."""
        self._gate.acquire()
        try:
            response = client.send(self._request(client, body), stream=True)
            try:
                body = _Body(self.url)
                for chunk in response.iter_bytes():
                    body.add(chunk)
                return body.response(response)
            finally:
                response.close()
        except httpx.TransportError as e:
            self._failed(e)
        finally:
            self._gate.release()

    async def apost(self, client: httpx.AsyncClient, body: Any) -> httpx.Response:
        """``post`` on an event loop."""
        await self._gate.aacquire()
        try:
            response = await client.send(self._request(client, body), stream=True)
            try:
                body = _Body(self.url)
                async for chunk in response.aiter_bytes():
                    body.add(chunk)
                return body.response(response)
            finally:
                await response.aclose()
        except httpx.TransportError as e:
            self._failed(e)
        finally:
            self._gate.release()

    def _failed(self, error: httpx.TransportError) -> NoReturn:
        if isinstance(error, httpx.TimeoutException) and not isinstance(
            error, httpx.ConnectTimeout
        ):
            raise ReaderTimeoutError(
                f"{self.url} did not answer within the timeout ({self.redact(repr(error))}); "
                "raise timeout_s or check the server's load"
            ) from error
        raise Retry(self.redact(repr(error)), None)

    def answer(self, response: httpx.Response) -> Mapping[str, Any] | InvalidReadError:
        """The JSON object of a 2xx response; the ``InvalidReadError`` that stands for
        this request's reads when it is ambiguous (so it fails this request's caller
        only). Raises ``Retry`` when the status is worth another try, and the error for
        any other status or a body that is not a JSON object."""
        status = response.status_code
        if status in RETRY_STATUSES:
            raise Retry(f"HTTP {status}: {self.redact(server_message(response))}", response)
        if not 200 <= status < 300:
            raise self.status_error(response)
        try:
            data = json.loads(response.content, object_pairs_hook=unique_object)
        except DuplicateKeyError as e:
            # Which of the two values counts is a guess: never an answer.
            return InvalidReadError(
                f"{self.url} answered JSON that is ambiguous: the key "
                f"{self.redact(repr(e.args[0]))} appears twice in one object; the server or a "
                "proxy in between is faulty"
            )
        except RecursionError:
            raise ReaderError(
                f"{self.url} answered JSON nested too deeply to read; is base_url the vLLM server?"
            ) from None
        except ValueError:
            raise ReaderError(
                f"{self.url} answered with non-JSON content "
                f"({self.redact(response.text[:200])!r}); "
                "is base_url the vLLM server?"
            ) from None
        if not isinstance(data, (dict, Mapping)):  # dict (what JSON gives) before the ABC
            raise ReaderError(f"{self.url} answered with {type(data).__name__}, not an object")
        return data

    def status_error(self, response: httpx.Response) -> ReaderError:
        """The error for a status other than 2xx (retryable ones aside): a body that
        came with it is never taken as the answer."""
        status = response.status_code
        if 300 <= status < 400:
            where = redact_url(response.headers.get("location", "(no Location header)"))
            return RemoteRequestError(
                f"{self.url} redirected the read with HTTP {status} to {where}; redirects "
                "are not followed (they would resend the request and its credentials). "
                "Set base_url to the server's own URL.",
                status_code=status,
                server_message=f"redirect to {where}",
            )
        message = self.redact(server_message(response))
        if 400 <= status < 500:
            hint = {
                401: " Pass the server's key as api_key (or a valid token).",
                403: " The token lacks access to this InferenceService.",
                404: " Check base_url and model (the served model name).",
            }.get(status, " Fix the request; retrying will not help.")
            return RemoteRequestError(
                f"{self.url} refused the read with HTTP {status}: {message}.{hint}",
                status_code=status,
                server_message=message,
            )
        if status >= 500:
            return ReaderError(
                f"{self.url} failed the read with HTTP {status}: {message}. "
                "Check the server's logs (the engine may have died or run out of memory)."
            )
        return ReaderError(
            f"{self.url} answered HTTP {status}, not an answer (a 2xx status with a JSON "
            "body); is base_url the vLLM server?"
        )
