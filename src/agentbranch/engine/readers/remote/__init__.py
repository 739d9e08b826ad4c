"""``RemoteReader``: reads from a vLLM server over HTTP, through its ``/v1/systemone``
endpoint (vLLM ≥ 0.32, the default) or its ``/v1/decisions`` endpoint (vLLM ≥ 0.33,
``api="decisions"``, the only one with joint reads).

One module per job, each docstring stating its rules in full:

* ``reader``: ``RemoteReader`` itself (settings, one request from body to reads).
* ``wire``: the request bodies of both APIs (``build_payload``,
  ``build_decisions_payload``) and the ``/v1/decisions`` mapping of question types.
* ``answers``: the server's answers as JSON and strict pydantic models (no coercion).
* ``parse``: answers to ``LabelRead``s (``parse_answers``, ``parse_decisions_answers``;
  label mass, options, no-signal answers).
* ``apis``: the two APIs side by side, and the request URL built from ``base_url``.
* ``transport``: pooled sync/async httpx clients, one POST, status → error (redirects
  refused), ``RemoteRequestError`` and ``RemoteUnavailableError``.
* ``retries``: what is retried, the backoff, the retry loop (tenacity).
* ``gate``: the one in-flight limit shared by threads and event loops.
* ``masking``: credentials out of ``reader.url``, messages and httpx's log lines.
"""

from agentbranch.engine.readers.remote.apis import APIS
from agentbranch.engine.readers.remote.parse import parse_answers, parse_decisions_answers
from agentbranch.engine.readers.remote.reader import RemoteReader
from agentbranch.engine.readers.remote.retries import RETRY_STATUSES
from agentbranch.engine.readers.remote.transport import (
    RemoteRequestError,
    RemoteUnavailableError,
)
from agentbranch.engine.readers.remote.wire import (
    DECISIONS_PATH,
    DEFAULT_MAX_OPTIONS,
    DEFAULT_PATH,
    build_decisions_payload,
    build_payload,
)

__all__ = [
    "APIS",
    "DECISIONS_PATH",
    "DEFAULT_MAX_OPTIONS",
    "DEFAULT_PATH",
    "RETRY_STATUSES",
    "RemoteReader",
    "RemoteRequestError",
    "RemoteUnavailableError",
    "build_decisions_payload",
    "build_payload",
    "parse_answers",
    "parse_decisions_answers",
]
