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

**How answers become ``LabelRead``s.** The server returns label probabilities
renormalised over the labels (``p_i``), not logprobs. ``label_mass`` (the labels' total
probability over the full vocabulary) comes from the response's ``diagnostics`` when the
server sends them (vLLM's ``/v1/systemone`` does), else from ``confidence / p_top``
(vLLM's confidence is ``p_top × label_mass``), else 1.0. The reader reports
``logprobs[i] = log(p_i × label_mass)``: the label's full-vocabulary log probability, as
model readers report it, so reads of a choice split into chunks or read in several option
orders combine the way they do for local readers. The engine renormalises, so a single
read's decision gets exactly the server's ``p_i``. ``argmax_is_label`` comes from
``diagnostics`` (True when absent). ``draws`` is ignored; ``joint`` is sent only to
``/v1/decisions``.

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

**Errors.** Connection failures, 429, 502, 503 and 504 are retried (tenacity) with
exponential backoff (``Retry-After`` honoured, capped), at most ``max_retries`` times; then
``RemoteUnavailableError``. Other 4xx raise ``RemoteRequestError`` carrying the status
and the server's own message (wrong model name, too many options, ...). A read that times
out raises ``ReaderTimeoutError``.

**Invalid answers.** Every probability the server sends must be a finite number in
[0, 1] (``noul`` included), one per option the question has (no missing or extra
options), summing to at most 1; label mass and confidence in [0, 1]. Anything else is an
``InvalidReadError`` (a ``ReaderError``) for that request: a NaN or ``-0.9`` never
becomes a decision. ``read``/``aread`` return it in place of that request's reads (the
engine raises it for that request's caller), so one bad answer in a shared batch does
not fail the other requests of the batch.

**Secrets.** Credentials in the URL (``http://user:key@host``) are sent as HTTP Basic
auth and removed from ``reader.url``; the API key, the URL's password and the values of
``Authorization``-like headers are replaced by ``***`` in every exception message
(server messages that echo them included).
"""

from __future__ import annotations

import asyncio
import base64
import math
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
from agentbranch.engine.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.errors import (
    ConfigurationError,
    InvalidReadError,
    ReaderError,
    ReaderTimeoutError,
)
from agentbranch.question_examples import instructions_with_examples

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
#: How far outside [0, 1] a server probability may sit from float rounding.
ROUNDING = 1e-6
#: ``isinstance`` against this checks ``dict`` (what JSON gives) before the slower ABC.
_MAPPING = (dict, Mapping)


class RemoteRequestError(ReaderError):
    """The server refused a request (4xx). ``status_code`` and ``server_message`` say why."""

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


def question_keys(questions: Sequence[QuestionSpec]) -> list[str]:
    """Wire ids for a request's question reads. The engine may read one question
    several times (option chunks, permutations); repeats get a ``~n`` suffix so every
    wire id is unique. The id is not part of the model's prompt."""
    ids = [q.id for q in questions]
    if len(set(ids)) == len(ids):  # the usual request: no repeats, no suffixes
        return ids
    seen: dict[str, int] = {}
    keys = []
    for q in questions:
        n = seen.get(q.id, 0)
        seen[q.id] = n + 1
        keys.append(q.id if n == 0 else f"{q.id}~{n}")
    taken = set()
    for i, key in enumerate(keys):  # a user id that itself ends in "~n"
        while key in taken:
            key += "~"
        taken.add(key)
        keys[i] = key
    return keys


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


def _probability(value: Any, what: str = "probability") -> float:
    """A server probability: a finite number in [0, 1] (clamped within rounding), else
    ``InvalidReadError``."""
    if type(value) is float and 0.0 < value <= 1.0:  # the usual answer (False for NaN)
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not -ROUNDING <= value <= 1 + ROUNDING  # False for NaN
    ):
        raise InvalidReadError(
            f"the server answered {what} {value!r}, which is not a number in [0, 1]; the "
            "server or a proxy in between is faulty"
        )
    return min(1.0, max(0.0, float(value)))


def _per_option(probs: Mapping[str, Any], expected: Sequence[str]) -> list[float]:
    """One probability per option of ``expected``, in that order: an extra option is an
    ``InvalidReadError``, a missing one a ``KeyError``."""
    if probs.keys() != set(expected):  # one set comparison for the usual exact answer
        extra = sorted(set(probs) - set(expected))
        if extra:
            raise InvalidReadError(
                f"the server answered probabilities for options the question does not "
                f"have: {extra} (expected {list(expected)})"
            )
    return _checked_sum([_probability(probs[k]) for k in expected])


def _checked_sum(probs: list[float]) -> list[float]:
    if sum(probs) > 1 + 1e-3:
        raise InvalidReadError(
            f"the server's probabilities {probs} sum to {sum(probs):.4f}, more than 1"
        )
    return probs


def _probabilities(q: QuestionSpec, answer: Mapping[str, Any]) -> list[float]:
    probs = answer.get("probabilities")
    if q.type == "noul":
        if isinstance(probs, _MAPPING) and {"yes", "no"} <= probs.keys():
            return _per_option(probs, ("yes", "no"))
        p_yes = _probability(answer["noul"], "noul")
        return [p_yes, 1.0 - p_yes]
    if not isinstance(probs, _MAPPING):
        raise KeyError("probabilities")
    if q.type == "score":
        return _per_option(probs, [str(i) for i in range(len(q.options))])
    return _per_option(probs, q.options)


def parse_answers(request: ReadRequest, response: Mapping[str, Any]) -> list[LabelRead]:
    """The ``LabelRead`` of each question read, from a ``/v1/systemone`` response."""
    answers = response.get("answers")
    diagnostics = response.get("diagnostics") or {}
    if not isinstance(answers, _MAPPING):
        raise ReaderError(
            "the /v1/systemone response has no 'answers' object; is the URL a System One "
            f"endpoint? Got keys {sorted(response)}"
        )
    reads = []
    for key, q in zip(question_keys(request.questions), request.questions):
        answer = answers.get(key)
        if not isinstance(answer, _MAPPING):
            raise InvalidReadError(f"the server returned no answer for question {key!r}")
        try:
            probs = _probabilities(q, answer)
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidReadError(
                f"the server's answer to question {key!r} lacks the label probabilities "
                f"({e!r}); got {dict(answer)}"
            ) from None
        diag = diagnostics.get(key) if isinstance(diagnostics, _MAPPING) else None
        reads.append(_label_read(probs, answer, diag if isinstance(diag, _MAPPING) else None))
    return reads


def _label_read(
    probs: list[float], answer: Mapping[str, Any], diag: Mapping[str, Any] | None
) -> LabelRead:
    """``logprobs[i] = log(p_i × label_mass)``, the mass from ``diag`` or the answer's
    ``confidence`` (vLLM's is ``p_top × label_mass``), else 1."""
    top = max(probs)
    # A field that is there must be a number: a null is a faulty server, not "unknown"
    # (taken as unknown, it would read as label mass 1, the most trusting value).
    if diag is not None and "label_mass" in diag:
        mass = _probability(diag["label_mass"], "label_mass")
    elif "confidence" in answer and top > 0:
        # vLLM's confidence is p_top × label_mass, so it never exceeds p_top.
        mass = _probability(_probability(answer["confidence"], "confidence") / top, "label_mass")
    else:
        mass = 1.0
    # log p + log mass, not log(p × mass): two tiny factors underflow to 0 in a product.
    log_scale = math.log(mass) if mass > 0 else 0.0
    return LabelRead(
        logprobs=tuple([math.log(p) + log_scale if p > 0 else -math.inf for p in probs]),
        label_mass=mass,
        argmax_is_label=bool(diag.get("argmax_is_label", True)) if diag is not None else True,
        extras={"answer": dict(answer)},
    )


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


def _decision_probabilities(q: QuestionSpec, answer: Mapping[str, Any]) -> list[float]:
    if answer.get("type") == "predicate":
        p_true = _probability(answer["probability"])
        return [p_true, 1.0 - p_true]
    entries = answer["probabilities"]
    n = 2 if q.type == "noul" else len(q.options)
    if not isinstance(entries, list) or len(entries) != n:
        got = len(entries) if isinstance(entries, list) else type(entries).__name__
        raise KeyError(f"{got} probabilities for {n} options")
    if q.type == "score":
        by_value = {int(e["value"]): _probability(e["probability"]) for e in entries}
        return _checked_sum([by_value[i] for i in range(len(q.options))])
    by_value = {(type(e["value"]), e["value"]): _probability(e["probability"]) for e in entries}
    if q.type == "noul":
        return _checked_sum([by_value[(bool, True)], by_value[(bool, False)]])
    return _checked_sum([by_value[(str, o)] for o in q.options])


def parse_decisions_answers(request: ReadRequest, response: Mapping[str, Any]) -> list[LabelRead]:
    """The ``LabelRead`` of each question read, from a ``/v1/decisions`` response
    (answers in question order)."""
    answers = response.get("answers")
    if not isinstance(answers, list):
        raise ReaderError(
            "the /v1/decisions response has no 'answers' list; is the URL a vLLM "
            f"Decisions endpoint? Got keys {sorted(response)}"
        )
    keys = question_keys(request.questions)
    if len(answers) != len(keys):
        raise InvalidReadError(
            f"the server returned {len(answers)} answers for {len(keys)} questions"
        )
    reads = []
    for key, q, answer in zip(keys, request.questions, answers):
        if not isinstance(answer, Mapping) or answer.get("name") not in (None, key):
            raise InvalidReadError(f"the server's answer for question {key!r} is {answer!r}")
        try:
            probs = _decision_probabilities(q, answer)
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidReadError(
                f"the server's answer to question {key!r} lacks the label probabilities "
                f"({e!r}); got {dict(answer)}"
            ) from None
        reads.append(_label_read(probs, answer, None))
    return reads


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
        data = response.json()
    except ValueError:
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


def _mask_userinfo(url: Any) -> Any:
    """``url`` with any ``user:password@`` replaced by ``***@`` (for messages)."""
    return re.sub(r"^([^/?#@]*//)?[^/?#@]+@", r"\1***@", url) if isinstance(url, str) else url


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """The URL without ``user:password@`` and the ``Authorization: Basic`` value for
    them (what httpx would send for a URL with userinfo)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise ConfigurationError(f"base_url {_mask_userinfo(url)!r} is not a valid URL") from None
    if not parsed.userinfo:
        return url, None
    token = base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode()
    return str(parsed.copy_with(username=None, password=None)), f"Basic {token}"


def _secrets(headers: Mapping[str, str], api_key: str | None) -> list[str]:
    """Strings that must never appear in a message: the API key, the values of
    credential-like headers, and the parts of ``Basic`` tokens (longest first)."""
    found: set[str] = set()
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
                        user_pass = base64.b64decode(token).decode()
                    except ValueError:
                        continue
                    found.update(part for part in user_pass.split(":", 1) if len(part) >= 4)
    return sorted((s for s in found if len(s) >= 4), key=len, reverse=True)


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
            InferenceService URL; a URL that already ends in the API's path
            (``/v1/systemone``, ``/v1/decisions``) is used as is.
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
                f"{_mask_userinfo(base_url)!r}"
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
        base_url, basic = _split_userinfo(base_url)
        if basic and api_key:
            raise ConfigurationError(
                "base_url carries credentials (user:password@) and api_key is set too; "
                "give the credentials once"
            )
        base = base_url.rstrip("/")
        other = [
            a.path for a in APIS.values() if a.path != self._api.path and base.endswith(a.path)
        ]
        if other:
            raise ConfigurationError(f"base_url ends in {other[0]}, which is not api={api!r}")
        self.url = base if base.endswith(self._api.path) else base + self._api.path
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
        self._secrets = _secrets(self._headers, api_key)
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
        if response.status_code in RETRY_STATUSES:
            return None
        if response.status_code >= 400:
            message = self._redact(_server_message(response))
            if response.status_code < 500:
                hint = {
                    401: " Pass the server's key as api_key (or a valid token).",
                    403: " The token lacks access to this InferenceService.",
                    404: " Check base_url and model (the served model name).",
                }.get(response.status_code, " Fix the request; retrying will not help.")
                raise RemoteRequestError(
                    f"{self.url} refused the read with HTTP {response.status_code}: "
                    f"{message}.{hint}",
                    status_code=response.status_code,
                    server_message=message,
                )
            raise ReaderError(
                f"{self.url} failed the read with HTTP {response.status_code}: {message}. "
                "Check the server's logs (the engine may have died or run out of memory)."
            )
        try:
            data = response.json()
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

    def _redact(self, text: str) -> str:
        """``text`` with this reader's credentials (and any bearer/basic token)
        replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return _TOKEN.sub(r"\1***", text)

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

    def _post(self, client: httpx.Client, request: ReadRequest, body: Any) -> list[LabelRead]:
        """One attempt (``_Retry`` when worth another)."""
        response, error = None, None
        self._gate.acquire()
        try:
            response = client.post(self.url, json=body)
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
            response = await client.post(self.url, json=body)
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
