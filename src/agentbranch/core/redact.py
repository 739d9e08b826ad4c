"""Credentials kept out of what agentbranch prints, logs and raises: a server URL's
userinfo and every query value (not only the ones whose names look secret: a gateway's
``?sig=`` is as sensitive as ``?token=``) are masked, ``http://***@host/v1?token=***``.
Standard library only, so the engine's selection and the CLI use it without a reader.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus

__all__ = ["MASK", "redact_url", "url_secrets"]

MASK = "***"

#: ``scheme://user:password@`` (``scheme://`` optional): the userinfo ends at the last
#: ``@`` before the path, query or fragment.
_USERINFO = re.compile(r"^(?P<prefix>[^/?#@]*//)?(?P<userinfo>[^/?#]*)@")


def _split(url: str) -> tuple[str, str | None, str, str | None, str | None]:
    """``(prefix, userinfo, rest up to the query, query, fragment)``."""
    prefix, userinfo = "", None
    match = _USERINFO.match(url)
    if match:
        prefix, userinfo = match["prefix"] or "", match["userinfo"]
        url = url[match.end() :]
    url, hash_, fragment = url.partition("#")
    url, mark, query = url.partition("?")
    return prefix, userinfo, url, query if mark else None, fragment if hash_ else None


def _mask_pairs(text: str) -> str:
    parts = []
    for part in text.split("&"):
        name, eq, value = part.partition("=")
        if eq:
            parts.append(f"{name}={MASK}" if value else part)
        else:  # a bare value (``?SECRET``) may itself be the credential
            parts.append(MASK if name else part)
    return "&".join(parts)


def redact_url(url: object) -> str:
    """``url`` with the userinfo (``user:password``) and every query-string and fragment
    value replaced by ``***``; the rest as given.
    Never raises: text that is not a valid URL is masked as far as it has those parts."""
    if isinstance(url, bytes):
        url = url.decode("utf-8", "replace")
    if not isinstance(url, str):
        return repr(url)
    prefix, userinfo, rest, query, fragment = _split(url)
    out = prefix + ("" if userinfo is None else MASK + "@") + rest
    out += "" if query is None else "?" + _mask_pairs(query)
    return out + ("" if fragment is None else "#" + _mask_pairs(fragment))


def url_secrets(url: str) -> set[str]:
    """The secrets ``redact_url`` masks in ``url`` (user name, password, query and
    fragment values), as written and percent-decoded, to mask in free text too."""
    _, userinfo, _, query, fragment = _split(url)
    raw: list[str] = []
    if userinfo is not None:
        raw.extend(userinfo.split(":", 1))
    for text in (query, fragment):
        for part in (text or "").split("&"):
            name, eq, value = part.partition("=")
            raw.append(value if eq else name)
    return {v for value in raw for v in (value, unquote(value), unquote_plus(value))} - {""}
