"""``RemoteReader``: reads from a vLLM server over HTTP, through its ``/v1/systemone``
endpoint (vLLM ≥ 0.32, the default) or its ``/v1/decisions`` endpoint (vLLM ≥ 0.33,
``api="decisions"``, the only one with joint reads). One module per job:

* ``reader``: ``RemoteReader`` itself; ``apis``: the two APIs and the request URL
* ``wire``: the request bodies of both APIs; ``answers``: the server's answers as
  strict pydantic models; ``parse``: answers to ``LabelRead``s
* ``transport``: pooled httpx clients, one POST, status → error; ``retries``: what is
  retried and how; ``gate``: the one in-flight limit; ``masking``: credentials out of
  URLs, messages and log lines
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
