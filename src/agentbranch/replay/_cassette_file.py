"""The cassette's file: catch up with what other writers appended, append, rewrite.

``CassetteFile`` is mixed into ``agentbranch.replay.cassette.Cassette``, whose lookup
tables it fills; every method runs under the cassette's thread lock and file lock."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.replay import files
from agentbranch.replay import format as fmt

__all__ = ["CassetteFile", "encode"]


class CassetteFile:
    """The file half of ``Cassette`` (see module doc)."""

    path: Any
    mode: str
    recording: str
    readers: dict[str, Any]
    chat_models: dict[str, Any]
    _lock: Any
    _file_lock: Any
    _parser: Any
    _seen: Any
    _started: bool
    _reads: dict[Any, Any]
    _chats: dict[Any, Any]
    _loaded: set[Any]
    _teachers: dict[str, Any]
    _highest: dict[str, int]
    _held: Callable[[str], None]  # the cassette's: notes a repeat the file holds
    _thresholds: dict[str, Any]
    _versions: dict[str, Any]
    _samples: dict[str, Any]
    _refuse_foreign: Callable[[], None]  # the cassette's: refuses another program's file

    def _commit(self, lines: Callable[[], list[dict[str, Any]]]) -> None:
        """Under the file lock: catch up with the file (other writers' lines), then append
        what ``lines()`` returns (it runs under the lock, so it sees the file's current
        declarations)."""
        try:
            with self._lock, self._file_lock.writing():
                self._prepare()
                new = lines()
                if new:
                    self._append(new)
        except OSError as e:
            raise ConfigurationError(
                f"cannot write the cassette {self.path}: {e}; check that its folder is a "
                "writable directory (or replay with mode 'none')"
            ) from e

    def _prepare(self) -> None:
        """Make the file ready for appending: started (mode ``all``), caught up, with a
        format-2 header."""
        if self.mode == "all" and not self._started:
            self._start()
            return
        self._sync()
        assert self._parser is not None
        if self._parser.version is None:  # no file yet, or an empty one
            self._append([fmt.header_line(self.recording)])
        elif self._parser.version < fmt.FORMAT_VERSION:
            self._rewrite(chats=True)  # an older format: upgraded, every entry kept

    def _start(self) -> None:
        """Mode ``all``: start the file afresh, or join it when another process of this
        recording (same ``recording`` id) started it."""
        self._started = True
        head = None
        if files.status(self.path) is not None:
            self._refuse_foreign()
            head = fmt.first_object(self.path)
        if (
            isinstance(head, dict)
            and head.get(fmt.MARK) == fmt.FORMAT_VERSION
            and head.get("recording") == self.recording
        ):
            self._sync()
            return
        data = fmt.dumps(fmt.header_line(self.recording)).encode("utf-8")
        if files.status(self.path) is None:
            files.append(self.path, data)
        else:
            files.replace(self.path, data)
        self._reload()

    def _rewrite(self, *, chats: bool) -> None:
        """Replace the file by what this process holds (all of it: it has just caught up),
        as format 2."""
        assert self._parser is not None
        data = fmt.CassetteData(
            readers=dict(self._parser.data.readers),
            chat_models=dict(self._parser.data.chat_models),
            reads=list(self._reads.values()),
            chats=list(self._chats.values()),
            thresholds=dict(self._parser.data.thresholds),
            versions=dict(self._parser.data.versions),
            samples=dict(self._parser.data.samples),
            teachers=list(self._teachers.values()),
        )
        recording = self._parser.data.recording or self.recording
        files.replace(self.path, fmt.body(data, recording, chats=chats))
        self._reload()

    def _reload(self) -> None:
        self._parser, self._seen = None, None
        self._sync()

    def _sync(self, *, initial: bool = False) -> None:
        """Catch up with the file: parse the lines appended since this process last read
        it, or all of it when it was replaced. Call under both locks."""
        if files.status(self.path) is None:  # nothing there (yet, or any more)
            fresh = self._parser is None or self._parser.version is not None
            if fresh:
                self._parser, self._seen = fmt.Parser(self.path), None
            self._absorb(fresh, initial)
            return
        with files.open_read(self.path) as f:
            st = os.fstat(f.fileno())
            ident = (st.st_dev, st.st_ino)
            fresh = self._parser is None or ident != self._seen or st.st_size < self._parser.offset
            if fresh:
                self._parser = fmt.Parser(self.path)
            assert self._parser is not None
            self._parser.feed_file(f)
        self._seen = ident
        if initial and self._parser.version is None and self.mode == "none":
            raise fmt.CassetteFormatError(f"{self.path} is empty; {fmt.RERECORD}")
        self._absorb(fresh, initial)

    def _append(self, lines: list[dict[str, Any]]) -> None:
        """Append ``lines`` (one write) and take them in as if read back."""
        assert self._parser is not None
        data = encode(lines, self.path)  # an entry too large to load is refused here
        st = files.append(self.path, data)
        self._seen = (st.st_dev, st.st_ino)
        self._parser.feed_lines(data.splitlines(keepends=True))
        self._absorb(False, False)

    def _absorb(self, fresh: bool, initial: bool) -> None:
        """Take the parser's new entries into the lookup tables (all of them, replacing
        what was there, when the file was read from its start)."""
        assert self._parser is not None
        if fresh:
            self._reads.clear()
            self._chats.clear()
            self._teachers.clear()
            self._highest.clear()
        reads, chats = self._parser.take()
        for r in reads:
            self._reads[(r.reader, r.key)] = r
            if initial:
                self._loaded.add(("read", r.reader, r.key))
        for c in chats:
            self._chats[c.key] = c
            self._held(c.key)
            if initial:
                self._loaded.add(("chat", c.model, c.key))
        for t in self._parser.take_teachers():
            self._teachers[t.key] = t
            self._held(t.key)
            if initial:
                self._loaded.add(("teacher", t.role, t.key))
        self.readers = dict(self._parser.data.readers)
        self.chat_models = dict(self._parser.data.chat_models)
        self._thresholds = dict(self._parser.data.thresholds)
        self._versions = dict(self._parser.data.versions)
        self._samples = dict(self._parser.data.samples)


def encode(lines: Iterable[dict[str, Any]], path: Path) -> bytes:
    """The lines to append to the cassette at ``path``, as bytes; ``CassetteFormatError``,
    before anything is written, when one is longer than ``MAX_RECORD_BYTES``."""
    out = []
    for line in lines:
        data = fmt.dumps(line).encode("utf-8")
        if len(data) > fmt.MAX_RECORD_BYTES:
            raise fmt.CassetteFormatError(
                f"cannot record {_entry_name(line)} in cassette {path}: its line would be "
                f"{len(data):,} bytes, more than a cassette line may hold "
                f"(agentbranch.replay.format.MAX_RECORD_BYTES={fmt.MAX_RECORD_BYTES:,}). It was "
                "not recorded; the cassette keeps every other entry and still loads. A "
                "reply this large is usually a model repeating itself (give it a smaller "
                "max_tokens); a read this large, a state to shorten before it is decided"
            )
        out.append(data)
    return b"".join(out)


def _entry_name(line: dict[str, Any]) -> str:
    """What a cassette line records, for an error (``the teacher reply of ...``)."""
    kind = line.get("kind")
    if kind == "read":
        return f"the read of reader {line.get('reader')!r}"
    if kind == "chat":
        return f"the reply of chat model {line.get('model')!r}"
    if kind == "teacher":
        return f"the {line.get('role')} teacher's reply for question {line.get('question')!r}"
    return f"a {kind} line"
