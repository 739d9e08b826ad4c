"""``RemoteReader``: reads from a vLLM server (``/v1/systemone`` or ``/v1/decisions``)
or a server that speaks the published System One spec, over HTTP. What it sends, retries
and validates: docs/vllm.md, "Remote"."""

from agentbranch.engine.readers.remote.apis import APIS, DIALECTS
from agentbranch.engine.readers.remote.parse import parse_answers, parse_decisions_answers
from agentbranch.engine.readers.remote.reader import RemoteReader
from agentbranch.engine.readers.remote.spec import (
    SPEC_MAX_OPTIONS,
    build_spec_payload,
    parse_spec_answers,
)
from agentbranch.engine.readers.remote.transport import (
    RETRY_STATUSES,
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
