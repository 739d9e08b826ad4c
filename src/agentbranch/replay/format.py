"""Cassette format v1: versioned JSON Lines, validated line by line on load.

Line 1 is the header; every further line is one read or one chat-model exchange::

    {"agentbranch_cassette": 1, "library": "0.1.0",
     "readers": {"reader-1": {"name": "transformers", "model": "...", "max_options": 26}},
     "chat_models": {"chat-3f2a9c1b0d": {"name": "ChatOpenAI gpt-4o", "llm_string": "..."}}}
    {"kind": "read", "reader": "reader-1", "key": "<sha256>",
     "request": {"state": "I was charged twice…", "questions": [{"id": "team", ...}], ...},
     "reads": [{"logprobs": [-3.1, -2.2], "label_mass": 0.004, "argmax_is_label": false,
                "agreement": 1.0}]}
    {"kind": "chat", "model": "chat-3f2a9c1b0d", "key": "<sha256>",
     "messages": [{"role": "system", "content": "..."}, ...],
     "reply": [{"message": {"type": "ai", "data": {"content": "..."}}}]}

The raw label log-probabilities are stored (not chosen labels), so a changed threshold,
policy or calibration replays correctly. Files written before v1 (no header, one
``{"key", "reader", "model", "state", "questions", "reads"}`` object a line) load as
reader ``reader-1``, or fail with a message saying how to re-record them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbranch.engine.reads import LabelRead
from agentbranch.errors import AgentBranchError
from agentbranch.replay.keys import generations_from_json

FORMAT_VERSION = 1
MARK = "agentbranch_cassette"


class CassetteFormatError(AgentBranchError, ValueError):
    """A cassette file cannot be read: not found, not UTF-8, corrupt, truncated, written
    by a newer agentbranch, or in the pre-v1 format that cannot be upgraded."""


@dataclass
class ReaderInfo:
    """Which reader recorded the reads of one reader id."""

    name: str
    model: str
    max_options: int = 26


@dataclass
class ReadEntry:
    """One recorded read request (``request`` is its readable summary)."""

    reader: str
    key: str
    request: dict[str, Any]
    reads: list[LabelRead]
    line: int | None = None


@dataclass
class ChatEntry:
    """One recorded chat-model exchange; ``reply`` is LangChain generations as dicts."""

    model: str
    key: str
    messages: list[dict[str, Any]]
    reply: list[dict[str, Any]]
    line: int | None = None


@dataclass
class CassetteData:
    """A loaded cassette: header facts and entries in file order (later lines win)."""

    readers: dict[str, ReaderInfo] = field(default_factory=dict)
    chat_models: dict[str, dict[str, str]] = field(default_factory=dict)
    reads: list[ReadEntry] = field(default_factory=list)
    chats: list[ChatEntry] = field(default_factory=list)
    #: Earned thresholds in force, by decision key: ``{"take_at", "trust"}``.
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)
    library: str = "unknown"
    legacy: bool = False


def library_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentbranch")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


# -- label reads ------------------------------------------------------------------------


def read_to_json(read: LabelRead) -> dict[str, Any]:
    return {
        # -inf (a label the model gave no probability) is not JSON: stored as null.
        "logprobs": [lp if lp > -math.inf else None for lp in read.logprobs],
        "label_mass": read.label_mass,
        "argmax_is_label": read.argmax_is_label,
        "agreement": read.agreement,
    }


def read_from_json(data: Any) -> LabelRead:
    """A ``LabelRead`` from its stored form; ``ValueError`` says what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"a read must be an object, got {type(data).__name__}")
    missing = {"logprobs", "label_mass", "argmax_is_label", "agreement"} - set(data)
    if missing:
        raise ValueError(f"a read lacks {sorted(missing)}")
    lps = data["logprobs"]
    if not isinstance(lps, list) or not lps:
        raise ValueError("a read's logprobs must be a non-empty list")
    out = []
    for lp in lps:
        if lp is None:
            out.append(-math.inf)
        elif isinstance(lp, int | float) and not isinstance(lp, bool) and math.isfinite(lp):
            out.append(float(lp))
        else:
            raise ValueError(f"a logprob must be a finite number or null, got {lp!r}")
    mass, agreement = data["label_mass"], data["agreement"]
    for name, v in (("label_mass", mass), ("agreement", agreement)):
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
    if not isinstance(data["argmax_is_label"], bool):
        raise ValueError("argmax_is_label must be true or false")
    return LabelRead(
        logprobs=tuple(out),
        label_mass=float(mass),
        argmax_is_label=data["argmax_is_label"],
        agreement=float(agreement),
    )


# -- lines ------------------------------------------------------------------------------


def header_line(
    readers: dict[str, ReaderInfo], chat_models: dict[str, dict[str, str]]
) -> dict[str, Any]:
    return {
        MARK: FORMAT_VERSION,
        "library": library_version(),
        "readers": {
            rid: {"name": r.name, "model": r.model, "max_options": r.max_options}
            for rid, r in readers.items()
        },
        "chat_models": chat_models,
    }


def read_line(entry: ReadEntry) -> dict[str, Any]:
    return {
        "kind": "read",
        "reader": entry.reader,
        "key": entry.key,
        "request": entry.request,
        "reads": [read_to_json(r) for r in entry.reads],
    }


def chat_line(entry: ChatEntry) -> dict[str, Any]:
    return {
        "kind": "chat",
        "model": entry.model,
        "key": entry.key,
        "messages": entry.messages,
        "reply": entry.reply,
    }


def threshold_line(key: str, value: dict[str, Any]) -> dict[str, Any]:
    """The threshold an ``Earned`` policy had in force for one recorded decision."""
    return {"kind": "threshold", "key": key, "take_at": value["take_at"], "trust": value["trust"]}


def dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False) + "\n"


# -- loading ----------------------------------------------------------------------------

RERECORD = "re-record it: pytest --agentbranch-record=all (or Cassette(path, mode='all'))"


def load(path: str | Path) -> CassetteData:
    """Read and validate every line of the cassette at ``path``.

    Raises ``CassetteFormatError`` naming the file and line for anything unusable."""
    path = Path(path)
    if path.is_dir():
        raise CassetteFormatError(f"cassette {path} is a directory, not a JSON Lines file")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CassetteFormatError(f"no cassette at {path}; record one first") from None
    except OSError as e:
        raise CassetteFormatError(f"cannot read cassette {path}: {e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise CassetteFormatError(
            f"{path}:{line}: not UTF-8 text (byte {e.start}); the cassette is corrupt, {RERECORD}"
        ) from None
    lines = text.split("\n")
    ends_cleanly = text.endswith("\n") or not text
    rows: list[tuple[int, dict[str, Any]]] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            last = no == len(lines) and not ends_cleanly
            what = (
                "is truncated (the file ends mid-entry: was a recording interrupted?)"
                if last
                else f"is not valid JSON ({e.msg})"
            )
            raise CassetteFormatError(f"{path}:{no}: the line {what}; {RERECORD}") from None
        if not isinstance(obj, dict):
            raise CassetteFormatError(
                f"{path}:{no}: expected a JSON object, got {type(obj).__name__}; {RERECORD}"
            )
        rows.append((no, obj))
    if not rows:
        raise CassetteFormatError(f"{path} is empty; {RERECORD}")
    first_no, first = rows[0]
    if MARK in first:
        return _load_v1(path, rows)
    if "kind" not in first and "key" in first and "reads" in first:
        return _load_legacy(path, rows)
    raise CassetteFormatError(
        f"{path}:{first_no}: the first line is not an agentbranch cassette header "
        f'({{"{MARK}": {FORMAT_VERSION}, ...}}); {RERECORD}'
    )


def _need(path: Path, no: int, obj: dict[str, Any], fields: dict[str, type | tuple]) -> None:
    for name, typ in fields.items():
        if name not in obj:
            raise CassetteFormatError(f"{path}:{no}: the entry lacks {name!r}; {RERECORD}")
        if not isinstance(obj[name], typ) or isinstance(obj[name], bool) and typ is not bool:
            raise CassetteFormatError(
                f"{path}:{no}: {name!r} has the wrong type ({type(obj[name]).__name__}); {RERECORD}"
            )


def _load_v1(path: Path, rows: list[tuple[int, dict[str, Any]]]) -> CassetteData:
    no, head = rows[0]
    version = head[MARK]
    if not isinstance(version, int) or isinstance(version, bool):
        raise CassetteFormatError(f"{path}:{no}: the format version must be an integer")
    if version > FORMAT_VERSION:
        raise CassetteFormatError(
            f"{path} is cassette format {version}, written by a newer agentbranch "
            f"({head.get('library', '?')}); this one reads format {FORMAT_VERSION}. Upgrade "
            "agentbranch"
        )
    _need(path, no, head, {"readers": dict, "chat_models": dict})
    data = CassetteData(library=str(head.get("library", "unknown")))
    for rid, info in head["readers"].items():
        if not isinstance(info, dict):
            raise CassetteFormatError(f"{path}:{no}: reader {rid!r} must be an object")
        _need(path, no, info, {"name": str, "model": str, "max_options": int})
        data.readers[rid] = ReaderInfo(info["name"], info["model"], info["max_options"])
    for mid, info in head["chat_models"].items():
        if not isinstance(info, dict):
            raise CassetteFormatError(f"{path}:{no}: chat model {mid!r} must be an object")
        _need(path, no, info, {"name": str, "llm_string": str})
        data.chat_models[mid] = {"name": info["name"], "llm_string": info["llm_string"]}
    for no, obj in rows[1:]:
        kind = obj.get("kind")
        if kind == "read":
            _need(path, no, obj, {"reader": str, "key": str, "request": dict, "reads": list})
            if obj["reader"] not in data.readers:
                raise CassetteFormatError(
                    f"{path}:{no}: reader {obj['reader']!r} is not in the header; {RERECORD}"
                )
            try:
                reads = [read_from_json(r) for r in obj["reads"]]
            except ValueError as e:
                raise CassetteFormatError(f"{path}:{no}: {e}; {RERECORD}") from None
            _check_request(path, no, obj["request"], len(reads))
            data.reads.append(ReadEntry(obj["reader"], obj["key"], obj["request"], reads, no))
        elif kind == "chat":
            _need(path, no, obj, {"model": str, "key": str, "messages": list, "reply": list})
            if obj["model"] not in data.chat_models:
                raise CassetteFormatError(
                    f"{path}:{no}: chat model {obj['model']!r} is not in the header; {RERECORD}"
                )
            try:
                generations_from_json(obj["reply"])
            except (ValueError, TypeError, KeyError) as e:
                raise CassetteFormatError(
                    f"{path}:{no}: the chat reply cannot be rebuilt ({e}); {RERECORD}"
                ) from None
            data.chats.append(
                ChatEntry(obj["model"], obj["key"], obj["messages"], obj["reply"], no)
            )
        elif kind == "threshold":
            _need(path, no, obj, {"key": str, "trust": str})
            take_at = obj.get("take_at")
            if take_at is not None and (
                not isinstance(take_at, int | float)
                or isinstance(take_at, bool)
                or not 0.0 <= take_at <= 1.0
            ):
                raise CassetteFormatError(
                    f"{path}:{no}: 'take_at' must be null or a number in [0, 1]; {RERECORD}"
                )
            data.thresholds[obj["key"]] = {"take_at": take_at, "trust": obj["trust"]}
        else:
            raise CassetteFormatError(
                f"{path}:{no}: unknown entry kind {kind!r} (expected 'read', 'chat' or "
                f"'threshold'); {RERECORD}"
            )
    return data


def _check_request(path: Path, no: int, request: dict[str, Any], n_reads: int) -> None:
    _need(path, no, request, {"state": str, "questions": list})
    for q in request["questions"]:
        if not isinstance(q, dict) or not isinstance(q.get("id"), str):
            raise CassetteFormatError(
                f"{path}:{no}: each question of the request summary needs an 'id'; {RERECORD}"
            )
    if len(request["questions"]) != n_reads:
        raise CassetteFormatError(
            f"{path}:{no}: {n_reads} reads for {len(request['questions'])} questions; {RERECORD}"
        )


def _load_legacy(path: Path, rows: list[tuple[int, dict[str, Any]]]) -> CassetteData:
    """Pre-v1 cassettes: their keys are v1 request keys, so they load as ``reader-1``
    when one reader recorded them all."""
    upgrade = f"{path} is a pre-v1 agentbranch cassette (no header) and cannot be upgraded: "
    identities = set()
    data = CassetteData(legacy=True, library="pre-v1")
    for no, obj in rows:
        try:
            _need(
                path,
                no,
                obj,
                {
                    "key": str,
                    "reader": str,
                    "model": str,
                    "state": str,
                    "questions": list,
                    "reads": list,
                },
            )
            reads = [read_from_json(r) for r in obj["reads"]]
        except (CassetteFormatError, ValueError) as e:
            raise CassetteFormatError(upgrade + f"line {no}: {e}. {RERECORD}") from None
        identities.add((obj["reader"], obj["model"]))
        request = {"state": obj["state"], "questions": [{"id": str(q)} for q in obj["questions"]]}
        data.reads.append(ReadEntry("reader-1", obj["key"], request, reads, no))
    if len(identities) > 1:
        raise CassetteFormatError(
            upgrade + f"it mixes reads of {len(identities)} readers "
            f"({', '.join(sorted(f'{r} ({m})' for r, m in identities))}). {RERECORD}"
        )
    ((name, model),) = identities
    data.readers["reader-1"] = ReaderInfo(name, model)
    return data


__all__ = [
    "FORMAT_VERSION",
    "CassetteData",
    "CassetteFormatError",
    "ChatEntry",
    "ReadEntry",
    "ReaderInfo",
    "load",
    "read_from_json",
    "read_to_json",
]
