"""Evidence for earned thresholds: one record per teacher label, and what keys it.

``Evidence`` is one record (the schema ``EVIDENCE_SCHEMA``, field by field, is its
docstring), ``new_evidence`` makes a fresh one, ``evidence_key`` and ``QuestionKey``
say which question's trust a record belongs to, ``newer_schema`` and ``check_time``
refuse what this release cannot read.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import uuid
from dataclasses import dataclass, replace
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
from agentbranch.core.files import EVIDENCE_SCHEMA, EVIDENCE_VERSION, newer_release
from agentbranch.policy.auditing.config import MIN_RATE
from agentbranch.policy.trust import TRUSTS, Trust

#: The schema version this release writes and reads (``EVIDENCE_SCHEMA``'s number).
SCHEMA_VERSION = EVIDENCE_VERSION
#: How far in the future of the reading clock a record's ``time`` may be: clocks of
#: replicas differ by a little; a record further ahead was edited or came from a clock
#: that is wrong, and would sort after every label made until then.
MAX_CLOCK_SKEW_S = 300.0
#: At most this many walk entries in a record (``Evidence.entries``; a version has one
#: or two, ``eprocess.entry``): more is an edited record.
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
    #: the drift test's level where it is not ``level`` (a learned version's records:
    #: its looks test at its share of the error, its drift test at the policy's level)
    drift_level: float | None = Field(default=None, gt=0.0, lt=1.0)

    @model_serializer(mode="wrap")
    def _dump(self, handler: Any) -> Any:
        out = handler(self)
        if isinstance(out, dict) and out.get("drift_level") is None:
            out.pop("drift_level", None)  # absent unless it differs from level
        return out


class Evidence(BaseModel):
    """One teacher label for one engine decision.

    An **evidence record** is what ``Earned`` learns from: one decision of the engine next to
    the teacher's label for it. Records are append-only (one stored item per record, unique
    ``id``) and validated with a pydantic schema on the way in and on the way out of a store.

    Schema (``EVIDENCE_SCHEMA``, JSON object, one per line of a JSON Lines store):

    * ``schema``: ``"agentbranch.earned/1"``
    * ``id``: unique hex id; ``time``: ISO-8601 in UTC (ms) when it was recorded,
      never more than ``MAX_CLOCK_SKEW_S`` (5 minutes) in the future of the clock reading it
    * ``key``: the evidence key (``evidence_key``): a hash of the question's identity (id,
      instructions, options, examples — its ``model_dump``), of reader and model, and of the
      reading settings that shape its confidences (``reading``, when any differs from the
      defaults)
    * ``decision`` (optional, ``None`` in a record without one): the decision's
      identity (``agentbranch.policy.records.decision_identity``): labels of one
      decision count once
    * ``question_id``, ``reader``, ``model``: readable copies of what the key hashes
    * ``source``: ``"fallback"`` (a ``Generate`` answer in the fallback band: every decision
      there gets one), ``"review"`` (a human's answer in the review band) or ``"audit"``
      (the audit teacher's answer for a sampled share ``rate`` of the decisions, taken ones
      or — with no ``Generate`` — fallback-band ones)
    * ``band``: ``"take"`` or ``"fallback"``/``"review"``: where the decision was
    * ``confidence``: the engine's confidence in [0, 1]; ``engine_label`` / ``teacher_label``:
      both among ``options``; ``correct``: ``engine_label == teacher_label``
    * ``rate``: the probability this decision was labelled (1 for fallback and review, the
      audit rate for audits; each record stands for ``1/rate`` decisions), at least
      ``MIN_RATE`` (1e-4: one record never stands for more than 10,000 decisions, so every
      weight the statistics use is finite)
    * ``take_at`` (float or null: the band was closed) and ``trust``: the threshold in force
      when the decision was made
    * ``earned`` (optional; absent from a record without it): the settings of
      the ``Earned`` policy that made the record (``precision``, ``level``,
      ``min_evidence``, ``max_take_at``, ``min_take_at``, ``start_at``, ``step``, and
      ``drift_level`` where the drift test runs at another level: a learned version's), so
      that a report states the policy's own target and recomputes its thresholds

    * ``state`` (optional, only with ``Earned(learn=True)``; absent otherwise): the labelled
      state's text, after ``Earned(redact=...)``, which the question learns from
      (``agentbranch.policy.earned.learn``)
    * ``version`` (optional, only with ``Earned(learn=True)``; absent otherwise): the
      version of the question's read whose evidence this is (0: the question as written),
      so a report or ``Earned.stored()`` tests each version at its own share of the error
    * ``written`` (optional, only with ``Earned(learn=True)``; absent otherwise): the
      evidence key of the question as written that this version learned from, so the
      labelled states of a version that a later release (or other numeric libraries) no
      longer fits the same way are still found and learned from
    * ``probability`` (optional, only with ``Earned(learn=True)``; absent otherwise): the
      probability the read gave ``engine_label``, what the probability its version reports
      is measured against (``agentbranch.policy.earned.learn.probability``)
    * ``floor`` (optional, only with ``Earned(learn=True)``; absent otherwise): the
      probability with which every decision of the question was at least being labelled as
      this label was made: 1 while no version of the question held a take band (every
      decision went to the teacher), the audit rate while one did. The anytime-valid test of
      a learned version (``agentbranch.policy.earned.learn.eprocess``) bets on a label in
      proportion to ``floor / rate``; absent: no bet
    * ``entries`` (optional, only in records of a learned version with an anytime-valid
      test; absent otherwise): where that test's walks start (``eprocess.entry``, chosen at
      the version's fit from its pre-fit labels, which are kept nowhere else), at most
      ``MAX_ENTRIES`` numbers in [0, 1], so that ``Earned.stored()`` and a report replay the
      same test the live policy runs (``agentbranch.policy.earned.learn.stored``)
    * ``bet_alpha`` (optional, only in records of a learned version with an anytime-valid
      test; absent otherwise): the error that test was checked at for this label
      (``learn.ladder.elond_alpha``: its share, times one more than the thresholds other
      versions of the question had earned before the label, at most the policy's), so a
      replay checks each label at the same bar; absent: the version's share

    Records are validated strictly: numbers must be JSON numbers (``"0.97"`` or ``true`` as
    a confidence is refused), ``correct`` a JSON boolean, options distinct. A record whose
    ``schema`` names a later version was written by a newer release of agentbranch: it is
    refused with a message saying so (``newer_schema``), never read as something edited.
    """

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
    confidence: float = Field(ge=0.0, le=1.0)
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
            newer = newer_schema(raw)
            if newer is not None:
                raise ValueError(newer)
        return raw

    @field_validator("time")
    @classmethod
    def _time(cls, value: str, info: ValidationInfo) -> str:
        # A stored record is read with ``context={"stored": True}``: its time must be
        # ISO-8601 UTC, and the store (``evidence_store``) decides what a record from
        # the future means there (one replica's fast clock must not stop the others).
        stored = bool(info.context and info.context.get("stored"))
        check_time(value, future_ok=stored)
        return value

    # -- learning hook (agentbranch.policy.earned.learn): the labelled state, learn=True only --
    state: str | None = Field(default=None, max_length=100_000)
    version: int | None = Field(default=None, ge=0, le=1000)
    written: str | None = Field(default=None, pattern=r"^[0-9a-f]{1,64}$")
    #: the probability the read gave ``engine_label`` (what its version's reported
    #: probability is measured against: ``agentbranch.policy.earned.learn.probability``)
    probability: float | None = Field(default=None, ge=0.0, le=1.0)
    #: every decision was labelled with at least this probability as this one was made
    floor: float | None = Field(default=None, ge=MIN_RATE, le=1.0)
    #: the error this record's version's anytime-valid test was checked at for it (e-LOND)
    bet_alpha: float | None = Field(default=None, gt=0.0, lt=1.0)
    #: where the anytime-valid test of this record's version starts (its walks' entries)
    entries: tuple[Annotated[float, AfterValidator(unit)], ...] | None = Field(
        default=None, min_length=1, max_length=MAX_ENTRIES
    )

    @field_validator("entries", mode="before")
    @classmethod
    def _entries(cls, value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value  # (JSON has no tuples)

    @model_validator(mode="after")
    def _consistent(self) -> Evidence:
        for name in ("confidence", "rate", "take_at", "probability", "floor", "bet_alpha"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be finite")
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
        out = self.model_dump(mode="json", by_alias=True)
        # learning: absent unless learn=True
        names = ("state", "version", "written", "probability", "floor", "entries", "bet_alpha")
        for name in names:
            if out.get(name) is None:
                out.pop(name, None)
        return out

    @property
    def order(self) -> tuple[str, str]:
        """Records are replayed in this order (time, then id): every replica that holds
        the same records computes the same thresholds."""
        return (self.time, self.id)


#: Ids start with a per-process sequence number: records made in the same millisecond
#: still sort (time, id) in the order this process made them, so a replica replaying the
#: store sees them in the order the writer learned from them.
_sequence = itertools.count()


def new_evidence(**fields: Any) -> Evidence:
    """A fresh record: ``id`` and ``time`` are filled in, ``correct`` computed."""
    fields.setdefault("id", f"{next(_sequence):012d}-{uuid.uuid4().hex}")
    fields.setdefault("time", datetime.now(UTC).isoformat(timespec="milliseconds"))
    fields["correct"] = fields["engine_label"] == fields["teacher_label"]
    return Evidence(**fields)


def newer_schema(raw: Any) -> str | None:
    """Why a stored item cannot be read when a newer release of agentbranch wrote it
    (its ``schema`` names a later version), else ``None`` (one message for every reader
    of a store: ``agentbranch.core.files``)."""
    return newer_release(raw)


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


def evidence_key(
    question_id: str,
    question: Any,
    reader: str | None,
    model: str | None,
    reading: str | None = None,
) -> str:
    """The key evidence is kept under: question identity (id, instructions, options,
    examples — the whole ``model_dump``), reader and model, and ``reading``: the
    fingerprint of the reading settings that shape the confidence (``Decision.reading``:
    the engine's draws, permutations, joint canvas, instructions, calibration temperature
    and the reader's own scoring settings; ``None`` when all are the defaults, and then not
    hashed in). Change any of them and the question starts learning
    again: a threshold earned on one confidence scale never serves another."""
    spec = question.model_dump(mode="json") if hasattr(question, "model_dump") else question
    identity = {"id": question_id, "question": spec, "reader": reader, "model": model}
    if reading is not None:
        identity["reading"] = reading
    blob = json.dumps(identity, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class QuestionKey:
    """Which trust a decision reads and feeds: the question (``question_id`` and the
    question as asked), the ``reader`` and ``model`` that read it, and ``reading``, the
    fingerprint of its reading settings (``Decision.reading``). ``evidence_key`` is the
    key its evidence is kept under."""

    question_id: str
    question: Any
    reader: str | None = None
    model: str | None = None
    reading: str | None = None

    @property
    def evidence_key(self) -> str:
        return evidence_key(self.question_id, self.question, self.reader, self.model, self.reading)

    def asking(self, question: Any) -> QuestionKey:
        """The same key for another version of the question (a learned read of it)."""
        return replace(self, question=question)

    def read_with(self, reading: str | None) -> QuestionKey:
        """The same key under other reading settings."""
        return replace(self, reading=reading)


__all__ = [
    "EVIDENCE_SCHEMA",
    "EarnedSettings",
    "Evidence",
    "MAX_CLOCK_SKEW_S",
    "MAX_ENTRIES",
    "MIN_RATE",
    "QuestionKey",
    "SCHEMA_VERSION",
    "Source",
    "TRUSTS",
    "Trust",
    "check_time",
    "evidence_key",
    "new_evidence",
    "newer_schema",
]
