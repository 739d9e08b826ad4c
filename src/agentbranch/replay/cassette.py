"""``Cassette``: one file shared by every reader and chat model of a run.

    cassette = Cassette("tests/cassettes/triage.jsonl")          # mode from the environment
    engine = DecisionEngine(cassette.reader(lambda: TransformersReader.from_pretrained(p)))
    drafter = cassette.chat_model(ChatOpenAI(model="gpt-4o-mini"))  # same model, cached
    ...
    cassette.stale()      # entries this run never played

Readers get ids in the order they are made (``reader-1``, ``reader-2`` ...) unless given
``id=``; the header remembers which reader and model recorded each id, and recording a
different model under an id that already has reads is refused. Chat models are keyed by
LangChain's own ``llm_string`` (class and invocation parameters). Recorded entries are
appended as they happen (the header is rewritten when a new reader or model appears), so
an interrupted run keeps what it recorded.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentbranch.engine.readers.base import Reader
from agentbranch.engine.reads import LabelRead, ReadRequest
from agentbranch.errors import AgentBranchError, ConfigurationError
from agentbranch.replay import format as fmt
from agentbranch.replay.format import ChatEntry, ReadEntry, ReaderInfo
from agentbranch.replay.keys import (
    chat_key,
    chat_model_id,
    chat_model_name,
    generations_from_json,
    generations_to_json,
    messages_summary,
    request_key,
    request_summary,
    short,
)
from agentbranch.replay.misses import explain, fields_note, nearest_chat, nearest_read
from agentbranch.replay.modes import RecordMode, resolve_mode

if TYPE_CHECKING:
    from agentbranch.replay.readers import CassetteReader


class ReplayMissError(AgentBranchError, LookupError):
    """A replayed run asked for a read or a chat reply the cassette does not hold."""


Identity = tuple[str, str, str]  # ("read", reader id, key) | ("chat", model id, key)


class Cassette:
    """A cassette file and its record mode.

    Args:
        path: the JSON Lines file (created when something is recorded).
        mode: ``all``, ``new``, ``none`` or ``passthrough`` (see ``agentbranch.replay.modes``);
            ``None`` picks ``none`` when the ``CI`` environment variable is set, else ``new``.
        env: the environment to read ``CI`` from (default ``os.environ``; never written).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: RecordMode | str | None = None,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.mode: RecordMode = resolve_mode(mode, env)
        self._shown = _shown(self.path)
        self._lock = threading.RLock()
        self.readers: dict[str, ReaderInfo] = {}
        self.chat_models: dict[str, dict[str, str]] = {}
        self._reads: dict[tuple[str, str], ReadEntry] = {}
        self._chats: dict[str, ChatEntry] = {}
        self._thresholds: dict[str, dict[str, Any]] = {}
        self._threshold_seen: dict[str, int] = {}
        self._loaded: set[Identity] = set()
        self._played: set[Identity] = set()
        #: Short descriptions of every miss this cassette raised.
        self.misses: list[str] = []
        self._fresh = False  # the file on disk was written by us and its header is current
        self._next_reader = 1
        self._opened: list[Reader] = []
        self._cache: Any = None
        if self.mode in ("new", "none") and (self.path.exists() or self.path.is_symlink()):
            self._load()
        elif self.path.is_dir():
            raise fmt.CassetteFormatError(f"cassette {self.path} is a directory, not a file")

    def _load(self) -> None:
        data = fmt.load(self.path)
        self.readers = dict(data.readers)
        self.chat_models = dict(data.chat_models)
        for r in data.reads:
            self._reads[(r.reader, r.key)] = r
            self._loaded.add(("read", r.reader, r.key))
        for c in data.chats:
            self._chats[c.key] = c
            self._loaded.add(("chat", c.model, c.key))
        self._thresholds = dict(data.thresholds)

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r}, mode={self.mode!r})"

    # -- what a test builds -------------------------------------------------------------

    def reader(
        self, reader: Reader | Callable[[], Reader] | None = None, *, id: str | None = None
    ) -> CassetteReader:
        """A reader answering from this cassette; ``reader`` (a ``Reader`` or a function
        building one, called only when something must be read live) records misses.

        ``id`` names the reader in the cassette (default ``reader-1``, ``reader-2`` ... in
        the order readers are made)."""
        from agentbranch.replay.readers import CassetteReader

        with self._lock:
            if id is None:
                id = f"reader-{self._next_reader}"
                self._next_reader += 1
            made = CassetteReader(self, reader, id=id)
            self._opened.append(made)
            return made

    __call__ = reader

    @property
    def chat_cache(self) -> Any:
        """A ``langchain_core.caches.BaseCache`` backed by this cassette: pass it as any
        LangChain chat model's ``cache=`` and its calls are recorded and replayed."""
        if self._cache is None:
            from agentbranch.replay.chat import CassetteCache

            self._cache = CassetteCache(self)
        return self._cache

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
        """Close the live readers this cassette's readers built (from factories). In ``all`` mode a run
        that recorded nothing still rewrites the cassette (to an empty one)."""
        with self._lock:
            if self.mode == "all" and not self._fresh and self.path.is_file():
                self._persist([], True)
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
        self._next_reader = 1
        self._threshold_seen = {}

    # -- reads --------------------------------------------------------------------------

    def lookup_read(self, reader_id: str, request: ReadRequest) -> list[LabelRead] | None:
        key = request_key(request)
        with self._lock:
            entry = self._reads.get((reader_id, key))
            if entry is None:
                return None
            self._played.add(("read", reader_id, key))
            return list(entry.reads)

    def record_reads(
        self,
        reader_id: str,
        info: ReaderInfo,
        requests: Sequence[ReadRequest],
        reads: Sequence[list[LabelRead]],
    ) -> None:
        if self.mode == "passthrough":
            return
        with self._lock:
            header_changed = self._register_reader(reader_id, info)
            new = []
            for request, answer in zip(requests, reads):
                entry = ReadEntry(
                    reader_id, request_key(request), request_summary(request), list(answer)
                )
                self._reads[(reader_id, entry.key)] = entry
                self._played.add(("read", reader_id, entry.key))
                new.append(fmt.read_line(entry))
            self._persist(new, header_changed)

    def _register_reader(self, reader_id: str, info: ReaderInfo) -> bool:
        known = self.readers.get(reader_id)
        if known is None:
            self.readers[reader_id] = info
            return True
        if (known.name, known.model) != (info.name, info.model):
            raise ConfigurationError(
                f"cassette {self.path}: reader {reader_id!r} was recorded with "
                f"{known.name} ({known.model}), this run reads with {info.name} "
                f"({info.model}). Give each reader its own id=..., or re-record the "
                "cassette for the new model (pytest --agentbranch-record=all)"
            )
        if known.max_options != info.max_options:
            self.readers[reader_id] = info
            return True
        return False

    def read_miss(self, reader_id: str, request: ReadRequest, why: str) -> ReplayMissError:
        """The error for a read this cassette cannot answer, with the nearest recorded
        request and the fields that differ."""
        with self._lock:
            entries, readers = list(self._reads.values()), dict(self.readers)
        nearest, diffs = nearest_read(request_summary(request), reader_id, entries, readers)
        qids = [q.id for q in request.questions]
        head = (
            f"cassette {self._shown} (mode {self.mode!r}) has no read for this request of "
            f"reader {reader_id!r}: state {short(request.state, 60)!r}, questions {qids}. {why}"
        )
        empty = (
            f"There is no cassette file at {self.path} yet."
            if not self.path.exists()
            else f"The cassette holds no reads of reader {reader_id!r}."
        )
        with self._lock:
            self.misses.append(
                f"read of {reader_id} {short(request.state, 50)!r} {qids}" + fields_note(diffs)
            )
        return ReplayMissError(explain(head, "request", nearest, diffs, empty))

    # -- chat exchanges -----------------------------------------------------------------

    def lookup_chat(self, prompt: str, llm_string: str) -> list[Any] | None:
        key = chat_key(prompt, llm_string)
        with self._lock:
            entry = self._chats.get(key)
            if entry is None:
                return None
            self._played.add(("chat", entry.model, key))
            reply = entry.reply
        return generations_from_json(reply)

    def record_chat(self, prompt: str, llm_string: str, generations: Sequence[Any]) -> None:
        if self.mode == "passthrough":
            return
        key = chat_key(prompt, llm_string)
        model = chat_model_id(llm_string)
        entry = ChatEntry(model, key, messages_summary(prompt), generations_to_json(generations))
        with self._lock:
            header_changed = model not in self.chat_models
            if header_changed:
                self.chat_models[model] = {
                    "name": chat_model_name(llm_string),
                    "llm_string": llm_string,
                }
            self._chats[key] = entry
            self._played.add(("chat", model, key))
            self._persist([fmt.chat_line(entry)], header_changed)

    def chat_miss(self, prompt: str, llm_string: str) -> ReplayMissError:
        """The error for a chat call this cassette cannot answer, with the nearest
        recorded exchange and the fields (messages, model) that differ."""
        messages = messages_summary(prompt)
        model, name = chat_model_id(llm_string), chat_model_name(llm_string)
        with self._lock:
            entries, known = list(self._chats.values()), dict(self.chat_models)
        nearest, diffs = nearest_chat(messages, model, llm_string, name, entries, known)
        last = str(messages[-1].get("content")) if messages else ""
        head = (
            f"cassette {self._shown} (mode {self.mode!r}) has no reply of chat model {name} "
            f"({model}) to these {len(messages)} messages (last: {short(last, 60)!r}). "
            "Replay calls no model."
        )
        empty = (
            f"There is no cassette file at {self.path} yet."
            if not self.path.exists()
            else "The cassette holds no chat exchanges."
        )
        with self._lock:
            self.misses.append(f"chat {name} {short(last, 50)!r}" + fields_note(diffs))
        return ReplayMissError(explain(head, "exchange", nearest, diffs, empty))

    def clear_chats(self) -> None:
        """Forget every recorded chat exchange (and rewrite the file without them)."""
        with self._lock:
            self._chats.clear()
            self.chat_models.clear()
            self._fresh = False
            self._persist([], True)

    # -- earned thresholds --------------------------------------------------------------

    def threshold(self, key: str, live: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The threshold in force (``{"take_at", "trust"}``) for the next decision with
        ``key`` (question and state; repeats are numbered in order): the recorded one when
        replaying, else ``live()``, recorded. Replays then band exactly as the recording
        did, whatever an ``Earned`` store holds now."""
        with self._lock:
            n = self._threshold_seen.get(key, 0)
            self._threshold_seen[key] = n + 1
            key = f"{key}#{n}"
            if self.mode in ("new", "none") and key in self._thresholds:
                return dict(self._thresholds[key])
            if self.mode == "none":
                raise ReplayMissError(
                    f"cassette {self._shown} (mode 'none') holds no threshold for this decision "
                    "of an Earned policy (recorded before thresholds were kept?); "
                    f"{fmt.RERECORD}"
                )
        value = live()
        if self.mode == "passthrough":
            return value
        with self._lock:
            self._thresholds[key] = dict(value)
            self._persist([fmt.threshold_line(key, value)], False)
        return value

    # -- stale entries ------------------------------------------------------------------

    def stale(self) -> list[dict[str, Any]]:
        """Entries loaded from the file that this run never played, oldest first: each
        ``{"kind", "line", "reader" | "model", "summary"}``."""
        out = []
        with self._lock:
            for ident in sorted(self._loaded - self._played, key=self._line_of):
                kind, who, key = ident
                if kind == "read":
                    e = self._reads[(who, key)]
                    qids = [q["id"] for q in e.request.get("questions", [])]
                    summary = f"{short(e.request.get('state'), 50)!r} {qids}"
                    out.append({"kind": "read", "line": e.line, "reader": who, "summary": summary})
                else:
                    c = self._chats[key]
                    last = str(c.messages[-1].get("content")) if c.messages else ""
                    name = self.chat_models.get(who, {}).get("name", who)
                    out.append(
                        {
                            "kind": "chat",
                            "line": c.line,
                            "model": name,
                            "summary": repr(short(last, 50)),
                        }
                    )
        return out

    def _line_of(self, ident: Identity) -> int:
        kind, who, key = ident
        e = self._reads.get((who, key)) if kind == "read" else self._chats.get(key)
        return (e.line or 0) if e is not None else 0

    # -- the file -----------------------------------------------------------------------

    def _persist(self, lines: list[dict[str, Any]], header_changed: bool) -> None:
        """Append ``lines``, or rewrite the whole file when the header changed or the
        file is not ours yet (first write of this run; ``all`` starts afresh)."""
        try:
            self._write(lines, header_changed)
        except OSError as e:
            raise ConfigurationError(
                f"cannot write the cassette {self.path}: {e}; check that its folder is a "
                "writable directory (or replay with mode 'none')"
            ) from e

    def _write(self, lines: list[dict[str, Any]], header_changed: bool) -> None:
        if self._fresh and not header_changed:
            with self.path.open("a", encoding="utf-8") as f:
                f.writelines(fmt.dumps(line) for line in lines)
            return
        body = [fmt.dumps(fmt.header_line(self.readers, self.chat_models))]
        body += [fmt.dumps(fmt.read_line(e)) for e in self._reads.values()]
        body += [fmt.dumps(fmt.chat_line(e)) for e in self._chats.values()]
        body += [fmt.dumps(fmt.threshold_line(k, v)) for k, v in self._thresholds.items()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.writelines(body)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._fresh = True


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (shorter errors)."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


__all__ = ["Cassette", "ReplayMissError"]
