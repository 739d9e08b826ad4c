"""``RemoteReader``: reads from a vLLM server (``/v1/systemone`` or ``/v1/decisions``)
or a server that speaks the published System One spec, over HTTP. What it sends, retries
and validates: docs/vllm.md, "Remote"."""

from agentbranch.engine.readers.remote.parse import parse_answers, parse_decisions_answers
from agentbranch.engine.readers.remote.reader import RemoteReader
from agentbranch.engine.readers.remote.spec import build_spec_payload, parse_spec_answers
from agentbranch.engine.readers.remote.transport import (
    RemoteRequestError,
    RemoteUnavailableError,
)
from agentbranch.engine.readers.remote.wire import build_decisions_payload, build_payload

__all__ = [
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
