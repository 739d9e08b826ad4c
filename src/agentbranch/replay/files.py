"""The cassette file on disk: symlinks followed, only regular files opened (non-blocking,
so a FIFO never blocks), writers serialized on a ``filelock`` lock file next to the
target; a writer appends whole lines with one write or replaces the file atomically.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from filelock import FileLock, Timeout

from agentbranch.core.errors import AgentBranchError, ConfigurationError
from agentbranch.core.files import SHARED_MODE, append_regular, kind, open_regular


class CassetteFormatError(AgentBranchError, ValueError):
    """A cassette file cannot be read (the message names the file, the line and the
    field), or an entry is too large to record (refused before it is written)."""


#: How long a writer waits for another process's lock before giving up (seconds).
LOCK_TIMEOUT = 120.0


def not_regular(path: Path, mode: int) -> Exception:
    what = kind(mode)
    return CassetteFormatError(
        f"cassette {path} is {what}, not a regular file; a cassette is a JSON Lines file: "
        "give a file path (a missing file is created when something is recorded)"
    )


def status(path: Path) -> os.stat_result | None:
    """``stat`` of what ``path`` points to, ``None`` when nothing is there yet (also a
    dangling symlink, whose target is created on the first write). Raises
    ``CassetteFormatError`` for a symlink loop or anything that is not a regular file."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CassetteFormatError(
                f"cassette {path} is a symlink loop (it never reaches a file); point the "
                "link at a file or give the file's own path"
            ) from None
        raise CassetteFormatError(f"cannot read cassette {path}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise not_regular(path, st.st_mode)
    return st


def target(path: Path) -> Path:
    """The file ``path`` names once symlinks are followed (``path`` itself if it is none)."""
    return Path(os.path.realpath(path))


@contextlib.contextmanager
def open_read(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for reading, refused unless it is a regular file (never blocks)."""
    try:
        with open_regular(path, lambda mode: not_regular(path, mode)) as f:
            yield f
    except FileNotFoundError:
        raise CassetteFormatError(f"no cassette at {path}; record one first") from None
    except OSError as e:
        status(path)  # a loop or a directory says so
        raise CassetteFormatError(f"cannot read cassette {path}: {e.strerror or e}") from None


def append(path: Path, data: bytes) -> os.stat_result:
    """Append ``data`` to the file ``path`` names (created if missing) with one write;
    returns its ``stat`` after. Call under ``lock``. A new cassette is readable as the
    umask allows (``SHARED_MODE``): cassettes are meant to be committed."""
    return append_regular(path, data, lambda mode: not_regular(path, mode), mode=SHARED_MODE)


def replace(path: Path, data: bytes) -> None:
    """Replace the file ``path`` names (its symlink target) with ``data`` atomically,
    keeping the old file's permissions. Call under ``lock``."""
    real = target(path)
    st = status(path)
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode) if st is not None else 0o644)
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Lock:
    """The inter-process lock of one cassette (``filelock`` on ``.<name>.lock`` next to the
    symlink target), reentrant within a process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock: FileLock | None = None

    def _file_lock(self) -> FileLock:
        real = target(self.path)
        lock_file = real.parent / f".{real.name}.lock"
        if self._lock is None or Path(self._lock.lock_file) != lock_file:  # link retargeted
            # No soft fallback: its marker file cannot be removed early (see ``writing``).
            self._lock = FileLock(
                lock_file,
                timeout=LOCK_TIMEOUT,
                thread_local=False,
                fallback_to_soft=False,
            )
        return self._lock

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Held while writing; ``OSError`` if the folder cannot be made or written."""
        target(self.path).parent.mkdir(parents=True, exist_ok=True)
        lock = self._file_lock()
        try:
            lock.acquire()
        except Timeout:
            raise ConfigurationError(
                f"cassette {self.path}: another process has held its lock "
                f"({lock.lock_file}) for {LOCK_TIMEOUT:.0f} s; is a recording stuck? Stop "
                "it, then run again"
            ) from None
        try:
            yield
        finally:
            # Removed while still locked (no lock files pile up next to committed
            # cassettes): a waiter that then locks the unlinked file retries on a fresh one
            # (filelock checks).
            if lock.lock_counter == 1:
                with contextlib.suppress(OSError):
                    os.unlink(lock.lock_file)
            lock.release()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Held while reading a file that exists, so no half-written line is seen; a folder
        where the lock file cannot be created (read-only) is read without it."""
        with contextlib.ExitStack() as held:
            with contextlib.suppress(OSError):
                held.enter_context(self.writing())
            yield


__all__ = [
    "LOCK_TIMEOUT",
    "CassetteFormatError",
    "Lock",
    "append",
    "open_read",
    "replace",
    "status",
    "target",
]
