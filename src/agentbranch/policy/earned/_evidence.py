"""Evidence for earned thresholds: one record per teacher label (``Evidence``; the
schema field by field: docs/stores.md), ``new_evidence`` to make one and ``check_time``
to refuse a time this release cannot order.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from agentbranch.core.errors import unit
from agentbranch.core.files import EVIDENCE_SCHEMA, newer_release
from agentbranch.policy.auditing.config import MIN_RATE
from agentbranch.policy.trust import QuestionKey, Trust, evidence_key

#: How far ahead of the reading clock a record's ``time`` may be (replicas' clocks
#: differ a little; further ahead is an edited record or a wrong clock).
MAX_CLOCK_SKEW_S = 300.0
#: At most this many walk entries in a record (a version has one or two).
MAX_ENTRIES = 4

Source = Literal["fallback", "review", "audit"]


class EarnedSettings(BaseModel):
    """The ``Earned`` settings a record was made under (what a report replays with)."""

    model_config = ConfigDict(frozen=True, extra="ignore")  # a newer release may add some

    precision: float = Field(gt=0.0, lt=1.0)
    level: float = Field(gt=0.0, lt=1.0)
    min_evidence: int = Field(default=50, ge=1)
    max_take_at: float = Field(default=1.0, ge=0.0, le=1.0)
    min_take_at: float = Field(default=0.0, ge=0.0, le=1.0)
    start_at: float | None = Field(default=None, ge=0.0, le=1.0)
    step: float = Field(default=0.01, gt=0.0, le=0.5)
    #: the drift test's level where it is not ``level`` (a learned version's records)
    drift_level: float | None = Field(default=None, gt=0.0, lt=1.0)

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> Any:
        out = handler(self)
        if isinstance(out, dict) and out.get("drift_level") is None:
            out.pop("drift_level", None)  # absent unless it differs from level
        return out


class Evidence(BaseModel):
    """One teacher label for one engine decision, validated strictly on the way into and
    out of a store; the schema field by field: docs/stores.md, "The evidence record"."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_: Literal["agentbranch.earned/1"] = Field(EVIDENCE_SCHEMA, alias="schema")
    id: str = Field(min_length=1, max_length=64)
    time: str = Field(min_length=1, max_length=40)
    key: str = Field(min_length=1, max_length=128)
    question_id: str
    reader: str | None = None
    model: str | None = None
    source: Source
    band: Literal["take", "fallback", "review"]
    confidence: float = Field(ge=0.0, le=1.0)  # (NaN and inf fail every bound: refused)
    options: list[str] = Field(min_length=2)
    engine_label: str
    teacher_label: str
    correct: bool
    rate: float = Field(ge=MIN_RATE, le=1.0)
    take_at: float | None = Field(default=None, ge=0.0, le=1.0)
    trust: Trust = "learning"
    earned: EarnedSettings | None = None
    decision: str | None = Field(default=None, min_length=1, max_length=128)

    @model_validator(mode="before")
    @classmethod
    def _version(cls, raw: Any) -> Any:
        if isinstance(raw, dict):
            newer = newer_release(raw)
            if newer is not None:
                raise ValueError(newer)
        return raw

    @field_validator("time")
    @classmethod
    def _time(cls, value: str, info: ValidationInfo) -> str:
        # A stored record (``context={"stored": True}``) may be from the future: the
        # store decides what that means (one replica's fast clock must not stop others).
        stored = bool(info.context and info.context.get("stored"))
        check_time(value, future_ok=stored)
        return value

    # -- learning hook (agentbranch.policy.earned.learn): learn=True only --
    state: str | None = Field(default=None, max_length=100_000)
    version: int | None = Field(default=None, ge=0, le=1000)
    written: str | None = Field(default=None, pattern=r"^[0-9a-f]{1,64}$")
    probability: float | None = Field(default=None, ge=0.0, le=1.0)
    floor: float | None = Field(default=None, ge=MIN_RATE, le=1.0)
    bet_alpha: float | None = Field(default=None, gt=0.0, lt=1.0)
    entries: tuple[Annotated[float, AfterValidator(unit)], ...] | None = Field(
        default=None, min_length=1, max_length=MAX_ENTRIES
    )

    @field_validator("entries", mode="before")
    @classmethod
    def _entries(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value  # (JSON has no tuples)

    @model_validator(mode="after")
    def _consistent(self) -> Evidence:
        if self.entries is not None and not (self.version or 0) >= 1:
            raise ValueError(
                "entries belong to the records of a learned version (version >= 1), "
                f"not to version {self.version}"
            )
        if len(set(self.options)) != len(self.options):
            raise ValueError(f"options {self.options} name an option more than once")
        for name in ("engine_label", "teacher_label"):
            if getattr(self, name) not in self.options:
                raise ValueError(f"{name} {getattr(self, name)!r} is not one of {self.options}")
        if self.correct != (self.engine_label == self.teacher_label):
            raise ValueError("correct must say whether engine_label == teacher_label")
        return self

    def to_json(self) -> dict[str, Any]:
        names = ("state", "version", "written", "probability", "floor", "entries", "bet_alpha")
        absent = {name for name in names if getattr(self, name) is None}  # unless learn=True
        return self.model_dump(mode="json", by_alias=True, exclude=absent)

    @property
    def order(self) -> tuple[str, str]:
        """Records are replayed in this order (time, then id): every replica that holds
        the same records computes the same thresholds."""
        return (self.time, self.id)


#: Ids start with a per-process sequence number: records made in the same millisecond
#: still replay in the order this process made them.
_sequence = itertools.count()


def new_evidence(**fields: Any) -> Evidence:
    """A fresh record: ``id`` and ``time`` are filled in, ``correct`` computed."""
    fields.setdefault("id", f"{next(_sequence):012d}-{uuid.uuid4().hex}")
    fields.setdefault("time", datetime.now(UTC).isoformat(timespec="milliseconds"))
    fields["correct"] = fields["engine_label"] == fields["teacher_label"]
    return Evidence(**fields)


def check_time(value: str, now: datetime | None = None, *, future_ok: bool = False) -> datetime:
    """``value`` as a time: ISO-8601 in UTC, at most ``MAX_CLOCK_SKEW_S`` after
    ``now`` (default: the clock now; ``future_ok``: any time). ``ValueError`` saying
    what is wrong otherwise."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"time {value!r} is not an ISO-8601 time") from None
    if when.tzinfo is None or when.utcoffset() != timedelta(0):
        raise ValueError(
            f"time {value!r} is not in UTC (records are ordered by time: write it with '+00:00')"
        )
    now = now or datetime.now(UTC)
    if not future_ok and when - now > timedelta(seconds=MAX_CLOCK_SKEW_S):
        raise ValueError(
            f"time {value!r} is {(when - now).total_seconds():.0f} s in the future (more than "
            f"{MAX_CLOCK_SKEW_S:.0f} s of clock skew): the record was edited or its writer's "
            "clock is wrong"
        )
    return when


__all__ = [
    "EarnedSettings",
    "Evidence",
    "MAX_CLOCK_SKEW_S",
    "MAX_ENTRIES",
    "QuestionKey",
    "Source",
    "check_time",
    "evidence_key",
    "new_evidence",
]
