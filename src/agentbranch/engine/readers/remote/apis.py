"""The server APIs ``RemoteReader`` speaks (path, body, answers per ``Api``; the HTTP
is shared), ``/v1/systemone``'s two dialects, and the URL a request goes to."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import httpx

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.core.redact import redact_url
from agentbranch.engine.readers.remote.parse import parse_answers, parse_decisions_answers
from agentbranch.engine.readers.remote.spec import build_spec_payload, parse_spec_answers
from agentbranch.engine.readers.remote.wire import build_decisions_payload, build_payload

__all__ = ["APIS", "DIALECTS", "Api", "endpoint"]


class Api(NamedTuple):
    """What differs between the endpoints: the path, the body and the answers."""

    path: str
    build: Callable[..., dict[str, Any]]
    parse: Callable[[ReadRequest, Mapping[str, Any]], list[LabelRead]]


APIS = {
    "systemone": Api("/v1/systemone", build_payload, parse_answers),
    "decisions": Api("/v1/decisions", build_decisions_payload, parse_decisions_answers),
}

#: What the numbers of a ``/v1/systemone`` answer mean: vLLM's (``confidence`` is
#: ``p_top x label_mass``, ``diagnostics`` carry the label mass) or the published
#: spec's (``spec``: the answer's distribution and nothing about label mass).
DIALECTS = {
    "vllm": APIS["systemone"],
    "spec": Api("/v1/systemone", build_spec_payload, parse_spec_answers),
}


def endpoint(base_url: str, api: str) -> tuple[httpx.URL, str | None]:
    """The request URL (``base_url``'s path joined with the API's path, its query string
    kept; no userinfo, no fragment; a path ending in the other API's is refused) and the
    ``Authorization: Basic`` value for ``base_url``'s userinfo, if any."""
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
    url = parsed.copy_with(
        username=None,
        password=None,
        fragment=None,
        raw_path=path + (b"?" + query if query else b""),
    )
    if not parsed.userinfo:
        return url, None
    token = base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode()
    return url, f"Basic {token}"
