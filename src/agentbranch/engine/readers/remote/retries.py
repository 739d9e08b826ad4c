"""The retry policy of ``RemoteReader``: what is retried (``Retry``), how long to wait
(``backoff``), and the retries after a failed first attempt (``retry_after``).

The first attempt runs in the caller without tenacity: nearly every read succeeds at
once, and setting up tenacity's retry loop costs more client CPU than the rest of a read.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import tenacity

__all__ = ["RETRY_STATUSES", "Retry", "aretry_after", "backoff", "policy", "retry_after"]

#: Statuses worth another try: rate limited, or a gateway/backend not ready yet.
RETRY_STATUSES = frozenset({429, 502, 503, 504})

T = TypeVar("T")
#: ``delay(attempt, response)``: seconds to wait after failed attempt number ``attempt``
#: (0 for the first), given the response that failed it (``None`` for no response).
Delay = Callable[[int, httpx.Response | None], float]


class Retry(Exception):
    """An attempt worth another try (connection error, 429/502/503/504)."""

    def __init__(self, why: str, response: httpx.Response | None) -> None:
        super().__init__(why)
        self.why = why
        self.response = response


def backoff(
    attempt: int, response: httpx.Response | None, *, backoff_s: float, max_backoff_s: float
) -> float:
    """The wait after failed attempt ``attempt`` (0 for the first): ``backoff_s × 2^attempt``
    capped at ``max_backoff_s``, with jitter (50-100 %); a ``Retry-After`` header on
    ``response`` lengthens it, up to the cap."""
    delay = min(max_backoff_s, backoff_s * (2**attempt))
    delay *= 0.5 + random.random() / 2
    if response is not None:
        after = response.headers.get("retry-after")
        if after is not None:
            try:
                delay = min(max_backoff_s, max(delay, float(after)))
            except ValueError:
                pass
    return delay


def policy(max_retries: int, delay: Delay, done: int = 1) -> dict[str, Any]:
    """tenacity's arguments for the attempts after the first ``done``: retry ``Retry``
    until ``max_retries + 1`` attempts in all, waiting ``delay``."""

    def wait(state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        response = error.response if isinstance(error, Retry) else None
        return delay(done + state.attempt_number - 1, response)

    return {
        "retry": tenacity.retry_if_exception_type(Retry),
        "stop": tenacity.stop_after_attempt(max_retries + 1 - done),
        "wait": wait,
        "reraise": True,
    }


def retry_after(first: Retry, attempt: Callable[[], T], *, max_retries: int, delay: Delay) -> T:
    """What follows a first attempt that failed with ``first``: ``attempt()`` retried
    on ``Retry`` until ``max_retries + 1`` attempts in all (the last ``Retry``
    propagates)."""
    if max_retries == 0:
        raise first
    time.sleep(delay(0, first.response))
    for tried in tenacity.Retrying(**policy(max_retries, delay)):
        with tried:
            return attempt()
    raise AssertionError("unreachable")  # pragma: no cover


async def aretry_after(
    first: Retry, attempt: Callable[[], Awaitable[T]], *, max_retries: int, delay: Delay
) -> T:
    """``retry_after`` on an event loop."""
    if max_retries == 0:
        raise first
    await asyncio.sleep(delay(0, first.response))
    async for tried in tenacity.AsyncRetrying(**policy(max_retries, delay)):
        with tried:
            return await attempt()
    raise AssertionError("unreachable")  # pragma: no cover
