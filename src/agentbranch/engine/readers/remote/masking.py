"""Credential masking for ``RemoteReader``: no secret in a message (``Redactor``), a
log line (``QuietURL``) or a repr."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping

import httpx

from agentbranch.core.redact import MASK, url_secrets

__all__ = ["QuietURL", "Redactor"]

#: ``Bearer <token>`` / ``Basic <token>`` anywhere in a message.
_TOKEN = re.compile(r"(?i)\b(bearer\s+|basic\s+)[A-Za-z0-9._~+/=-]+")
_SENSITIVE_HEADER = re.compile(r"(?i)auth|key|token|secret|cookie|session|password")


class QuietURL(httpx.URL):
    """The request URL, printed with its credentials masked (``redact_url``).

    httpx logs each request at INFO formatting ``str(request.url)``, while its transports
    build the request line from the URL's parts (``raw_path`` keeps the real query): the
    server gets the query string, the log lines ``***``, and no logging setting changes."""

    def __init__(self, url: httpx.URL, shown: str) -> None:
        super().__init__(url)
        self._shown = shown

    def __str__(self) -> str:
        return self._shown

    def __repr__(self) -> str:
        return f"URL({self._shown!r})"


class Redactor:
    """``redact(text)``: ``text`` with one reader's credentials (and any bearer/basic
    token) replaced by ``***``."""

    def __init__(self, headers: Mapping[str, str], api_key: str | None, base_url: str) -> None:
        # Never in a message, whatever their length (longest first): the API key, the
        # values of credential-like headers and the parts of their ``Basic`` tokens, and
        # the URL's user name, password and query values.
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
        self.secrets = sorted(found, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return _TOKEN.sub(rf"\1{MASK}", text)
