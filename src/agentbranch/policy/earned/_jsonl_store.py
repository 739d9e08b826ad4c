"""Evidence in a JSON Lines file (``JsonlEvidenceStore``): its writes, incremental reads
and the file faults it survives."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.core.files import PRIVATE_MODE, append_regular, check_mode, kind, open_regular
from agentbranch.policy.earned._evidence import Evidence
from agentbranch.policy.earned._stores import EvidenceStore, parse_record

__all__ = ["READ_BYTES", "JsonlEvidenceStore"]

log = logging.getLogger("agentbranch")

#: Bytes parsed per ``read_new`` call (bounds the memory of opening a large store).
READ_BYTES = 8 << 20

#: Bytes before the read position compared at each read (``_tail_still_there``).
TAIL_BYTES = 64

#: Seconds within which appends are flushed to disk (one ``fsync`` for all of them): a
#: machine that loses power may lose the last ``SYNC_S`` seconds (docs/reliability.md).
SYNC_S = 0.5


class JsonlEvidenceStore(EvidenceStore):
    """Evidence in one JSON Lines file, appended under a ``filelock`` lock (``path +
    '.lock'``) so writers on one machine never interleave; every line is validated when
    read. Reads are incremental (``read_new``: only the bytes appended since the last
    read); ``load(key)`` scans the file.

    Faults (docs/reliability.md): a file that is not an evidence store is refused before
    anything is written; a torn final line is moved to ``path + '.torn'`` (ERROR); a file
    moved, deleted, truncated or replaced while serving is reported once (``pop_lost``)
    and a new one started. New files are owner-only (``mode``; wider ones are tightened,
    WARNING). An append is in the file when it returns, on disk within ``SYNC_S``."""

    resumable = True  # ``position``/``resume``: a checkpoint beside the file

    def __init__(self, path: str | os.PathLike[str], *, mode: int = PRIVATE_MODE) -> None:
        from filelock import FileLock

        self.path = Path(path)
        self.mode = check_mode(mode, "JsonlEvidenceStore")
        self._check_kind()
        with (
            suppress(FileNotFoundError),
            self._reading(),
            open_regular(self.path, self._not_regular),
        ):
            pass  # (readable, or a clear error before anything is written)
        self._lock = FileLock(str(self.path) + ".lock")
        self._mutex = threading.Lock()
        self._restart()
        self._pending: list[Evidence] = []  # read by ``keys()``, not yet by ``read_new``
        self._lost: str | None = None
        self._needles: tuple[bytes, ...] | None = None  # the keys' spellings (``keep_only``)
        self._sync: threading.Timer | None = None  #: the next fsync, once appends wait for one

    def __repr__(self) -> str:
        return f"JsonlEvidenceStore({str(self.path)!r})"

    def view(self) -> JsonlEvidenceStore:
        """Another reader of the same file, reading it from its first byte."""
        return JsonlEvidenceStore(self.path, mode=self.mode)

    @property
    def offset(self) -> int:
        """Bytes read so far (every complete line before it has been returned)."""
        return self._offset

    def _check_kind(self) -> None:
        if self.path.is_symlink():
            raise ConfigurationError(
                f"evidence store {self.path} is a symlink; give the real file's path"
            )
        if self.path.exists() and not stat.S_ISREG(mode := self.path.stat().st_mode):
            raise self._not_regular(mode)

    def _not_regular(self, mode: int) -> ConfigurationError:
        return ConfigurationError(
            f"evidence store {self.path} is {kind(mode)}, not a regular file; give a .jsonl "
            "file path"
        )

    def append(self, records: Sequence[Evidence]) -> None:
        if not records:
            return
        raw = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records).encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._check_kind()
            with self._mutex:
                self._check_identity()
                self._repair_tail()
            after = append_regular(
                self.path, raw, self._not_regular, mode=self.mode, private="evidence store"
            )
            self._sync_soon()
            with self._mutex:
                identity = (after.st_dev, after.st_ino)
                if self._identity in (None, identity) and after.st_size - len(raw) == self._offset:
                    # Nothing unread before our lines: they need not be read back.
                    self._offset, self._identity = after.st_size, identity
                    self._hash.update(raw)
                    self._tail = (self._tail + raw)[-TAIL_BYTES:]
                    self._line += len(records)
                    self._keys.update(r.key for r in records)

    def _sync_soon(self) -> None:
        """An fsync within ``SYNC_S`` seconds (not a daemon: it runs before exit)."""
        with self._mutex:
            if self._sync is not None:
                return
            self._sync = threading.Timer(SYNC_S, self.sync)
            self._sync.name = "agentbranch-evidence-sync"
            self._sync.start()

    def sync(self) -> None:
        """Flush what was appended to disk now (``fsync``; else it is within ``SYNC_S``)."""
        with self._mutex:
            timer, self._sync = self._sync, None
        if timer is not None:
            timer.cancel()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return  # (moved or deleted since: the next append reports it)
        try:
            os.fsync(fd)
        except OSError as e:
            log.error("agentbranch.earned: evidence store %s could not be synced: %s", self.path, e)
        finally:
            os.close(fd)

    def keep_only(self, keys: Iterable[str]) -> None:
        """From now on ``read_new`` parses only the lines of these evidence keys and
        skips the others unparsed (``keys()`` then knows only these)."""
        self._needles = tuple(n for k in keys for n in _spellings(k))

    def pop_lost(self) -> str | None:
        """Why the file being read was lost since the last call (``None``: it was not)."""
        with self._mutex:
            why, self._lost = self._lost, None
            return why

    def read_new(self) -> list[Evidence]:
        """Records appended since the last read (by any process), in file order: at
        most about ``READ_BYTES`` of them per call (call again until it returns none)."""
        with self._mutex, self._reading():
            if self._pending:
                out, self._pending = self._pending, []
                return out
            return self._read_new()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """An ``OSError`` while reading (permission denied, an I/O error) is an
        ``InvalidFileError`` naming the store."""
        try:
            yield
        except FileNotFoundError:
            raise
        except OSError as e:
            raise InvalidFileError(
                f"evidence store {self.path} cannot be read ({e.strerror or type(e).__name__}); "
                "give this process read and write access to it and to its folder (for its "
                ".lock file), or point Earned(store=...) at another file; nothing was changed"
            ) from None

    def load(self, key: str) -> list[Evidence]:
        """Every record of ``key`` (each id once), in replay order: scans the file."""
        out: dict[str, Evidence] = {}
        with self._reading():
            for rec in self._scan(key):
                out.setdefault(rec.id, rec)
        return sorted(out.values(), key=lambda r: r.order)

    def keys(self) -> list[str]:
        with self._mutex, self._reading():
            # What this reads is kept for ``read_new``: a report asking for the keys must
            # not make the incremental reader skip those records.
            while new := self._read_new():
                self._pending += new
            return sorted(self._keys)

    def _check_identity(self) -> None:
        """If the file read so far is no longer there, note why (``pop_lost``) and start
        again from the new file's first byte."""
        if self._identity is None:
            return
        try:
            st = self.path.stat()
        except FileNotFoundError:
            st = None
        if st is None:
            why = "was moved or deleted"
        elif (st.st_dev, st.st_ino) != self._identity:
            why = "was replaced by another file"
        elif st.st_size < self._offset:
            why = f"shrank ({st.st_size} < {self._offset} bytes read)"
        elif self._tail and not self._tail_still_there():
            why = "was emptied and written again (copytruncate?)"
        else:
            return
        self._lost = f"evidence store {self.path} {why} while serving"
        self._restart()

    def _restart(self) -> None:
        """Read from the file's first byte again."""
        self._offset = self._line = 0
        self._tail = b""  # the last bytes read (a file emptied and refilled is noticed)
        self._identity: tuple[int, int] | None = None
        self._hash = hashlib.sha256()  # of the bytes before ``_offset`` (checkpoints)
        self._keys: set[str] = set()

    def _tail_still_there(self) -> bool:
        """Whether the bytes just before the read position are still the ones read: a
        file emptied in place and refilled past that position is another file."""
        try:
            with open_regular(self.path, self._not_regular) as f:
                f.seek(self._offset - len(self._tail))
                return f.read(len(self._tail)) == self._tail
        except OSError:
            return False

    def position(self) -> dict[str, Any]:
        """Where reading stands: offset, lines, the SHA-256 of the bytes before the
        offset and the keys seen (what a checkpoint records)."""
        with self._mutex:
            return {
                "offset": self._offset,
                "line": self._line,
                "sha256": self._hash.hexdigest(),
                "keys": sorted(self._keys),
            }

    def resume(self, offset: int, line: int, sha256: str | None, keys: Sequence[str] = ()) -> bool:
        """Continue reading at ``offset`` if the file's bytes before it hash to
        ``sha256`` (a checkpoint); otherwise (or with ``sha256=None``) from the start."""
        with self._mutex:
            self._restart()
            if sha256 is None or not self.path.exists():
                return sha256 is None
            h, left = hashlib.sha256(), offset
            with open_regular(self.path, self._not_regular) as f:
                st = os.fstat(f.fileno())
                if st.st_size < offset:
                    return False
                tail = b""
                while left > 0 and (block := f.read(min(left, 8 << 20))):
                    h.update(block)
                    tail = (tail + block)[-TAIL_BYTES:]
                    left -= len(block)
            if left or h.hexdigest() != sha256:
                return False
            self._offset, self._line, self._hash, self._tail = offset, line, h, tail
            self._identity, self._keys = (st.st_dev, st.st_ino), set(keys)
            return True

    def _first_line_ok(self, f: Any, size: int) -> bool:
        """Whether the file's first line is an evidence record (a torn single line of
        ours counts: it parses as the start of one)."""
        f.seek(0)
        head = f.read(min(size, 1 << 20))
        try:
            self._parse_line(head.split(b"\n", 1)[0], 1)
            return True
        except (InvalidFileError, RecursionError):
            return b"\n" not in head and head.lstrip().startswith(
                b'{"schema": "agentbranch.earned/'
            )

    def _repair_tail(self) -> None:
        """Before an append (under the file lock): refuse a file that is not an evidence
        store; move a torn final line aside to ``path + '.torn'``."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            return
        with open_regular(self.path, self._not_regular) as f:
            f.seek(size - 1)
            whole = f.read(1) == b"\n"
            if whole and self._identity is not None:
                return
            if not self._first_line_ok(f, size):
                raise InvalidFileError(
                    f"evidence store {self.path} does not start with an agentbranch evidence "
                    "record: it belongs to something else. Nothing was written; point "
                    "Earned(store=...) at a file of its own"
                )
            if whole:
                return
            start = max(0, size - (1 << 20))
            f.seek(start)
            tail = f.read(size - start)
        cut = start + tail.rfind(b"\n") + 1 if b"\n" in tail else start
        if cut == 0 and start > 0:
            raise InvalidFileError(
                f"evidence store {self.path} ends in more than 1 MiB without a newline; "
                "it is not an evidence store a writer of ours left. Nothing was written"
            )
        torn = Path(str(self.path) + ".torn")
        append_regular(torn, tail[cut - start :] + b"\n", self._not_regular, mode=self.mode)
        os.truncate(self.path, cut)
        log.error(
            "agentbranch.earned: evidence store %s ended in a torn line (%d bytes at byte "
            "offset %d, a writer that stopped mid-append); moved to %s, serving continues",
            self.path,
            size - cut,
            cut,
            torn,
        )

    def _read_new(self) -> list[Evidence]:
        if not self.path.exists():
            self._check_identity()
            return []
        self._check_kind()
        self._check_identity()
        out: list[Evidence] = []
        with open_regular(self.path, self._not_regular) as f:
            st = os.fstat(f.fileno())
            size = st.st_size
            if size < self._offset:
                return out
            f.seek(self._offset)
            chunk = f.read(min(size - self._offset, READ_BYTES))
            if b"\n" not in chunk and self._offset + len(chunk) < size:
                chunk += f.read(size - self._offset - len(chunk))  # one very long line
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next read
        line = self._line
        needles = self._needles
        for raw in chunk[:end].splitlines():
            line += 1
            if needles is not None and not any(n in raw for n in needles):
                continue  # another key's line (``keep_only``): a substring test, no parse
            rec = self._parse_line(raw, line)
            if rec is not None:
                out.append(rec)
        self._keys.update(r.key for r in out)
        self._hash.update(memoryview(chunk)[:end])
        self._line = line
        self._offset += end
        if end:  # the file is known to hold evidence from here on
            self._tail = bytes(chunk[max(0, end - TAIL_BYTES) : end])
            self._identity = (st.st_dev, st.st_ino)
        return out

    def _parse_line(self, raw: bytes, line: int) -> Evidence | None:
        where = f"evidence store {self.path}, line {line}"
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise InvalidFileError(f"{where} is not UTF-8 text") from None
        except json.JSONDecodeError as e:
            raise InvalidFileError(f"{where} is not JSON ({e.msg})") from None
        return parse_record(obj, where)

    def _scan(self, key: str | None) -> Iterator[Evidence]:
        """Every record of ``key`` (``None``: of every key) in file order, one line read
        and parsed at a time (only the lines of ``key``)."""
        if not self.path.exists():
            return
        needles = (b"",) if key is None else _spellings(key)
        with open_regular(self.path, self._not_regular) as f:
            for line, raw in enumerate(f, 1):
                if not raw.endswith(b"\n"):
                    break
                if any(n in raw for n in needles):
                    rec = self._parse_line(raw, line)
                    if rec is not None and (key is None or rec.key == key):
                        yield rec

    def records(self) -> Iterator[Evidence]:
        """Every record in the file, in file order, one parsed at a time (independent of
        ``read_new``'s position)."""
        with self._reading():
            yield from self._scan(None)


def _spellings(key: str) -> tuple[bytes, ...]:
    """How ``key`` can be spelt in a line: UTF-8 (as ``append`` writes it) or with
    ``\\u`` escapes; a line holding neither is not ``key``'s."""
    return tuple({json.dumps(key, ensure_ascii=False).encode("utf-8"), json.dumps(key).encode()})
