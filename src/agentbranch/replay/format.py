"""Cassette format v2: versioned JSON Lines that several writers append to, loaded as a stream.

The ``*_line`` functions write each kind of line (``agentbranch.replay.schema`` is the
schema; docs/replay.md the layout), ``Parser`` validates them one at a time, ``load``
reads a file.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import ValidationError

from agentbranch.core.reads import LabelRead
from agentbranch.replay import files, schema
from agentbranch.replay.entries import (
    CassetteData,
    ChatEntry,
    ReadEntry,
    ReaderInfo,
    TeacherEntry,
)
from agentbranch.replay.files import CassetteFormatError
from agentbranch.replay.keys import generations_from_json

FORMAT_VERSION = 2
MARK = "agentbranch_cassette"
#: The longest line a cassette may hold; longer lines are refused, never read into memory.
MAX_LINE_BYTES = 64 * 2**20
#: The longest line a recording writes (well below ``MAX_LINE_BYTES``, so one huge
#: entry never leaves a cassette that no longer loads).
MAX_RECORD_BYTES = 16 * 2**20


def library_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentbranch")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


# -- label reads ------------------------------------------------------------------------


def read_to_json(read: LabelRead) -> dict[str, Any]:
    out: dict[str, Any] = {
        # -inf (a label the model gave no probability) is not JSON: stored as null.
        "logprobs": [lp if lp > -math.inf else None for lp in read.logprobs],
        "label_mass": read.label_mass,
        "argmax_is_label": read.argmax_is_label,
        "agreement": read.agreement,
    }
    if read.extras.get("calibrated") is True:  # a replayed decision says calibrated too
        out["calibrated"] = True
    return out


def read_from_json(data: Any) -> LabelRead:
    """A ``LabelRead`` from its stored form; ``ValueError`` says what is wrong."""
    try:
        stored = schema.StoredRead.model_validate(data)
    except ValidationError as e:
        raise ValueError(schema.describe(e)) from None
    return _label_read(stored)


def _label_read(stored: schema.StoredRead) -> LabelRead:
    return LabelRead(
        logprobs=tuple(-math.inf if lp is None else float(lp) for lp in stored.logprobs),
        label_mass=None if stored.label_mass is None else float(stored.label_mass),
        argmax_is_label=stored.argmax_is_label,
        agreement=float(stored.agreement),
        extras={"calibrated": True} if stored.calibrated else {},
    )


# -- lines ------------------------------------------------------------------------------


def header_line(recording: str | None = None) -> dict[str, Any]:
    return {MARK: FORMAT_VERSION, "library": library_version(), "recording": recording}


def entry_line(kind: str, entry: Any, **first: Any) -> dict[str, Any]:
    """The ``kind`` line of an entry (a dataclass of ``agentbranch.replay.entries``): the
    fields ``first``, then the entry's own but ``line``, in order."""
    own = {f.name: getattr(entry, f.name) for f in dataclasses.fields(entry) if f.name != "line"}
    return {"kind": kind, **first, **own}


def read_line(entry: ReadEntry) -> dict[str, Any]:
    return {**entry_line("read", entry), "reads": [read_to_json(r) for r in entry.reads]}


def decision_line(kind: str, key: str, value: dict[str, Any]) -> dict[str, Any]:
    """The value in force for one recorded decision (``CassetteData.decided``); a version
    in force without a probability map leaves the field out."""
    line = {"kind": kind, "key": key, **value}
    if line.get("probability_map", ()) is None:
        del line["probability_map"]
    return line


def dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n"


def body(data: CassetteData, recording: str | None, *, chats: bool = True) -> bytes:
    """A whole format-2 file holding ``data`` (for rewrites: upgrades, ``clear_chats``)."""
    lines = [header_line(recording)]
    lines += [entry_line("reader", info, id=rid) for rid, info in data.readers.items()]
    if chats:
        lines += [{"kind": "chat_model", "id": mid, **m} for mid, m in data.chat_models.items()]
    lines += [read_line(e) for e in data.reads.values()]
    if chats:
        lines += [entry_line("chat", e) for e in data.chats.values()]
    lines += [
        decision_line(k, key, v) for k, held in data.decided.items() for key, v in held.items()
    ]
    lines += [entry_line("teacher", e) for e in data.teachers.values()]
    return "".join(dumps(x) for x in lines).encode("utf-8")


# -- loading ----------------------------------------------------------------------------

RERECORD = "re-record it: pytest --agentbranch-record=all (or Cassette(path, mode='all'))"


class Parser:
    """Validates a cassette's lines one at a time, in order, into ``data``.

    ``feed_file`` and ``feed_lines`` may be called again with lines appended later (another
    writer's), continuing the line count.
    Format 1 and pre-v1 files (no header; loaded as reader ``reader-1``) still load.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = CassetteData()
        self.line = 0
        self.offset = 0
        self._declared: dict[str, int] = {}
        self._legacy_ids: set[tuple[str, str]] = set()

    def fail(self, no: int | None, what: str) -> CassetteFormatError:
        where = f"{self.path}:{no}" if no else str(self.path)
        return CassetteFormatError(f"{where}: {what}; {RERECORD}")

    def feed_file(self, f: Any, *, limit: int | None = None) -> None:
        """Every further line of the open binary file ``f`` (from ``self.offset``)."""
        limit = limit or MAX_LINE_BYTES
        f.seek(self.offset)
        for raw in iter(lambda: f.readline(limit + 1), b""):
            if len(raw) > limit and not raw.endswith(b"\n"):
                raise self.fail(
                    self.line + 1,
                    f"the line is longer than {limit // 2**20} MiB (MAX_LINE_BYTES); the file "
                    "is not a cassette or is corrupt",
                )
            self.feed_lines([raw])

    def feed_lines(self, lines: Iterable[bytes]) -> None:
        """Each of ``lines`` (with its newline unless it ends the file), in order."""
        for raw in lines:
            self._feed(raw)
            self.offset += len(raw)

    def _feed(self, raw: bytes) -> None:
        self.line += 1
        no = self.line
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(
                no, f"not UTF-8 text (byte {e.start} of the line); the file is corrupt"
            ) from None
        if not text.strip():
            return
        try:
            obj = pydantic_core.from_json(text, allow_inf_nan=False)
        except ValueError as e:
            if not raw.endswith(b"\n"):
                raise self.fail(
                    no,
                    "the line is truncated (the file ends mid-entry: was a recording interrupted?)",
                ) from None
            raise self.fail(no, f"the line is not valid JSON ({e})") from None
        if not isinstance(obj, dict):
            raise self.fail(no, f"expected a JSON object, got {type(obj).__name__}")
        if self.data.version is None:
            self._first(no, obj)
        elif self.data.version == 0:
            self._legacy(no, obj)
        else:
            self._entry(no, obj)

    # -- the header ----------------------------------------------------------------------

    def _first(self, no: int, obj: dict[str, Any]) -> None:
        if MARK not in obj:
            if looks_like_cassette(obj):  # a pre-v1 line
                self.data.version = 0
                self._legacy(no, obj)
                return
            raise self.fail(
                no,
                "the first line is not an agentbranch cassette header "
                f'({{"{MARK}": {FORMAT_VERSION}, ...}})',
            )
        version = obj[MARK]
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise self.fail(
                no,
                f"field {MARK!r}: the format version must be a positive integer, got "
                f"{version!r:.40} (this agentbranch reads formats 1 to {FORMAT_VERSION})",
            )
        if version > FORMAT_VERSION:
            raise CassetteFormatError(
                f"{self.path} is cassette format {version}, written by a newer agentbranch "
                f"({obj.get('library', '?')!s:.40}); this one reads formats 1 to "
                f"{FORMAT_VERSION}. Upgrade agentbranch"
            )
        model = schema.Header if version == 2 else schema.HeaderV1
        try:
            head = model.model_validate(obj)
        except ValidationError as e:
            raise self.fail(no, f"the header is invalid: {schema.describe(e)}") from None
        self.data.version = version
        if isinstance(head, schema.Header):
            self.data.recording = head.recording
            return
        for rid, r in head.readers.items():
            self.data.readers[rid] = ReaderInfo(r.name, r.model, r.max_options)
            self._declared[rid] = no
        self.data.chat_models.update((mid, m.model_dump()) for mid, m in head.chat_models.items())

    # -- entries -------------------------------------------------------------------------

    def _entry(self, no: int, obj: dict[str, Any]) -> None:
        kind = obj.get("kind")
        allowed = schema.KINDS if self.data.version == 2 else ("read", "chat")
        if kind not in allowed:
            expected = " or ".join(repr(k) for k in allowed)
            raise self.fail(no, f"unknown entry kind {kind!r:.40} (expected {expected})")
        try:
            line = schema.LINE.validate_python(obj)
        except ValidationError as e:
            raise self.fail(no, schema.describe(e)) from None
        if isinstance(line, schema.ReaderLine):
            self._declare_reader(no, line)
        elif isinstance(line, schema.ChatModelLine):
            self.data.chat_models[line.id] = {"name": line.name, "llm_string": line.llm_string}
        elif isinstance(line, schema.ThresholdLine | schema.VersionLine | schema.SampleLine):
            self.data.decided[line.kind][line.key] = line.model_dump(exclude={"kind", "key"})
        elif isinstance(line, schema.TeacherLine):
            fields = line.model_dump(exclude={"kind"})
            self.data.teachers[line.key] = TeacherEntry(**fields, line=no)
        elif isinstance(line, schema.ReadLine):
            if line.reader not in self.data.readers:
                raise self.fail(no, f"reader {line.reader!r} is not declared before this line")
            reads = [_label_read(r) for r in line.reads]
            entry = ReadEntry(line.reader, line.key, obj["request"], reads, no)
            self.data.reads[(line.reader, line.key)] = entry
        else:
            if line.model not in self.data.chat_models:
                raise self.fail(no, f"chat model {line.model!r} is not declared before this line")
            try:
                generations_from_json(line.reply)
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                raise self.fail(
                    no, f"field 'reply': the chat reply cannot be rebuilt ({e})"
                ) from None
            entry = ChatEntry(line.model, line.key, line.messages, line.reply, no)
            self.data.chats[line.key] = entry

    def _declare_reader(self, no: int, line: schema.ReaderLine) -> None:
        known = self.data.readers.get(line.id)
        if known is not None and (known.name, known.model) != (line.name, line.model):
            raise self.fail(
                no,
                f"reader {line.id!r} is declared as {line.name} ({line.model}) here but as "
                f"{known.name} ({known.model}) on line {self._declared[line.id]}; one reader id "
                "holds the reads of one model",
            )
        self.data.readers[line.id] = ReaderInfo(line.name, line.model, line.max_options)
        self._declared.setdefault(line.id, no)

    def _legacy(self, no: int, obj: dict[str, Any]) -> None:
        """Pre-v1 lines: their keys are v1 request keys, so they load as ``reader-1``
        when one reader recorded them all."""
        upgrade = (
            f"{self.path} is a pre-v1 agentbranch cassette (no header) and cannot be upgraded: "
        )
        try:
            line = schema.LegacyLine.model_validate(obj)
        except ValidationError as e:
            raise CassetteFormatError(
                upgrade + f"line {no}: {schema.describe(e)}. {RERECORD}"
            ) from None
        self._legacy_ids.add((line.reader, line.model))
        if len(self._legacy_ids) > 1:
            raise CassetteFormatError(
                upgrade + f"it mixes reads of {len(self._legacy_ids)} readers "
                f"({', '.join(sorted(f'{r} ({m})' for r, m in self._legacy_ids))}). {RERECORD}"
            )
        self.data.readers["reader-1"] = ReaderInfo(line.reader, line.model)
        request = {"state": line.state, "questions": [{"id": str(q)} for q in line.questions]}
        reads = [_label_read(r) for r in line.reads]
        self.data.reads["reader-1", line.key] = ReadEntry("reader-1", line.key, request, reads, no)


def load(path: str | Path, *, max_line_bytes: int | None = None) -> CassetteData:
    """Read and validate every line of the cassette at ``path``, one line at a time;
    ``CassetteFormatError`` names the file, the line and the field of anything unusable
    (a path that is not a regular file is never read)."""
    path = Path(path)
    parser = Parser(path)
    with files.open_read(path) as f:
        parser.feed_file(f, limit=max_line_bytes)
    if parser.data.version is None:
        raise CassetteFormatError(f"{path} is empty; {RERECORD}")
    return parser.data


NOT_JSON = object()


def first_object(path: Path) -> Any:
    """The first non-blank line of the file at ``path`` parsed as JSON (``None`` when the
    file holds nothing but whitespace, ``NOT_JSON`` when that line is no JSON). Reads one
    line at most."""
    with files.open_read(path) as f:
        lines = iter(lambda: f.readline(MAX_LINE_BYTES + 1), b"")
        raw = next((line for line in lines if line.strip()), None)
    if raw is None:
        return None
    try:
        return pydantic_core.from_json(raw, allow_inf_nan=False)
    except ValueError:
        return NOT_JSON


def looks_like_cassette(first: Any) -> bool:
    """Whether a file's first object is a cassette header (any format) or a pre-v1 line."""
    if not isinstance(first, dict):
        return False
    return MARK in first or ("kind" not in first and "key" in first and "reads" in first)


__all__ = [
    "FORMAT_VERSION",
    "MAX_LINE_BYTES",
    "MAX_RECORD_BYTES",
    "CassetteData",
    "CassetteFormatError",
    "ChatEntry",
    "Parser",
    "ReadEntry",
    "ReaderInfo",
    "load",
    "read_from_json",
    "read_to_json",
]
