"""A compact set of 8-byte digests: what ``Earned`` remembers of every record id (and
decision identity) it has counted, so each label counts once without keeping the ids.

Digests live in two sorted ``uint64`` arrays (a large one and a smaller one merged into
it when it reaches an eighth of its size) and a small Python set of the newest ones
(merged into the smaller array every ``RECENT`` additions): 8 bytes per digest plus
a bounded overhead, O(log n) per lookup, amortized O(1) array moves per addition.
Two different ids share a 64-bit digest with probability about ``n² / 2⁶⁵`` (3·10⁻⁶ at
ten million ids); the one that comes second would not count, which errs toward fewer
labels, never more.
"""

from __future__ import annotations

import hashlib

import numpy as np

#: Digests kept in the Python set before they are merged into the arrays.
RECENT = 4096


def digest(text: str) -> int:
    """The 8-byte digest of ``text`` (BLAKE2b) as an unsigned integer."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class DigestSet:
    """A set of digests (``digest``) in about 8 bytes each (see the module doc)."""

    __slots__ = ("_big", "_small", "_recent")

    def __init__(self) -> None:
        self._big = np.empty(0, dtype=np.uint64)
        self._small = np.empty(0, dtype=np.uint64)
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._big) + len(self._small) + len(self._recent)

    def __contains__(self, d: int) -> bool:
        if d in self._recent:
            return True
        key = np.uint64(d)
        for arr in (self._small, self._big):
            i = int(np.searchsorted(arr, key))
            if i < len(arr) and arr[i] == key:
                return True
        return False

    def add(self, d: int) -> None:
        self._recent.add(d)
        if len(self._recent) >= RECENT:
            fresh = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
            self._small = np.union1d(self._small, fresh)
            self._recent = set()
            if len(self._small) * 8 >= max(len(self._big), RECENT * 8):
                self._big = np.union1d(self._big, self._small)
                self._small = np.empty(0, dtype=np.uint64)

    @property
    def nbytes(self) -> int:
        """Memory held (arrays and the recent set, approximately)."""
        return int(self._big.nbytes + self._small.nbytes) + 72 * len(self._recent)

    def to_array(self) -> np.ndarray:
        """Every digest, sorted (for a checkpoint)."""
        fresh = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
        return np.union1d(np.union1d(self._big, self._small), fresh)

    @classmethod
    def from_array(cls, arr: np.ndarray) -> DigestSet:
        new = cls()
        new._big = np.unique(np.asarray(arr, dtype=np.uint64))
        return new


__all__ = [
    "DigestSet",
    "RECENT",
    "digest",
]
