"""Rate-limited WARNINGs: a stuck teacher fails every audit, and a log line per audit
would drown the log (and cost the worker time). Per kind of trouble, the first is
logged at once; later ones within ``interval_s`` are counted, and the next line logged
says how many were not."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

#: At most one WARNING per kind of trouble this often (seconds).
WARN_EVERY_S = 60.0


class RateLimitedLog:
    """``warn(kind, msg, *args)``: at most one line per ``kind`` every ``interval_s``."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = WARN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def warn(self, kind: str, msg: str, *args: object) -> bool:
        """Log ``msg % args`` at WARNING unless ``kind`` was logged less than
        ``interval_s`` ago (then it is counted); ``True`` when logged."""
        now = self._clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval_s:
                self._held[kind] = self._held.get(kind, 0) + 1
                return False
            held = self._held.pop(kind, 0)
            self._last[kind] = now
        if held:
            msg += " (%d more like this in the last %.0f s were not logged)"
            args = (*args, held, now - last if last is not None else 0.0)
        self._log.warning(msg, *args)
        return True


__all__ = [
    "RateLimitedLog",
    "WARN_EVERY_S",
]
