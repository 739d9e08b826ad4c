"""Record decisions once, replay whole agent runs offline (CI without a GPU).

A cassette is a JSONL file: one line per read request, keyed by a hash of the request
(rendered state, questions, options, labels, instructions, draws), holding the label
reads the real reader returned. ``RecordingReader`` wraps a real reader and appends to
the cassette; ``ReplayReader`` answers from it and fails loudly on a request it has
never seen, so a changed prompt or question is caught rather than silently re-decided.

    reader = cassette_reader("tests/cassettes/triage.jsonl", real_reader)   # records if missing
    engine = DecisionEngine(reader)

In pytest, the ``decision_cassette`` fixture (``agentbranch.replay.pytest_plugin``) gives
each test its own cassette; ``pytest --agentbranch-record`` re-records.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from agentbranch.engine.readers.base import Reader
from agentbranch.engine.reads import LabelRead, ReadRequest
from agentbranch.errors import AgentBranchError, ConfigurationError

__all__ = ["RecordingReader", "ReplayMissError", "ReplayReader", "cassette_reader", "request_key"]


class ReplayMissError(AgentBranchError, LookupError):
    """A replayed run asked a read the cassette does not hold."""


def request_key(request: ReadRequest) -> str:
    """A stable hash of everything that determines a read."""
    fields = asdict(request)
    for q in fields["questions"]:
        if not q.get("examples"):
            q.pop("examples", None)  # cassettes recorded before examples existed still match
    blob = json.dumps(fields, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _read_to_json(read: LabelRead) -> dict[str, Any]:
    return {
        "logprobs": [lp if lp > -1e308 else None for lp in read.logprobs],
        "label_mass": read.label_mass,
        "argmax_is_label": read.argmax_is_label,
        "agreement": read.agreement,
    }


def _read_from_json(data: dict[str, Any]) -> LabelRead:
    return LabelRead(
        logprobs=tuple(float("-inf") if lp is None else float(lp) for lp in data["logprobs"]),
        label_mass=float(data["label_mass"]),
        argmax_is_label=bool(data["argmax_is_label"]),
        agreement=float(data["agreement"]),
    )


class RecordingReader(Reader):
    """Passes reads to ``reader`` and appends each request and its answer to ``path``."""

    def __init__(self, reader: Reader, path: str | Path) -> None:
        self.reader = reader
        self.path = Path(path)
        self.name = reader.name
        self.model = reader.model
        self.max_options = reader.max_options
        self._lock = threading.Lock()

    def _record(self, requests: Sequence[ReadRequest], reads: list[list[LabelRead]]) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                for request, answer in zip(requests, reads):
                    f.write(
                        json.dumps(
                            {
                                "key": request_key(request),
                                "reader": self.name,
                                "model": self.model,
                                "state": request.state[:200],
                                "questions": [q.id for q in request.questions],
                                "reads": [_read_to_json(r) for r in answer],
                            },
                            ensure_ascii=False,
                        )
                        + "\n"
                    )

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        reads = self.reader.read(requests)
        self._record(requests, reads)
        return reads

    async def aread(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        reads = await self.reader.aread(requests)
        self._record(requests, reads)
        return reads

    def load(self) -> None:
        self.reader.load()

    def warmup(self) -> None:
        self.reader.warmup()

    def close(self) -> None:
        self.reader.close()


class ReplayReader(Reader):
    """Answers reads from a cassette recorded by ``RecordingReader``."""

    def __init__(self, path: str | Path, *, max_options: int = 26) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise ConfigurationError(
                f"no cassette at {self.path}; record one first (RecordingReader, or "
                "pytest --agentbranch-record)"
            )
        self._answers: dict[str, list[LabelRead]] = {}
        self.model = "unknown"
        recorded_by = "unknown"
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                self._answers[entry["key"]] = [_read_from_json(r) for r in entry["reads"]]
                recorded_by, self.model = entry["reader"], entry["model"]
        self.name = f"replay:{recorded_by}"
        self.max_options = max_options

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        out = []
        for request in requests:
            answer = self._answers.get(request_key(request))
            if answer is None:
                raise ReplayMissError(
                    f"the cassette {self.path} has no read for this request (state "
                    f"{request.state[:60]!r}, questions {[q.id for q in request.questions]}). "
                    "The prompt, questions or options changed since it was recorded; "
                    "re-record it (pytest --agentbranch-record)."
                )
            out.append(answer)
        return out


def cassette_reader(
    path: str | Path,
    reader: Reader | None = None,
    *,
    mode: Literal["auto", "record", "replay"] = "auto",
) -> Reader:
    """``replay`` from ``path``; ``record`` through ``reader`` into a fresh ``path``;
    ``auto`` replays when the cassette exists, else records."""
    path = Path(path)
    if mode == "auto":
        mode = "replay" if path.exists() else "record"
    if mode == "replay":
        return ReplayReader(path)
    if reader is None:
        raise ConfigurationError(
            f"recording the cassette {path} needs a real reader; pass reader=..."
        )
    path.unlink(missing_ok=True)
    return RecordingReader(reader, path)
