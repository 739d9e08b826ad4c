"""``RemoteReader``: reads from a vLLM server over HTTP, through its ``/v1/systemone``
endpoint (vLLM ≥ 0.32, the default) or its ``/v1/decisions`` endpoint (vLLM ≥ 0.33,
``api="decisions"``, the only one with joint reads).

The scale-out path: many agent workers share one vLLM deployment (KServe / OpenShift AI)
and send it System One requests (docs/design.md, "Wire types")::

    POST {base_url}/v1/systemone
    {"model", "state", "instructions", "questions": {id: {"type", "instructions", "criteria"}}}
    -> {"model", "answers": {id: {...}}, "usage", "diagnostics": {id: {"label_mass", ...}}}

or Decisions requests (vLLM 0.33's ``entrypoints/openai/decisions/protocol.py``)::

    POST {base_url}/v1/decisions
    {"model", "input", "questions": [{"type": "choice"|"score", "name", "instructions",
     "choices": [{"value", "description"}] | "levels": [{"label", "description"}]}],
     "joint"}
    -> {"model", "answers": [{"type", "name", "probabilities": [...], "confidence"}], "usage"}

One HTTP request per ``ReadRequest`` (all its questions); the requests of a batch go out
concurrently (``aread``: ``asyncio.gather`` on one pooled ``httpx.AsyncClient`` per event
loop, closed when that loop shuts down; ``read``: a thread pool on one pooled
``httpx.Client``), under ONE in-flight limit (``max_connections``) for the whole reader. Only the body and the answers differ per
API (``_Api``); the HTTP, retry and error handling are shared. The server builds the
prompts itself (vLLM's question types), so on ``/v1/systemone`` the same state and
questions give the same decisions as ``VLLMReader`` on the same model.

**How answers become ``LabelRead``s** (``remote_answers``). The server returns label
probabilities renormalised over the labels (``p_i``), not logprobs. ``label_mass`` (the
labels' total probability over the full vocabulary) comes from the response's
``diagnostics`` when the server sends them (vLLM's ``/v1/systemone`` does), else from
``confidence / p_top`` (vLLM's confidence is ``p_top × label_mass``), else 1.0, and is
never above the mass the probabilities themselves imply (their sum, when it is below 1).
The reader reports ``logprobs[i] = log(p_i × label_mass)``: the label's full-vocabulary
log probability, as model readers report it, so reads of a choice split into chunks or
read in several option orders combine the way they do for local readers. The engine
renormalises, so a single read's decision gets exactly the server's ``p_i``.
``argmax_is_label`` comes from ``diagnostics`` (True when absent). ``draws`` is ignored;
``joint`` is sent only to ``/v1/decisions``.

**``/v1/decisions`` mapping** (what vLLM 0.33 does with it, see ``adapters.py`` there):

* choice → ``choices`` (string values; vLLM shows each as its JSON text, ``A: "billing"``);
  score → ``levels`` (vLLM letters them ``A``, ``B`` ... like options, not ``0``-``9``);
  yes/no → a choice of the values ``false`` and ``true`` (with the yes/no descriptions).
  vLLM reads a ``predicate`` as exactly that choice (``A: false``, ``B: true``), but its
  predicate answer has no ``confidence`` and so no label mass, and a predicate has no
  place for descriptions; the boolean choice gives the same prompt and both.
  So the server's wording differs from ``/v1/systemone``'s and the local readers'
  (``yes``/``no``, ``0``-``9``, bare option names): same model, slightly other prompts.
* The request has no system/instructions field (and forbids unknown fields): a
  ``ReadRequest``'s instructions go first in ``input``, as a user message before the
  state (vLLM joins the messages with a blank line into the one user turn).
* ``joint`` is sent when the request asks for it; vLLM refuses it (400) for models other
  than DiffusionGemma.

**URL.** The API path is joined to ``base_url``'s path (``http://gw/llm?token=T`` posts
to ``http://gw/llm/v1/systemone?token=T``: the query string is kept on every request);
a ``base_url`` that already ends in the API's path is used as is.

**Errors.** Connection failures, 429, 502, 503 and 504 are retried (tenacity) with
exponential backoff (``Retry-After`` honoured, capped), at most ``max_retries`` times; then
``RemoteUnavailableError``. Other 4xx raise ``RemoteRequestError`` carrying the status
and the server's own message (wrong model name, too many options, ...). A redirect (3xx)
is not followed (it would resend the request and its credentials elsewhere) and raises
``RemoteRequestError`` naming the status and where it pointed; only a 2xx body is ever
read as an answer. A read that times out raises ``ReaderTimeoutError``.

**Invalid answers** (the rules in full: ``remote_answers``). The answers are read through
strict pydantic models: every probability, ``confidence`` and ``label_mass`` is a JSON
number (not a string, a bool or a null), finite, in [0, 1]; ``argmax_is_label`` a JSON
boolean; a ``/v1/decisions`` score level a JSON integer (``0.2``, ``1.9``, ``true`` are
errors, not truncated). One probability per option the question has (none missing,
extra or twice), summing to at most 1; a sum of (almost) nothing (``NO_SIGNAL``) is no
answer. A JSON object that repeats a key is refused. Anything else is an
``InvalidReadError`` (a ``ReaderError``) for that request: a NaN or ``-0.9`` never
becomes a decision. ``read``/``aread`` return it in place of that request's reads (the
engine raises it for that request's caller), so one bad answer in a shared batch does
not fail the other requests of the batch.

**Secrets.** Credentials in the URL (``http://user:key@host``) are sent as HTTP Basic
auth and never kept in ``reader.url``, which also shows every query-string value as
``***`` (``http://gw/llm/v1/systemone?token=***``). The API key, the URL's user name,
password and query values (whatever their length) and the values of
``Authorization``-like headers are replaced by ``***`` in every exception message
(server messages that echo them included). httpx logs each request's URL at INFO on
the ``"httpx"`` logger (``HTTP Request: POST <url> ...``, formatted with ``str``); the
reader's requests carry a URL that prints masked (``_QuietURL``) while the request line
sent is built from its real parts, so those log lines show ``token=***`` without the
reader touching any logging configuration.

Over 500 lines: the answers' wire format is already in remote_answers.py; request
building, retries and the sync/async transports still share this file until the planned
layout restructuring splits them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import httpx
import tenacity

from agentbranch.engine.readers.base import Reader
from agentbranch.engine.readers.remote.answers import (
    DuplicateKeyError,
    decode_json,
    parse_answers,
    parse_decisions_answers,
    question_keys,
)
from agentbranch.engine.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.errors import (
    ConfigurationError,
    InvalidReadError,
    ReaderError,
    ReaderTimeoutError,
)
from agentbranch.question_examples import instructions_with_examples
from agentbranch.redact import MASK, redact_url, url_secrets

__all__ = [
    "RemoteReader",
    "RemoteRequestError",
    "RemoteUnavailableError",
    "build_decisions_payload",
    "build_payload",
    "parse_answers",
    "parse_decisions_answers",
]

#: Statuses worth another try: rate limited, or a gateway/backend not ready yet.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: vLLM labels a choice's options A..Z, so one read takes at most 26 options.
DEFAULT_MAX_OPTIONS = 26
DEFAULT_PATH = "/v1/systemone"
DECISIONS_PATH = "/v1/decisions"
#: ``isinstance`` against this checks ``dict`` (what JSON gives) before the slower ABC.
_MAPPING = (dict, Mapping)


class RemoteRequestError(ReaderError):
    """The server refused (4xx) or redirected (3xx) a request; not retried.
    ``status_code`` and ``server_message`` say why (for a redirect, where to)."""

    def __init__(self, message: str, *, status_code: int, server_message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.server_message = server_message


class RemoteUnavailableError(ReaderError):
    """The server could not be reached or stayed unavailable through every retry."""


# --------------------------------------------------------------------------- wire


def _asked(q: QuestionSpec) -> str:
    """The instructions sent: examples (if any) as few-shot lines, as canvas reads."""
    return instructions_with_examples(q.instructions, q.options, q.examples)


def _criteria(q: QuestionSpec) -> Any:
    """The System One ``criteria`` of a question read."""
    if q.type == "noul":
        sides = {
            key: desc for key, desc in zip(("true", "false"), q.descriptions) if desc is not None
        }
        return sides or None
    if q.type == "choice":
        return dict(zip(q.options, q.descriptions))
    if q.type == "score":
        return list(q.options)
    raise ConfigurationError(
        f"question {q.id!r} has type {q.type!r}; a /v1/systemone server answers choice, "
        "noul and score questions"
    )


def build_payload(
    request: ReadRequest, *, model: str | None = None, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``/v1/systemone`` JSON body for one ``ReadRequest``."""
    questions: dict[str, Any] = {}
    for key, q in zip(question_keys(request.questions), request.questions):
        spec: dict[str, Any] = {"type": q.type, "instructions": _asked(q)}
        criteria = _criteria(q)
        if criteria is not None:
            spec["criteria"] = criteria
        questions[key] = spec
    body: dict[str, Any] = {"state": request.state, "questions": questions}
    if model:
        body["model"] = model
    if request.instructions:
        body["instructions"] = request.instructions
    if extra:
        body.update(extra)
    return body


# ------------------------------------------------------------- /v1/decisions (0.33)


def _decision_question(key: str, q: QuestionSpec) -> dict[str, Any]:
    """One question of a ``/v1/decisions`` request (vLLM 0.33's ``DecisionQuestion``)."""
    if q.type == "noul":
        # vLLM reads a predicate as the choice [false, true]; as that choice it keeps
        # the descriptions and its answer carries a confidence (the label mass).
        yes, no = q.descriptions
        values: list[tuple[Any, str | None]] = [(False, no), (True, yes)]
        field, key_name = "choices", "value"
    elif q.type == "choice":
        values = list(zip(q.options, q.descriptions))
        field, key_name = "choices", "value"
    elif q.type == "score":
        values = list(zip(q.options, q.descriptions))
        field, key_name = "levels", "label"
    else:
        raise ConfigurationError(
            f"question {q.id!r} has type {q.type!r}; a /v1/decisions server answers "
            "choice, noul and score questions"
        )
    items = [{key_name: v, **({"description": d} if d else {})} for v, d in values]
    kind = "score" if q.type == "score" else "choice"
    return {"type": kind, "name": key, "instructions": _asked(q), field: items}


def build_decisions_payload(
    request: ReadRequest, *, model: str | None = None, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``/v1/decisions`` JSON body for one ``ReadRequest`` (vLLM 0.33)."""
    if not model:
        raise ConfigurationError("a /v1/decisions request names its model; pass model=...")
    if request.instructions:
        # No system field: the instructions go first in the user turn.
        input_: Any = [
            {"role": "user", "content": request.instructions},
            {"role": "user", "content": request.state},
        ]
    else:
        input_ = request.state
    body: dict[str, Any] = {
        "model": model,
        "input": input_,
        "questions": [
            _decision_question(key, q)
            for key, q in zip(question_keys(request.questions), request.questions)
        ],
    }
    if request.joint:
        body["joint"] = True
    if extra:
        body.update(extra)
    return body


class _Api(NamedTuple):
    """What differs between the endpoints: the path, the body and the answers."""

    path: str
    build: Callable[..., dict[str, Any]]
    parse: Callable[[ReadRequest, Mapping[str, Any]], list[LabelRead]]


APIS = {
    "systemone": _Api(DEFAULT_PATH, build_payload, parse_answers),
    "decisions": _Api(DECISIONS_PATH, build_decisions_payload, parse_decisions_answers),
}


def _server_message(response: httpx.Response) -> str:
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
        if data.get("message"):
            return str(data["message"])
        if data.get("detail"):
            return str(data["detail"])
    return str(data)[:500]


# ------------------------------------------------------------------------ secrets

#: ``Bearer <token>`` / ``Basic <token>`` anywhere in a message.
_TOKEN = re.compile(r"(?i)\b(bearer\s+|basic\s+)[A-Za-z0-9._~+/=-]+")
_SENSITIVE_HEADER = re.compile(r"(?i)auth|key|token|secret|cookie|session|password")


class _QuietURL(httpx.URL):
    """The request URL, printed with its credentials masked (``redact_url``).

    httpx logs every request at INFO on the ``"httpx"`` logger as ``HTTP Request: POST
    <url> "HTTP/1.1 200 OK"``, formatting ``request.url`` with ``%s`` (``str``); its
    ``repr(request)`` prints ``str(request.url)`` too. The transports build the request
    line from the URL's parts (``raw_path`` keeps the real query), so with this URL on
    the request the server gets the query string and those lines print ``***`` in its
    values. Nothing in the process's logging configuration changes."""

    def __init__(self, url: httpx.URL, shown: str) -> None:
        super().__init__(url)
        self._shown = shown

    def __str__(self) -> str:
        return self._shown

    def __repr__(self) -> str:
        return f"URL({self._shown!r})"


def _endpoint(base_url: str, api: str) -> tuple[httpx.URL, str | None]:
    """The request URL (``base_url``'s path joined with the API's path, its query string
    kept; no userinfo, no fragment) and the ``Authorization: Basic`` value for
    ``base_url``'s userinfo (what httpx would send for it), if any."""
    try:
        parsed = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError, ValueError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigurationError(
            f"base_url {redact_url(base_url)!r} is not a valid http(s) URL like 'http://vllm:8000'"
        )
    api_path = APIS[api].path
    path, _, query = parsed.raw_path.partition(b"?")
    path = path.rstrip(b"/")
    other = [a.path for a in APIS.values() if a.path != api_path and path.endswith(a.path.encode())]
    if other:
        raise ConfigurationError(f"base_url ends in {other[0]}, which is not api={api!r}")
    if not path.endswith(api_path.encode()):
        path += api_path.encode()
    endpoint = parsed.copy_with(
        username=None,
        password=None,
        fragment=None,
        raw_path=path + (b"?" + query if query else b""),
    )
    if not parsed.userinfo:
        return endpoint, None
    token = base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode()
    return endpoint, f"Basic {token}"


def _secrets(headers: Mapping[str, str], api_key: str | None, base_url: str) -> list[str]:
    """Strings that must never appear in a message, whatever their length (longest
    first): the API key, the values of credential-like headers and the parts of their
    ``Basic`` tokens, and the URL's user name, password and query values."""
    found: set[str] = url_secrets(base_url)
    if api_key:
        found.add(api_key)
    for name, value in headers.items():
        if _SENSITIVE_HEADER.search(name) and value:
            found.add(value)
            scheme, _, token = value.partition(" ")
            if token:
                found.add(token)
                if scheme.lower() == "basic":
                    try:
                        found.update(base64.b64decode(token).decode().split(":", 1))
                    except ValueError:
                        continue
    found.discard("")
    return sorted(found, key=len, reverse=True)


# ------------------------------------------------------------- in-flight limit


class _Gate:
    """One in-flight limit shared by threads and event loops (``max_connections``).

    ``asyncio.Semaphore`` belongs to one loop and ``threading.Semaphore`` blocks a loop,
    so this keeps a count and a queue of waiters: a ``concurrent.futures.Future`` for a
    thread, an ``asyncio.Future`` (woken on its own loop) for a task. A released slot
    passes straight to the next waiter."""

    # An async waiter is ``[loop, future, handed_over, thread id of its loop]``.

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._used = 0
        self._waiters: deque[Future[None] | list[Any]] = deque()

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                if isinstance(waiter, Future):
                    if waiter.set_running_or_notify_cancel():
                        waiter.set_result(None)  # the slot passes to this thread
                        return
                    continue
                loop, future, thread = waiter[0], waiter[1], waiter[3]
                if future.cancelled() or loop.is_closed():
                    continue
                waiter[2] = True  # handed over; a task cancelled meanwhile gives it back
                if thread == threading.get_ident():
                    _wake(future)  # on the waiter's own thread: no wake-up write to its loop
                else:
                    loop.call_soon_threadsafe(_wake, future)
                return
            self._used -= 1

    def acquire(self) -> None:
        with self._lock:
            if self._used < self.limit:
                self._used += 1
                return
            waiter: Future[None] = Future()
            self._waiters.append(waiter)
        waiter.result()

    async def aacquire(self) -> None:
        with self._lock:
            if self._used < self.limit:
                self._used += 1
                return
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            entry: list[Any] = [loop, future, False, threading.get_ident()]
            self._waiters.append(entry)
        try:
            await future
        except asyncio.CancelledError:
            with self._lock:
                handed = entry[2]
            if handed:
                self.release()
            raise


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Retry(Exception):
    """An attempt worth another try (connection error, 429/502/503/504)."""

    def __init__(self, why: str, response: httpx.Response | None) -> None:
        super().__init__(why)
        self.why = why
        self.response = response


async def _client_holder(client: httpx.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    """Keeps a loop's client; ``asyncio.run`` closes open async generators on its own
    loop before closing it (``shutdown_asyncgens``), which closes the client there."""
    try:
        yield client
    finally:
        await client.aclose()


# ------------------------------------------------------------------------- reader


class RemoteReader(Reader):
    """A ``Reader`` over a vLLM ``/v1/systemone`` (or ``/v1/decisions``) server.

    Args:
        base_url: the server, e.g. ``http://localhost:8000`` or a KServe
            InferenceService URL; the API's path is joined to its path and its query
            string kept on every request; a URL that already ends in the API's path
            (``/v1/systemone``, ``/v1/decisions``) is used as is. ``user:password@`` in
            it is sent as HTTP Basic auth. ``reader.url`` and every message show it
            with the credentials and query values masked (``***``).
        model: the served model name to ask for (vLLM's ``--served-model-name``);
            ``None`` lets the server use its only model (``/v1/systemone`` only: a
            Decisions request must name it).
        api: ``"systemone"`` (vLLM ≥ 0.32) or ``"decisions"`` (vLLM ≥ 0.33's OpenAI-style
            Decisions API; sends ``joint`` for joint reads on DiffusionGemma).
        api_key: sent as ``Authorization: Bearer <api_key>`` (vLLM ``--api-key``,
            OpenShift AI token authentication).
        headers: extra HTTP headers on every request.
        timeout_s: read/write timeout of one HTTP attempt; ``connect_timeout_s`` for
            connecting.
        max_retries: further attempts after a transient failure (connection error, 429,
            502, 503, 504); ``backoff_s`` doubles per attempt up to ``max_backoff_s``
            (with jitter; a ``Retry-After`` header is honoured up to that cap).
        max_connections: HTTP pool size and the most requests in flight at once, for
            the whole reader (every thread and event loop together).
        max_options: the most options the server labels in one read (26 for vLLM).
        extra_body: merged into every request body (``cache_salt``, ``priority``,
            ``chat_template_kwargs`` ...; ``/v1/decisions`` refuses fields it does not
            know: ``cache_salt`` and ``safety_identifier`` only).
        verify: TLS verification (``False``, a CA bundle path, or an ``ssl.SSLContext``).
        transport / async_transport: custom httpx transports (tests use
            ``httpx.MockTransport``). The engine's coalescer (its default) reads on
            worker threads through ``read``, so async callers use ``transport`` too;
            an ``async_transport`` without a ``transport`` is refused on that path
            (``ConfigurationError``) rather than bypassed for a direct connection.
    """

    name = "remote"
    #: The server batches concurrent requests itself: send each read at once.
    coalesce_wait_s = 0.0

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api: str = "systemone",
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        max_retries: int = 3,
        backoff_s: float = 0.25,
        max_backoff_s: float = 4.0,
        max_connections: int = 32,
        max_options: int = DEFAULT_MAX_OPTIONS,
        extra_body: Mapping[str, Any] | None = None,
        verify: Any = True,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(base_url, str) or "://" not in base_url:
            raise ConfigurationError(
                "base_url must be an http(s) URL like 'http://vllm:8000', got "
                f"{redact_url(base_url)!r}"
            )
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
        self.api = api
        self._api = APIS[api]
        endpoint, basic = _endpoint(base_url, api)
        if basic and api_key:
            raise ConfigurationError(
                "base_url carries credentials (user:password@) and api_key is set too; "
                "give the credentials once"
            )
        #: The endpoint as shown in messages and ``repr``: query values masked (``***``).
        self.url = redact_url(str(endpoint))
        # What requests go to: the real query string, printed as ``self.url``.
        self._request_url = _QuietURL(endpoint, self.url)
        self.requested_model = model
        self.model = model or "unknown"
        self.max_options = max_options
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_connections = max_connections
        self.extra_body = dict(extra_body or {})
        # No content-type here: every post sends json=, for which httpx sets it.
        self._headers = dict(headers or {})
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        elif basic:
            self._headers["authorization"] = basic
        self._secrets = _secrets(self._headers, api_key, base_url)
        self._timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s, pool=None)
        self._limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._verify = verify
        self._transport = transport
        self._async_transport = async_transport
        self._client: httpx.Client | None = None
        # One AsyncClient per event loop (a pool belongs to the loop it runs on), held by
        # an async generator so the loop closes it when it shuts down.
        self._aclients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[httpx.AsyncClient, AsyncIterator[Any]]
        ] = weakref.WeakKeyDictionary()
        self._pool: ThreadPoolExecutor | None = None
        self._gate = _Gate(max_connections)
        self._lock = threading.Lock()
        self._closed = False

    @property
    def concurrent_batches(self) -> int:
        """The engine's coalescer may have this many batches in flight: the server
        batches requests itself, so reads go out as soon as they arrive."""
        return self.max_connections

    # -- clients ---------------------------------------------------------------------

    def _sync_client(self) -> httpx.Client:
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
                self._client = httpx.Client(
                    headers=self._headers,
                    timeout=self._timeout,
                    limits=self._limits,
                    verify=self._verify,
                    transport=self._transport,
                    follow_redirects=False,  # a redirect is an error (_handle)
                )
            return self._client

    async def _async_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_open()
            held = self._aclients.get(loop)
            if held is not None:
                return held[0]
            client = httpx.AsyncClient(
                headers=self._headers,
                timeout=self._timeout,
                limits=self._limits,
                verify=self._verify,
                transport=self._async_transport,
                follow_redirects=False,  # a redirect is an error (_handle)
            )
            holder = _client_holder(client)
            self._aclients[loop] = (client, holder)
        await holder.__anext__()  # registers the generator with this loop
        return client

    def _check_open(self) -> None:
        if self._closed:
            raise ReaderError("this RemoteReader is closed; create a new one")

    # -- one request -----------------------------------------------------------------

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
        delay = min(self.max_backoff_s, self.backoff_s * (2**attempt))
        delay *= 0.5 + random.random() / 2
        if response is not None:
            after = response.headers.get("retry-after")
            if after is not None:
                try:
                    delay = min(self.max_backoff_s, max(delay, float(after)))
                except ValueError:
                    pass
        return delay

    def _handle(
        self, request: ReadRequest, response: httpx.Response
    ) -> list[LabelRead] | InvalidReadError | None:
        """The reads, ``None`` when the status is worth a retry, or the
        ``InvalidReadError`` that stands for this request's reads when the answer is
        invalid (so it fails this request's caller only)."""
        status = response.status_code
        if status in RETRY_STATUSES:
            return None
        if not 200 <= status < 300:
            raise self._status_error(response)
        try:
            data = decode_json(response.content)
        except DuplicateKeyError as e:
            # Which of the two values counts is a guess: never an answer.
            return InvalidReadError(
                f"{self.url} answered JSON that is ambiguous: {self._redact(str(e))}; the "
                "server or a proxy in between is faulty"
            )
        except RecursionError:
            raise ReaderError(
                f"{self.url} answered JSON nested too deeply to read; is base_url the vLLM server?"
            ) from None
        except ValueError:
            raise ReaderError(
                f"{self.url} answered with non-JSON content "
                f"({self._redact(response.text[:200])!r}); "
                "is base_url the vLLM server?"
            ) from None
        if not isinstance(data, _MAPPING):
            raise ReaderError(f"{self.url} answered with {type(data).__name__}, not an object")
        if isinstance(data.get("model"), str) and self.requested_model is None:
            self.model = data["model"]
        try:
            return self._api.parse(request, data)
        except ReaderError as e:  # the server's answer is quoted: it may echo a secret
            error = type(e)(self._redact(str(e)))
            if isinstance(error, InvalidReadError):
                return error  # in place of this request's reads; the engine raises it
            raise error from None

    def _status_error(self, response: httpx.Response) -> ReaderError:
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
        message = self._redact(_server_message(response))
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

    def _redact(self, text: str) -> str:
        """``text`` with this reader's credentials (and any bearer/basic token)
        replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return _TOKEN.sub(rf"\1{MASK}", text)

    def _timeout_error(self, e: Exception) -> ReaderTimeoutError:
        return ReaderTimeoutError(
            f"{self.url} did not answer within the timeout ({self._redact(repr(e))}); "
            "raise timeout_s or "
            "check the server's load"
        )

    def _unavailable(self, last: str) -> RemoteUnavailableError:
        return RemoteUnavailableError(
            f"{self.url} is unavailable after {self.max_retries + 1} attempts ({last}). "
            "Check that the server is up and reachable, or raise max_retries."
        )

    def _outcome(
        self,
        request: ReadRequest,
        response: httpx.Response | None,
        error: httpx.TransportError | None,
    ) -> list[LabelRead]:
        """One attempt's reads. Raises ``_Retry`` when it is worth another try; a read
        timeout and a final HTTP error raise as they are."""
        if error is not None:
            if isinstance(error, httpx.TimeoutException) and not isinstance(
                error, httpx.ConnectTimeout
            ):
                raise self._timeout_error(error) from error
            raise _Retry(self._redact(repr(error)), None)
        assert response is not None
        reads = self._handle(request, response)
        if reads is None:
            raise _Retry(
                f"HTTP {response.status_code}: {self._redact(_server_message(response))}",
                response,
            )
        return reads

    def _retry_policy(self, done: int = 1) -> dict[str, Any]:
        """tenacity's arguments for the attempts after the first ``done``: retry
        ``_Retry`` until ``max_retries + 1`` attempts in all, waiting ``_delay``
        (exponential backoff with jitter, ``Retry-After`` honoured)."""

        def wait(state: tenacity.RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            response = error.response if isinstance(error, _Retry) else None
            return self._delay(done + state.attempt_number - 1, response)

        return {
            "retry": tenacity.retry_if_exception_type(_Retry),
            "stop": tenacity.stop_after_attempt(self.max_retries + 1 - done),
            "wait": wait,
            "reraise": True,
        }

    def _request(self, client: httpx.Client | httpx.AsyncClient, body: Any) -> httpx.Request:
        """The POST of ``body``; its URL prints with the query values masked
        (``_QuietURL``: httpx logs ``str(request.url)``)."""
        request = client.build_request("POST", self._request_url, json=body)
        request.url = self._request_url
        return request

    def _post(self, client: httpx.Client, request: ReadRequest, body: Any) -> list[LabelRead]:
        """One attempt (``_Retry`` when worth another)."""
        response, error = None, None
        self._gate.acquire()
        try:
            response = client.send(self._request(client, body))
        except httpx.TransportError as e:
            error = e
        finally:
            self._gate.release()
        return self._outcome(request, response, error)

    async def _apost(
        self, client: httpx.AsyncClient, request: ReadRequest, body: Any
    ) -> list[LabelRead]:
        response, error = None, None
        await self._gate.aacquire()
        try:
            response = await client.send(self._request(client, body))
        except httpx.TransportError as e:
            error = e
        finally:
            self._gate.release()
        return self._outcome(request, response, error)

    # The first attempt runs on its own: nearly every read succeeds at once, and
    # setting up tenacity's retry loop costs more client CPU than the rest of a read.
    # Only after a retryable failure does tenacity take over, with the same policy.

    def _read_one(self, client: httpx.Client, request: ReadRequest) -> list[LabelRead]:
        if not request.questions:
            return []
        body = self._body(request)
        try:
            try:
                return self._post(client, request, body)
            except _Retry as first:
                if self.max_retries == 0:
                    raise
                time.sleep(self._delay(0, first.response))
            for attempt in tenacity.Retrying(**self._retry_policy()):
                with attempt:
                    return self._post(client, request, body)
        except _Retry as e:
            raise self._unavailable(e.why) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _aread_one(self, client: httpx.AsyncClient, request: ReadRequest) -> list[LabelRead]:
        if not request.questions:
            return []
        body = self._body(request)
        try:
            try:
                return await self._apost(client, request, body)
            except _Retry as first:
                if self.max_retries == 0:
                    raise
                await asyncio.sleep(self._delay(0, first.response))
            async for attempt in tenacity.AsyncRetrying(**self._retry_policy()):
                with attempt:
                    return await self._apost(client, request, body)
        except _Retry as e:
            raise self._unavailable(e.why) from None
        raise AssertionError("unreachable")  # pragma: no cover

    # -- Reader ----------------------------------------------------------------------

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        requests = list(requests)
        client = self._sync_client()
        if len(requests) <= 1:
            return [self._read_one(client, r) for r in requests]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    self.max_connections, thread_name_prefix="agentbranch-remote"
                )
            pool = self._pool
        futures = [pool.submit(self._read_one, client, r) for r in requests]
        return [f.result() for f in futures]

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        client = await self._async_client()
        if len(requests) == 1:
            return [await self._aread_one(client, requests[0])]
        return list(await asyncio.gather(*(self._aread_one(client, r) for r in requests)))

    async def aclose(self) -> None:
        """Close the HTTP pools; the running loop's async client is closed here, other
        loops' clients when their loop shuts down."""
        held = self._aclients.get(asyncio.get_running_loop())
        self.close()
        if held is not None:
            await held[1].aclose()  # type: ignore[attr-defined]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
            pool, self._pool = self._pool, None
        if client is not None:
            client.close()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def __repr__(self) -> str:
        return f"RemoteReader({self.url!r}, model={self.model!r}, api={self.api!r})"
