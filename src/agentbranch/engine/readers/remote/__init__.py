"""``RemoteReader``: reads from a vLLM server over HTTP, through its ``/v1/systemone``
endpoint (vLLM ≥ 0.32, the default) or its ``/v1/decisions`` endpoint (vLLM ≥ 0.33,
``api="decisions"``, the only one with joint reads), or from a server that speaks
``/v1/systemone`` as the published System One spec writes it (``dialect="spec"``).
One module per job:

* ``reader``: ``RemoteReader`` itself; ``apis``: the APIs, the dialects and the URL
* ``wire``: the request bodies of vLLM's APIs; ``answers``: the server's answers as
  strict pydantic models; ``parse``: vLLM's answers to ``LabelRead``s; ``spec``: the
  published spec's dialect (its body and its answers)
* ``transport``: pooled httpx clients, one POST, status → error; ``retries``: what is
  retried and how; ``gate``: the one in-flight limit; ``masking``: credentials out of
  URLs, messages and log lines
"""

from agentbranch.engine.readers.remote.apis import APIS, DIALECTS
from agentbranch.engine.readers.remote.parse import parse_answers, parse_decisions_answers
from agentbranch.engine.readers.remote.reader import RemoteReader
from agentbranch.engine.readers.remote.retries import RETRY_STATUSES
from agentbranch.engine.readers.remote.spec import (
    SPEC_MAX_OPTIONS,
    build_spec_payload,
    parse_spec_answers,
)
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
    "DIALECTS",
    "RETRY_STATUSES",
    "SPEC_MAX_OPTIONS",
    "RemoteReader",
    "RemoteRequestError",
    "RemoteUnavailableError",
    "build_decisions_payload",
    "build_payload",
    "build_spec_payload",
    "parse_answers",
    "parse_decisions_answers",
    "parse_spec_answers",
]
