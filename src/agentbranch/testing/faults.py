"""``FaultyReader``: a reader that injects one fault, to test what a graph sees when the
engine fails."""

from __future__ import annotations

import threading
from typing import Any

from agentbranch.core.reads import LabelRead
from agentbranch.engine.readers.base import Reader, WrappingReader

__all__ = ["FaultyReader"]


class FaultyReader(WrappingReader):
    """Wraps a reader and injects one fault, to test what a graph sees when the engine
    fails (``DecisionEngine`` must turn each into a ``ReaderError``, never a decision).

    ``fault``:

    * ``"raise"`` — the read call raises ``error`` (``ConnectionError`` by default);
    * ``"hang"`` — the read call blocks until ``release()`` (at most ``hang_s``), then
      answers normally;
    * ``"nan"`` / ``"inf"`` — the reads carry a NaN / +inf log-probability;
    * ``"wrong_shape"`` — the reads carry one log-probability too few;
    * ``"partial"`` — partial batch failure: the affected requests get no reads at all,
      the others of the same batch are answered normally.

    ``affects`` picks the requests that get the fault (a predicate on ``ReadRequest``;
    all by default); for ``"raise"`` and ``"hang"`` the whole call faults when any of its
    requests is affected (one read call succeeds or fails as a unit). Set ``active =
    False`` to heal the reader; ``faults`` counts the calls that were faulted and
    ``calls`` records every batch received.
    """

    FAULTS = ("raise", "hang", "nan", "inf", "wrong_shape", "partial")

    def __init__(
        self,
        inner: Reader,
        fault: str,
        *,
        affects: Any = None,
        error: BaseException | None = None,
        hang_s: float = 30.0,
    ) -> None:
        if fault not in self.FAULTS:
            raise ValueError(f"fault must be one of {self.FAULTS}, got {fault!r}")
        self.inner = inner
        self.fault = fault
        self.affects = affects or (lambda request: True)
        self.error = error if error is not None else ConnectionError("injected fault")
        self.hang_s = hang_s
        self.active = True
        self.faults = 0
        self.calls: list[list[Any]] = []
        self._released = threading.Event()
        self._lock = threading.Lock()

    def release(self) -> None:
        """Let every hanging (and future) ``"hang"`` read go on."""
        self._released.set()

    def close(self) -> None:
        self.release()
        self.inner.close()

    def read(self, requests: Any) -> list[list[LabelRead]]:
        requests = list(requests)
        with self._lock:
            self.calls.append(requests)
        hit = [self.active and bool(self.affects(r)) for r in requests]
        if any(hit):
            with self._lock:
                self.faults += 1
            if self.fault == "raise":
                raise self.error
            if self.fault == "hang":
                self._released.wait(self.hang_s)
        reads = self.inner.read(requests)
        if self.fault in ("raise", "hang"):
            return reads
        return [self._spoil(r) if h else r for r, h in zip(reads, hit)]

    def _spoil(self, reads: list[LabelRead]) -> list[LabelRead]:
        if self.fault == "partial":
            return []
        out = []
        for read in reads:
            lps = tuple(read.logprobs)[:-1]
            if self.fault != "wrong_shape":  # float() reads "nan" and "inf"
                lps += (float(self.fault),)
            out.append(LabelRead(lps, read.label_mass, read.argmax_is_label, read.agreement))
        return out
