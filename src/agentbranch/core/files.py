"""The files agentbranch reads and writes (JSON, JSON Lines, cassettes, audit sinks,
evidence stores), with errors a user can act on.

Every problem reading one is an ``InvalidFileError`` naming the file (and the line): a
missing file, a directory, a FIFO or device (refused before opening, so a read never
blocks), bytes that are not UTF-8, a line longer than ``MAX_LINE_BYTES``, broken JSON,
JSON nested too deeply, or ``NaN``/``Infinity`` (not JSON, though Python writes them).
Appends are one write, so writers in other processes never split a line. A record a
newer release wrote says "upgrade" (``newer_release``), never "invalid".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from agentbranch.core.errors import ConfigurationError, InvalidFileError

__all__ = [
    "EVIDENCE_SCHEMA",
    "EVIDENCE_VERSION",
    "MAX_LINE_BYTES",
    "append_regular",
    "check_regular",
    "check_writable",
    "is_evidence_schema",
    "json_lines",
    "keep_private",
    "kind",
    "loads",
    "newer_release",
    "open_regular",
    "read_json",
    "short_repr",
]

#: The longest line a JSON Lines file may have (a record with a long state fits easily).
MAX_LINE_BYTES = 16 * 1024 * 1024


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}

#: Opening never waits: a FIFO with no writer (or reader) fails at once instead.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, for messages ("a FIFO (named pipe)")."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


@contextlib.contextmanager
def open_regular(path: Path, refuse: Callable[[int], Exception]) -> Iterator[BinaryIO]:
    """``path`` opened for binary reading; ``refuse(st_mode)`` is raised unless it is a
    regular file. Never blocks (a FIFO is refused, not read)."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise refuse(st.st_mode)
    with os.fdopen(fd, "rb") as f:
        yield f


#: The permissions of a file agentbranch creates that holds user text (evidence stores,
#: audit files): owner-only, whatever the umask. Cassettes, meant to be committed, use
#: ``SHARED_MODE`` (under the umask).
PRIVATE_MODE = 0o600
SHARED_MODE = 0o666


def check_mode(mode: Any, who: str) -> int:
    """``mode`` if it is a file permission (``0o600``, ``0o640``, ...), else a
    ``ConfigurationError`` naming ``who``'s parameter."""
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
        raise ConfigurationError(
            f"{who}(mode=...) must be file permissions from 0o000 to 0o777 (e.g. 0o600, "
            f"owner-only; 0o640, group-readable), got {mode!r}"
        )
    return mode


#: Files already warned about by ``keep_private`` (once per path in a process).
_warned_wide: set[str] = set()
_warned_lock = threading.Lock()


def keep_private(path: Path | str, st: os.stat_result, mode: int, what: str) -> None:
    """A file agentbranch writes user text to (``what``, e.g. ``"evidence store"``) that
    exists with more permissions than ``mode`` (a ``0o644`` store made by hand, or by an
    older release): tightened to ``mode`` where this process owns it, else left as it is;
    either way a WARNING on the ``agentbranch`` logger, once per path in a process."""
    have = stat.S_IMODE(st.st_mode)
    if os.name != "posix" or not have & ~mode:
        return
    wanted = have & mode
    owner = st.st_uid == os.geteuid()
    if owner:
        try:
            os.chmod(path, wanted)
            done = f"agentbranch tightened it to {oct(wanted)}"
        except OSError as e:
            owner, done = False, f"it could not be tightened ({e.strerror or e})"
    else:
        done = "it is not this account's file, so it was left as it is"
    with _warned_lock:
        if str(path) in _warned_wide:
            return
        _warned_wide.add(str(path))
    logging.getLogger("agentbranch").warning(
        "agentbranch: %s %s existed with permissions %s, wider than %s, and it holds user "
        "text; %s%s",
        what,
        path,
        oct(have),
        oct(mode),
        done,
        "" if owner else f" (run: chmod {oct(mode)[2:]} {path})",
    )


def append_regular(
    path: Path,
    data: bytes,
    refuse: Callable[[int], Exception],
    *,
    mode: int = PRIVATE_MODE,
    private: str | None = None,
) -> os.stat_result:
    """Append ``data`` to ``path`` (created if missing, with permissions ``mode``, which
    the umask may only narrow) in one ``write`` on an ``O_APPEND`` descriptor, and return
    its ``stat`` after. ``refuse(st_mode)`` is raised when ``path`` is not a regular file
    (a FIFO fails at once). With ``private`` (what the file is), an existing wider file
    goes through ``keep_private`` first."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NONBLOCK, mode)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refuse(st.st_mode)
        if private is not None:
            keep_private(path, st, mode, private)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return os.fstat(fd)
    finally:
        os.close(fd)


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters for messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class DuplicateKeyError(ValueError):
    """A JSON object named this key twice (JSON would keep only the last, silently)."""


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook`` refusing a repeated key (``DuplicateKeyError``)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def loads(text: str | bytes, where: str, *, unique_keys: bool = False) -> Any:
    """``json.loads`` with every failure an ``InvalidFileError`` starting with ``where``;
    with ``unique_keys``, an object naming a key twice is one too (JSON would keep the
    last silently)."""
    try:
        hook = unique_object if unique_keys else None
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=hook)
    except DuplicateKeyError as e:
        raise InvalidFileError(
            f"{where}: the key {e.args[0]!r} appears twice in one object (JSON would keep "
            "only the last); keep one"
        ) from None
    except RecursionError:
        raise InvalidFileError(
            f"{where}: JSON nested too deeply to read; agentbranch never writes such files"
        ) from None
    except json.JSONDecodeError as e:
        raise InvalidFileError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
    except ValueError as e:  # NaN / Infinity
        raise InvalidFileError(f"{where}: not valid JSON ({e})") from None


def check_regular(path: Path, what: str, hint: str = "") -> None:
    """Refuse, by name, a path that is not a regular file (following symlinks); ``hint``
    follows the message for a missing file."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InvalidFileError(
            f"{what} {path} does not exist" + (f"; {hint}" if hint else "")
        ) from None
    except OSError as e:  # a symlink loop, a permission denied on a folder, ...
        raise InvalidFileError(f"{what} {path} cannot be read: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise InvalidFileError(f"{what} {path} is a directory, not a file")
    if not stat.S_ISREG(mode):
        raise InvalidFileError(
            f"{what} {path} is not a regular file (a FIFO, socket or device); give a file"
        )


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidFileError(
            f"{where}: not UTF-8 text (byte {e.start} of the line); the file was written by "
            "another program or is damaged"
        ) from None


def read_json(path: str | os.PathLike[str], what: str) -> Any:
    """The JSON document in ``path`` (a ``what`` for messages: "questions file")."""
    path = Path(path)
    check_regular(path, what)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InvalidFileError(f"{what} {path} cannot be read: {e.strerror or e}") from None
    text = _decode(raw, f"{what} {path}").lstrip("\ufeff")
    if not text.strip():
        raise InvalidFileError(f"{what} {path} is empty")
    return loads(text, f"{what} {path}", unique_keys=True)


def json_lines(
    path: str | os.PathLike[str], what: str, hint: str = ""
) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for every non-blank line of a JSON Lines file, streamed.
    Lines starting with ``//`` are comments. The file is checked before the first value
    is asked for."""
    path = Path(path)
    check_regular(path, what, hint)
    try:
        f = path.open("rb")
    except OSError as e:
        raise InvalidFileError(f"{what} {path} cannot be read: {e.strerror or e}") from None
    with f:
        for number, raw in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
            where = f"{path}:{number}"
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise InvalidFileError(
                    f"{where}: a line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB; "
                    f"is this the {what}?"
                )
            line = _decode(raw, where).strip().lstrip("\ufeff")
            if not line or line.startswith("//"):
                continue
            yield number, loads(line, where)


def check_writable(path: str | os.PathLike[str], what: str) -> None:
    """Refuse, before any work is done, an output path that cannot be written: a
    directory, a folder that does not exist, a FIFO or device, a read-only folder."""
    path = Path(path)
    target = path.resolve() if path.is_symlink() else path
    if target.is_dir():
        raise InvalidFileError(f"{what} {path} is a directory; give a file name in it")
    if target.exists() and not target.is_file():
        raise InvalidFileError(f"{what} {path} is not a regular file (a FIFO or device)")
    folder = target.parent
    if not folder.is_dir():
        raise InvalidFileError(
            f"{what} {path}: folder {folder} does not exist; create it first (mkdir -p {folder})"
        )
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise InvalidFileError(f"{what} {path} cannot be written (permission denied)")


# -- record schemas ---------------------------------------------------------------------

#: An evidence record's ``schema`` (``Earned(store=...)``), and its version number.
EVIDENCE_SCHEMA = "agentbranch.earned/1"
EVIDENCE_VERSION = 1

_EARNED = re.compile(r"agentbranch\.earned/(\d+)")


def is_evidence_schema(value: Any) -> bool:
    """Whether ``value`` names an evidence schema, of this release or another."""
    return isinstance(value, str) and _EARNED.fullmatch(value) is not None


def newer_release(raw: Any) -> str | None:
    """Why ``raw`` (a stored record) cannot be read when a newer release of agentbranch
    wrote it (its ``schema`` names a later version), else ``None``."""
    schema = raw.get("schema") if isinstance(raw, dict) else None
    found = _EARNED.fullmatch(schema) if isinstance(schema, str) else None
    if found is None or int(found.group(1)) <= EVIDENCE_VERSION:
        return None
    return (
        f"written by a newer release of agentbranch (schema {schema}; this release reads "
        f"{EVIDENCE_SCHEMA}); upgrade agentbranch to read this store"
    )
