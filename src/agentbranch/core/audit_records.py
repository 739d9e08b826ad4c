"""The audit record format (docs/audit.md, "Audit records"): one pydantic schema,
``AuditRecord``, checked wherever records are read: ``load_records`` for a file,
``check_record`` for records handed over in Python. Anything a report or a fit could not
use honestly (a probability outside [0, 1], labels that are not options, ...) is a
``ConfigurationError`` (``InvalidFileError`` for a file) naming the file, line and field.
Fields the schema does not name are kept (newer writers may add some).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentbranch.core.decisions import confidence_from
from agentbranch.core.errors import (
    AgentBranchError,
    ConfigurationError,
    InvalidFileError,
    finite,
    temperature,
    unit,
)
from agentbranch.core.files import json_lines, newer_release, short_repr

__all__ = [
    "TOLERANCE",
    "AuditRecord",
    "Finite",
    "Name",
    "Unit",
    "check_record",
    "check_records",
    "describe",
    "load_records",
]

#: How far probabilities may sum from 1, and a confidence from the one they imply
#: (records are written with full float precision; this leaves room for rounding).
TOLERANCE = 0.01


class NewerRelease(InvalidFileError):
    """A record written by a newer release of agentbranch: valid, but not readable here."""


def _rate(x: float) -> float:
    if not (math.isfinite(x) and 0.0 < x <= 1.0):
        raise ValueError(f"must be a sampling rate in (0, 1], got {x!r}")
    return x


def _name(s: str) -> str:
    if not s.strip():
        raise ValueError("must be a non-empty string")
    return s


Unit = Annotated[float, AfterValidator(unit)]
Finite = Annotated[float, AfterValidator(finite)]
Temperature = Annotated[float, AfterValidator(temperature)]
Name = Annotated[str, AfterValidator(_name)]


class AuditRecord(BaseModel):
    """One audit record (``kind="audit"``: a sampled taken decision and the teacher's
    label; ``kind="fallback"``: a fallback generation kept as a labelled example)."""

    # strict: "0.9" is not a number, true is not 1, ["a"] is not "a".
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    kind: Literal["audit", "fallback"]
    question_id: Name
    type: Literal["choice", "noul", "score"]
    options: list[Name] = Field(min_length=2)
    probabilities: dict[str, Unit]
    confidence: Unit
    engine_label: str
    teacher_label: str
    #: The share of taken decisions audited (required for ``kind="audit"``).
    rate: Annotated[float, AfterValidator(_rate)] | None = None
    #: The engine's calibration temperature for this question (1 when absent).
    temperature: Temperature | None = None
    take_at: Unit | None = None
    band: Literal["take", "fallback", "review", "error"] | None = None
    agree: bool | None = None
    spec: dict[str, Any] | None = None
    entropy: Finite | None = None
    margin: Finite | None = None
    label_mass: Unit | None = None
    agreement: Unit | None = None
    draws: int | None = None
    id: str | None = None
    time: str | None = None
    question: str | None = None
    decided_by: str | None = None
    teacher: str | None = None
    reply: str | None = None
    reader: str | None = None
    model: str | None = None

    @model_validator(mode="after")
    def _fits_together(self) -> AuditRecord:
        options = self.options
        if len(set(options)) != len(options):
            raise ValueError(f"options: repeated names in {options}")
        if set(self.probabilities) != set(options):
            raise ValueError(
                f"probabilities: keys {sorted(self.probabilities)} are not the options {options}"
            )
        probs = [self.probabilities[o] for o in options]
        total = math.fsum(probs)
        if abs(total - 1.0) > TOLERANCE:
            raise ValueError(f"probabilities: sum to {total:.6g}, not 1")
        implied = confidence_from(probs)
        if abs(self.confidence - implied) > TOLERANCE:
            raise ValueError(
                f"confidence: {self.confidence:.6g} does not follow from the probabilities "
                f"(they give {implied:.6g})"
            )
        for field in ("engine_label", "teacher_label"):
            if getattr(self, field) not in options:
                raise ValueError(f"{field}: {getattr(self, field)!r} is not one of {options}")
        if self.kind == "audit" and self.rate is None:
            raise ValueError("rate: missing; an audit record says the rate it was sampled at")
        if self.spec is None:
            return self
        try:  # key order kept: it is the options order
            key = json.dumps(self.spec, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"spec: not a question's wire form ({e})") from None
        kind, spec_options = _spec_shape(self.question_id, key)
        if kind != self.type or list(spec_options) != options:
            raise ValueError(
                f"spec: a {kind} question with options {list(spec_options)}, "
                f"but the record is a {self.type} question with options {options}"
            )
        return self


@functools.lru_cache(maxsize=256)
def _spec_shape(question_id: str, spec_json: str) -> tuple[str, tuple[str, ...]]:
    """The type and options of a question's wire form (records repeat a few specs)."""
    from agentbranch.core.questions import coerce_question, to_spec

    try:
        spec = to_spec(question_id, coerce_question(question_id, json.loads(spec_json)))
    except AgentBranchError as e:
        raise ValueError(f"spec: {e}") from None
    return spec.type, tuple(spec.options)


def describe(error: ValidationError) -> str:
    """Pydantic's errors as ``field: message``, missing fields named together."""
    missing = [".".join(map(str, e["loc"])) for e in error.errors() if e["type"] == "missing"]
    parts = [f"missing {missing}"] if missing else []
    for e in error.errors():
        if e["type"] == "missing":
            continue
        where = ".".join(str(p) for p in e["loc"])
        message = str(e["msg"]).removeprefix("Value error, ")
        if e["type"].endswith("_type") or e["type"] in ("literal_error", "too_short"):
            message += f", got {short_repr(e.get('input'))}"
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def check_record(obj: Any, where: str = "audit record") -> dict[str, Any]:
    """``obj`` as a plain dict if it is a valid audit record, else a
    ``ConfigurationError`` that says, starting with ``where``, which field is wrong."""
    if isinstance(obj, AuditRecord):
        return obj.model_dump()
    if not isinstance(obj, dict):
        raise ConfigurationError(
            f"{where}: an audit record is a JSON object, got {type(obj).__name__}"
        )
    newer = newer_release(obj)
    if newer is not None:
        raise NewerRelease(f"{where} was {newer}; nothing was changed")
    try:
        AuditRecord.model_validate(obj)
    except ValidationError as e:
        raise ConfigurationError(
            f"{where}: not a valid audit record ({describe(e)}); records are written by "
            "Policy(audit=Audit(sink=...))"
        ) from None
    return dict(obj)


def check_records(records: Iterable[Any]) -> list[dict[str, Any]]:
    """Every record checked (``audit record N`` in messages, from 1)."""
    if isinstance(records, str | bytes | dict) or not isinstance(records, Iterable):
        raise ConfigurationError(
            f"audit records come as a list of records (dicts), got {type(records).__name__}"
        )
    return [check_record(r, f"audit record {i}") for i, r in enumerate(records, 1)]


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Audit records from a JSON Lines file (what ``Audit(sink="audits.jsonl")`` wrote),
    every line checked. A file with no records (empty, blank lines only) is an
    ``InvalidFileError`` too: nothing can be reported or fitted from it."""
    path = Path(path)
    records = []
    for number, obj in json_lines(path, "audit file", "Policy(audit=Audit(sink=...)) writes one"):
        try:
            records.append(check_record(obj, f"{path}:{number}"))
        except InvalidFileError:  # (a ``NewerRelease`` too)
            raise
        except ConfigurationError as e:
            raise InvalidFileError(
                f"{e}; a line edited by hand or copied from another file can be deleted"
            ) from None
    if not records:
        raise InvalidFileError(
            f"audit file {path} holds no audit records; Policy(audit=Audit(sink=...)) appends "
            "one per audited decision and per fallback generation: run the graph with audits "
            "on first"
        )
    return records
