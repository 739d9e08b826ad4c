"""``RemoteReader``: reads from a vLLM server over HTTP (``/v1/systemone`` or
``/v1/decisions``). The reader lives in ``reader``; this package re-exports its public names."""

from agentbranch.engine.readers.remote.reader import (
    APIS,
    DECISIONS_PATH,
    DEFAULT_MAX_OPTIONS,
    DEFAULT_PATH,
    RETRY_STATUSES,
    RemoteReader,
    RemoteRequestError,
    RemoteUnavailableError,
    build_decisions_payload,
    build_payload,
    parse_answers,
    parse_decisions_answers,
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
