"""``Cassette``: one file shared by every reader and chat model of a run (docs/replay.md).

Over 500 lines: one class, the run's shared cassette, whose modes, repeat numbering,
teacher entries and file (caught up with, appended to, rewritten) must be read together.
"""

from __future__ import annotations

import contextvars
import functools
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentbranch.core.errors import AgentBranchError, ConfigurationError
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine.readers.base import Reader
from agentbranch.replay import files
from agentbranch.replay import format as fmt
from agentbranch.replay._cassette_protocol import Answered
from agentbranch.replay.format import ChatEntry, ReadEntry, ReaderInfo, TeacherEntry
from agentbranch.replay.keys import (
    chat_key,
    chat_model_id,
    chat_model_name,
    generations_from_json,
    generations_to_json,
    last_content,
    messages_summary,
    read_text,
    request_key,
    request_summary,
    short,
)
from agentbranch.replay.misses import (
    UNSEEN,
    UNSEEN_CHAT,
    UNSEEN_VERSION,
    Diffs,
    explain,
    fields_note,
    nearest_chat,
    nearest_decision,
    nearest_read,
    nearest_teacher,
)
from agentbranch.replay.modes import RecordMode, resolve_mode
from agentbranch.replay.readers import CassetteReader
from agentbranch.replay.teachers import (
    CassetteTeachers,
    current_call,
    describe,
    identity,
    input_summary,
)


class ReplayMissError(AgentBranchError, LookupError):
    """A replayed run asked for a read, a chat reply or a teacher's answer the cassette
    does not hold."""


Identity = tuple[str, str, str]  # (kind: "read" | "chat" | "teacher", who, key)
#: The field of an entry line that says who it belongs to (an ``Identity``'s ``who``).
_WHO = {"read": "reader", "chat": "model", "teacher": "role"}

#: The chat repeat this context looked up and the model is answering live: (cassette,
#: exchange key, the repeat's key); LangChain records the reply in the same context.
_ASKED: contextvars.ContextVar[tuple[int, str, str] | None] = contextvars.ContextVar(
    "agentbranch_chat_asked", default=None
)


class Cassette:
    """A cassette file and its record mode. Several processes may record into one
    cassette at once; what is refused and why: docs/replay.md, "The cassette file".

    Args:
        path: the JSON Lines file (created when something is recorded).
        mode: ``all``, ``new``, ``none`` or ``passthrough`` (see ``agentbranch.replay.modes``);
            ``None`` picks ``none`` when the ``CI`` environment variable is set, else ``new``.
        env: the environment to read ``CI`` from (default ``os.environ``; never written).
        recording: an id of this recording run. In mode ``all`` the first write rewrites
            the file unless its header carries the same id, so processes re-recording one
            cassette together pass one id (the pytest plugin passes pytest-xdist's run id);
            default: a fresh id per ``Cassette``.

    Entries are appended as they happen; the file is only rewritten (atomically) to start
    a re-recording (mode ``all``), to upgrade an older format, or by ``clear_chats``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: RecordMode | str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        recording: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.mode: RecordMode = resolve_mode(mode, env)
        self.recording = recording or uuid.uuid4().hex
        self._shown = _shown(self.path)
        self._lock = threading.RLock()
        self._file_lock = files.Lock(self.path)
        # What this process has read of the file (its entries), and the file (device,
        # inode) the parser's offset is in.
        self._parser = fmt.Parser(self.path)
        self._seen: tuple[int, int] | None = None
        self._loaded: set[Identity] = set()
        self._played: set[Identity] = set()
        #: Short descriptions of every miss this cassette raised.
        self.misses: list[str] = []
        self._started = False  # mode all: this run started (or joined) the file
        # How often this test asked each key of each kind ("repeat": teacher calls and
        # chat exchanges; per decision: Earned thresholds, learning versions, audits' draws;
        # "reader": readers made without an id).
        self._asked: dict[str, dict[str, int]] = {}
        self._opened: list[Reader] = []
        #: The misses of audits: raised on an audit's worker thread, where they fail the
        #: audit but not the run (the pytest plugin fails the test that made them).
        self.audit_misses: list[str] = []
        if self.mode == "passthrough":
            return
        st = files.status(self.path)  # a loop, a FIFO, a directory: refused now
        if st is None:
            return
        if self.mode == "all":
            self._refuse_foreign()
        elif st.st_size or self.mode == "none":
            with self._lock, self._file_lock.reading():
                self._sync(initial=True)

    def _refuse_foreign(self) -> Any:
        """Mode ``all`` rewrites the file: only if it is a cassette (or empty); returns its
        first object (``fmt.first_object``)."""
        first = fmt.first_object(self.path)
        if first is not None and not fmt.looks_like_cassette(first):
            raise fmt.CassetteFormatError(
                f"refusing to overwrite {self.path}: it exists and is not an agentbranch "
                "cassette (its first line is not a cassette header). Move it away or give "
                "the cassette another path"
            )
        return first

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r}, mode={self.mode!r})"

    @property
    def readers(self) -> dict[str, ReaderInfo]:
        """The reader ids the file declares, each with the reader that recorded it."""
        return self._parser.data.readers

    # -- what a test builds -------------------------------------------------------------

    def reader(
        self, reader: Reader | Callable[[], Reader] | None = None, *, id: str | None = None
    ) -> CassetteReader:
        """A reader answering from this cassette; ``reader`` (a ``Reader`` or a function
        building one, called only when something must be read live) records misses.

        ``id`` names the reader in the cassette (default ``reader-1``, ``reader-2`` ... in
        the order readers are made)."""
        with self._lock:
            if id is None:
                id = f"reader-{self._ask('reader', '') + 1}"
            made = CassetteReader(self, reader, id=id)
            self._opened.append(made)
            return made

    __call__ = reader

    @functools.cached_property
    def chat_cache(self) -> Any:
        """A ``langchain_core.caches.BaseCache`` backed by this cassette: pass it as any
        LangChain chat model's ``cache=`` and its calls are recorded and replayed."""
        from agentbranch.replay.chat import CassetteCache

        return CassetteCache(self)

    def chat_model(self, model: Any) -> Any:
        """A copy of the LangChain chat model ``model`` whose calls go through this
        cassette (``model.model_copy(update={"cache": cassette.chat_cache})``).

        Unless the mode is ``passthrough``, the copy also has ``disable_streaming=True``:
        LangChain's native ``stream``/``astream`` bypass every cache, so ``stream()``
        then answers through ``invoke`` (recorded and replayed, as one chunk) instead of
        calling the model live. It does not change the model's ``llm_string``."""
        fields = getattr(type(model), "model_fields", {})
        if not hasattr(model, "model_copy") or "cache" not in fields:
            raise ConfigurationError(
                f"{type(model).__name__} is not a LangChain chat model (no 'cache' field); "
                "attach cassette.chat_cache to the chat model inside it"
            )
        update: dict[str, Any] = {"cache": self.chat_cache}
        if self.mode != "passthrough" and "disable_streaming" in fields:
            update["disable_streaming"] = True
        return model.model_copy(update=update)

    def close(self) -> None:
        """Close the live readers this cassette's readers built (from factories). In ``all``
        mode a run that recorded nothing still rewrites the cassette (to an empty one)."""
        with self._lock:
            if self.mode == "all" and not self._started and files.status(self.path):
                self._commit(list)
            opened, self._opened = self._opened, []
        for r in opened:
            r.close()

    def __enter__(self) -> Cassette:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _begin_test(self) -> None:
        """A new test shares this cassette: reader ids count from ``reader-1`` again (and
        repeated decisions from the first)."""
        self._asked = {}

    # -- reads --------------------------------------------------------------------------

    def lookup_read(self, reader_id: str, request: ReadRequest) -> list[LabelRead] | None:
        key = request_key(request)
        with self._lock:
            entry = self._parser.data.reads.get((reader_id, key))
            if entry is None:
                return None
            self._played.add(("read", reader_id, key))
            return list(entry.reads)

    def record_reads(self, reader_id: str, info: ReaderInfo, answered: Answered) -> None:
        if self.mode == "passthrough":
            return
        entries = [
            ReadEntry(reader_id, request_key(request), request_summary(request), list(answer))
            for request, answer in answered
        ]
        self._commit(
            lambda: self._declare_reader(reader_id, info) + [fmt.read_line(e) for e in entries]
        )

    def _declare_reader(self, reader_id: str, info: ReaderInfo) -> list[dict[str, Any]]:
        """The declaration line ``reader_id`` needs in the file (none if it has it)."""
        known = self._parser.data.readers.get(reader_id)
        if known is not None and (known.name, known.model) != (info.name, info.model):
            raise ConfigurationError(
                f"cassette {self.path}: reader {reader_id!r} was recorded with "
                f"{known.name} ({known.model}), this run reads with {info.name} "
                f"({info.model}). Give each reader its own id=..., or re-record the "
                "cassette for the new model (pytest --agentbranch-record=all)"
            )
        if known is None or known.max_options != info.max_options:
            return [fmt.entry_line("reader", info, id=reader_id)]
        return []

    def read_miss(self, reader_id: str, request: ReadRequest, why: str) -> ReplayMissError:
        """The error for a read this cassette cannot answer, with the nearest recorded
        request."""
        with self._lock:
            entries, readers = list(self._parser.data.reads.values()), dict(self.readers)
        summary = request_summary(request)
        question_ids = [q.id for q in request.questions]
        return self._missed(
            f"read of {reader_id} {read_text(summary)}",
            f"has no read for this request of reader {reader_id!r}: state "
            f"{short(request.state, 60)!r}, questions {question_ids}. {why}",
            "request",
            nearest_read(summary, reader_id, entries, readers),
            f"no reads of reader {reader_id!r}",
        )

    # -- chat exchanges -----------------------------------------------------------------

    def lookup_chat(self, prompt: str, llm_string: str) -> list[Any] | None:
        """The recorded reply to this repeat of the exchange, or ``None`` (always in mode
        ``all``)."""
        key = chat_key(prompt, llm_string)
        with self._lock:
            repeat = self.next_repeat(key)
            chats = self._parser.data.chats
            if (entry := None if self.mode == "all" else self.held_repeat(repeat, chats)) is None:
                if self.mode != "none":  # the model answers; record_chat records it as this
                    _ASKED.set((id(self), key, repeat))
                return None
            self._played.add(("chat", entry.model, entry.key))
            reply = entry.reply
        return generations_from_json(reply)

    def record_chat(self, prompt: str, llm_string: str, generations: Sequence[Any]) -> None:
        if self.mode == "passthrough":
            return
        key = self._answered_as(chat_key(prompt, llm_string))
        model = chat_model_id(llm_string)
        entry = ChatEntry(model, key, messages_summary(prompt), generations_to_json(generations))

        def lines() -> list[dict[str, Any]]:
            if model in self._parser.data.chat_models:
                return [fmt.entry_line("chat", entry)]
            name = chat_model_name(llm_string)
            declared = {"kind": "chat_model", "id": model, "name": name, "llm_string": llm_string}
            return [declared, fmt.entry_line("chat", entry)]

        self._commit(lines)

    def chat_miss(self, prompt: str, llm_string: str) -> ReplayMissError:
        """The error for a chat call this cassette cannot answer, with the nearest
        recorded exchange."""
        messages = messages_summary(prompt)
        model, name = chat_model_id(llm_string), chat_model_name(llm_string)
        with self._lock:
            data = self._parser.data
            entries, known = list(data.chats.values()), dict(data.chat_models)
        last = last_content(messages)
        call = current_call()  # the policy's teacher call the model is invoked for, if any
        asked_as = "" if call is None else f", asked as {describe(call, name)}"
        return self._missed(
            f"chat {name} {short(last, 50)!r}",
            f"has no reply of chat model {name} ({model}) to these {len(messages)} messages "
            f"(last: {short(last, 60)!r}){asked_as}. Replay calls no model.",
            "exchange",
            nearest_chat(messages, model, llm_string, name, entries, known),
            "no chat exchanges",
            UNSEEN_CHAT,
            audit=call is not None and call.role == "audit",
        )

    def clear_chats(self) -> None:
        """Forget every recorded chat exchange (and rewrite the file without them)."""

        def rewrite() -> list[dict[str, Any]]:
            self._rewrite(chats=False)
            return []

        self._commit(rewrite)

    # -- repeats ------------------------------------------------------------------------

    def next_repeat(self, key: str) -> str:
        """The key of the next time this test asks the teacher call or chat exchange
        ``key``: ``key`` the first time, then ``key#1``, ``key#2`` ..."""
        n = self._ask("repeat", key)
        return key if n == 0 else f"{key}#{n}"

    def _ask(self, kind: str, key: str) -> int:
        """How often this test asked ``key`` of ``kind`` before now (counting this time)."""
        with self._lock:
            asked = self._asked.setdefault(kind, {})
            asked[key] = asked.get(key, 0) + 1
            return asked[key] - 1

    def held_repeat(self, repeat: str, table: Mapping[str, Any]) -> Any:
        """The entry of ``table`` that answers the repeat ``repeat``: that repeat's, else in
        mode ``none`` the last repeat's recorded (older cassettes hold one answer per
        input); ``None`` when none is held."""
        if self.mode != "none":
            return table.get(repeat)
        base, _, n = repeat.partition("#")
        with self._lock:
            for i in range(int(n or 0), -1, -1):
                if (key := base if i == 0 else f"{base}#{i}") in table:
                    return table[key]
        return None

    def _answered_as(self, key: str) -> str:
        """The repeat a reply to the chat exchange ``key`` is recorded as: the one this
        context looked up, else (recorded without a lookup) the one the next lookup asks."""
        asked = _ASKED.get()
        if asked is not None and asked[:2] == (id(self), key):
            _ASKED.set(None)
            return asked[2]
        # Written without a lookup (the cache used as LangChain's ``BaseCache``: update,
        # then lookup): the repeat the next lookup asks for, so that lookup finds it.
        with self._lock:
            n = self._asked.get("repeat", {}).get(key, 0)
        return key if n == 0 else f"{key}#{n}"

    # -- earned thresholds --------------------------------------------------------------

    def threshold(self, key: str, live: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The threshold in force (``{"take_at", "trust"}``) for the next decision with
        ``key`` (question and state; repeats in order): the recorded one when replaying,
        else ``live()``, recorded."""

        def unheld() -> dict[str, Any]:
            raise ReplayMissError(
                f"cassette {self._shown} (mode 'none') holds no threshold for this decision of "
                f"an Earned policy (recorded before thresholds were kept?); {fmt.RERECORD}"
            )

        return self._per_decision("threshold", key, live, unheld)

    def version(
        self, key: str, live: Callable[[], dict[str, Any]], miss: Callable[[], ReplayMissError]
    ) -> dict[str, Any]:
        """The version of a learning question's read in force (``{"version", "asked",
        "read"}``) for the next decision with ``key``, as ``threshold``; ``miss()``: the
        error when replaying and the cassette holds none (``version_miss``)."""

        def unheld() -> dict[str, Any]:
            raise miss()

        return self._per_decision("version", key, live, unheld)

    def version_miss(
        self, question_id: str, state: str, question: Mapping[str, Any]
    ) -> ReplayMissError:
        """The error for a learning question's decision this cassette holds no version
        for: the nearest recorded read of the question (``question``: its summary fields
        ``type``, ``text``, ``options``) and the fields that differ."""
        with self._lock:
            entries = list(self._parser.data.reads.values())
        return self._missed(
            f"version of {question_id!r} for {short(state, 50)!r}",
            f"holds no version for this decision of learning question {question_id!r} "
            f"(Earned(learn=True)): state {short(state, 60)!r}. Replay asks the version "
            "the recording asked.",
            "request",
            nearest_decision(question_id, state, question, entries),
            f"no reads of question {question_id!r}",
            UNSEEN_VERSION,
        )

    def _per_decision(
        self,
        kind: str,
        key: str,
        live: Callable[[], dict[str, Any]],
        unheld: Callable[[], dict[str, Any]],
    ) -> dict[str, Any]:
        """The recorded ``kind`` line's value for the next decision with ``key`` (``#n``
        numbers its repeats) when replaying, else ``live()``, recorded; ``unheld()`` in mode
        ``none`` when it is not recorded (a value, or it raises the miss)."""
        with self._lock:
            key = f"{key}#{self._ask(kind, key)}"
            held = self._parser.data.decided[kind]
            if self.mode in ("new", "none") and key in held:
                return dict(held[key])
        if self.mode == "none":
            return unheld()  # (outside the lock: a miss reads the cassette's entries)
        value = live()
        if self.mode == "passthrough":
            return value
        self._commit(lambda: [fmt.decision_line(kind, key, value)])
        return value

    # -- teacher calls and audits' draws ------------------------------------------------

    @functools.cached_property
    def teacher_calls(self) -> CassetteTeachers:
        """The policy's teacher calls through this cassette (``agentbranch.replay.teachers``);
        engines reading through one of its readers find it."""
        return CassetteTeachers(self)

    def holds_chat(self, prompt: str, llm_string: str) -> bool:
        """Whether this cassette holds a reply to the exchange (nothing is played)."""
        with self._lock:
            return chat_key(prompt, llm_string) in self._parser.data.chats

    def lookup_teacher(self, key: str) -> TeacherEntry | None:
        """The recorded teacher call ``key`` (a repeat: ``held_repeat``; played), or
        ``None``."""
        with self._lock:
            entry = self.held_repeat(key, self._parser.data.teachers)
            if entry is not None:
                self._played.add(("teacher", entry.role, entry.key))
            return entry

    def holds_teacher(self, key: str) -> bool:
        with self._lock:
            return key in self._parser.data.teachers

    def record_teacher(self, entry: TeacherEntry) -> None:
        if self.mode != "passthrough":
            self._commit(lambda: [fmt.entry_line("teacher", entry)])

    def teacher_miss(self, call: Any) -> Exception:
        """The ``ReplayMissError`` for the teacher call ``call`` this cassette cannot
        answer, with the nearest recorded call of its role and question."""
        name = identity(call.teacher)
        summary = input_summary(call.input)
        with self._lock:
            entries = [
                t
                for t in self._parser.data.teachers.values()
                if (t.role, t.question) == (call.role, call.question_id)
            ]
        return self._missed(
            f"{call.role} {name} of {call.question_id!r} {_excerpt(summary, 50)!r}",
            f"has no answer of {describe(call, name)} to this input ({_excerpt(summary)!r}). "
            "Replay calls no teacher.",
            "call",
            nearest_teacher(name, summary, entries),
            f"no {call.role} call of question {call.question_id!r}",
            UNSEEN_CHAT,
            audit=call.role == "audit",
        )

    def sampled(self, key: str, live: Callable[[], bool], unrecorded: Callable[[], bool]) -> bool:
        """Whether the next decision with ``key`` is audited, as ``threshold``;
        ``unrecorded()`` in mode ``none`` when the cassette was recorded before draws
        were kept."""
        got = self._per_decision(
            "sample", key, lambda: {"audited": bool(live())}, lambda: {"audited": unrecorded()}
        )
        return bool(got["audited"])

    # -- misses -------------------------------------------------------------------------

    def _missed(
        self,
        line: str,
        head: str,
        what: str,
        found: tuple[Any, Diffs],
        holds_none: str,
        unseen: str = UNSEEN,
        *,
        audit: bool = False,
    ) -> ReplayMissError:
        """The error for a miss: what this cassette ``head`` (``has no ...``), then the
        nearest recorded ``what`` and how it differs (``found``; else what the cassette
        holds ``holds_none`` of). Keeps ``line`` in ``misses`` (an audit's in
        ``audit_misses`` too)."""
        nearest, diffs = found
        if not self.path.exists():
            empty = f"There is no cassette file at {self.path} yet."
        else:
            empty = f"The cassette holds {holds_none}."
        with self._lock:
            self.misses.append(line + fields_note(diffs))
            if audit:
                self.audit_misses.append(self.misses[-1])
        head = f"cassette {self._shown} (mode {self.mode!r}) {head}"
        return ReplayMissError(explain(head, what, nearest, diffs, empty, unseen))

    # -- stale entries ------------------------------------------------------------------

    def stale(self) -> list[dict[str, Any]]:
        """Entries loaded from the file that this run never played, oldest first: each
        ``{"kind", "line", "reader" | "model", "summary"}``."""
        out = []
        with self._lock:
            data = self._parser.data
            for kind, who, key in self._loaded - self._played:
                if kind == "read" and (e := data.reads.get((who, key))) is not None:
                    item = {"reader": who, "summary": read_text(e.request)}
                elif kind == "chat" and (e := data.chats.get(key)) is not None:
                    name = data.chat_models.get(who, {}).get("name", who)
                    item = {"model": name, "summary": repr(short(last_content(e.messages), 50))}
                elif kind == "teacher" and (e := data.teachers.get(key)) is not None:
                    summary = f"{e.role} of {e.question!r} {_excerpt(e.input, 50)!r}"
                    item = {"model": e.teacher, "summary": summary}
                else:  # the file was replaced without it meanwhile
                    continue
                out.append({"kind": kind, "line": e.line, **item})
        return sorted(out, key=lambda item: item["line"] or 0)

    # -- the file: catch up with what other writers appended, append, rewrite -----------
    # Every method runs under the cassette's thread lock and file lock.

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
        if self._parser.data.version is None:  # no file yet, or an empty one
            self._append([fmt.header_line(self.recording)])
        elif self._parser.data.version < fmt.FORMAT_VERSION:
            self._rewrite(chats=True)  # an older format: upgraded, every entry kept

    def _start(self) -> None:
        """Mode ``all``: start the file afresh, or join it when another process of this
        recording (same ``recording`` id) started it."""
        self._started = True
        exists = files.status(self.path) is not None
        head = self._refuse_foreign() if exists else None
        if (
            isinstance(head, dict)
            and head.get(fmt.MARK) == fmt.FORMAT_VERSION
            and head.get("recording") == self.recording
        ):
            self._sync()
            return
        data = fmt.dumps(fmt.header_line(self.recording)).encode("utf-8")
        (files.replace if exists else files.append)(self.path, data)
        self._reload()

    def _rewrite(self, *, chats: bool) -> None:
        """Replace the file by what this process holds (all of it: it has just caught up),
        as format 2."""
        data = self._parser.data
        files.replace(self.path, fmt.body(data, data.recording or self.recording, chats=chats))
        self._reload()

    def _reload(self) -> None:
        self._seen = None  # the file was replaced: read it from its start
        self._sync()

    def _sync(self, *, initial: bool = False) -> None:
        """Catch up with the file: parse the lines appended since this process last read
        it, or all of it when it was replaced. Call under both locks."""
        if files.status(self.path) is None:  # nothing there (yet, or any more)
            if self._parser.data.version is not None:
                self._parser, self._seen = fmt.Parser(self.path), None
            return
        with files.open_read(self.path) as f:
            st = os.fstat(f.fileno())
            ident = (st.st_dev, st.st_ino)
            if ident != self._seen or st.st_size < self._parser.offset:
                self._parser = fmt.Parser(self.path)
            self._parser.feed_file(f)
        self._seen = ident
        data = self._parser.data
        if initial and data.version is None and self.mode == "none":
            raise fmt.CassetteFormatError(f"{self.path} is empty; {fmt.RERECORD}")
        if initial:
            self._loaded.update(("read", *k) for k in data.reads)
            self._loaded.update(("chat", c.model, k) for k, c in data.chats.items())
            self._loaded.update(("teacher", t.role, k) for k, t in data.teachers.items())

    def _append(self, lines: list[dict[str, Any]]) -> None:
        """Append ``lines`` (one write) and take them in as if read back, played."""
        data = encode(lines, self.path)  # an entry too large to load is refused here
        st = files.append(self.path, data)
        self._seen = (st.st_dev, st.st_ino)
        self._parser.feed_lines(data.splitlines(keepends=True))
        self._played.update(
            (x["kind"], x[_WHO[x["kind"]]], x["key"]) for x in lines if x.get("kind") in _WHO
        )


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (shorter errors)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop
        return str(path)


def encode(lines: Iterable[dict[str, Any]], path: Path) -> bytes:
    """The lines to append to the cassette at ``path``, as bytes; ``CassetteFormatError``,
    before anything is written, when one is longer than ``MAX_RECORD_BYTES``."""
    names = {
        "read": "the read of reader {reader!r}",
        "chat": "the reply of chat model {model!r}",
        "teacher": "the {role} teacher's reply for question {question!r}",
    }
    out = []
    for line in lines:
        data = fmt.dumps(line).encode("utf-8")
        if len(data) > fmt.MAX_RECORD_BYTES:
            what = names.get(line["kind"], "a {kind} line").format_map(line)
            raise fmt.CassetteFormatError(
                f"cannot record {what} in cassette {path}: its line would be "
                f"{len(data):,} bytes, more than a cassette line may hold "
                f"(agentbranch.replay.format.MAX_RECORD_BYTES={fmt.MAX_RECORD_BYTES:,}). It was "
                "not recorded; the cassette keeps every other entry and still loads. A "
                "reply this large is usually a model repeating itself (give it a smaller "
                "max_tokens); a read this large, a state to shorten before it is decided"
            )
        out.append(data)
    return b"".join(out)


def _excerpt(summary: Any, width: int = 60) -> str | None:
    """The last message's content of a teacher input summary (or the payload)."""
    if isinstance(summary, list) and summary and isinstance(summary[-1], dict):
        return short(str(summary[-1].get("content")), width)
    return short(json.dumps(summary, sort_keys=True, default=str), width)


def cassette_reader(
    path: str | Path,
    reader: Reader | Callable[[], Reader] | None = None,
    *,
    mode: str | None = None,
) -> CassetteReader:
    """One reader on the cassette at ``path`` (``Cassette(path, mode).reader(reader)``;
    ``mode`` as ``Cassette`` takes it)."""
    cassette = Cassette(path, mode)
    if reader is None and not cassette.path.exists():
        raise ConfigurationError(
            f"no cassette at {cassette.path} and no reader to record it with; pass "
            "reader=... (a Reader or a function that builds one)"
        )
    return cassette.reader(reader)


__all__ = ["Cassette", "ReplayMissError", "cassette_reader"]
