"""Evidence for earned thresholds: one record per teacher label, and what keys it.

An **evidence record** is what ``Earned`` learns from: one decision of the engine next to
the teacher's label for it. Records are append-only (one stored item per record, unique
``id``) and validated with a pydantic schema on the way in and on the way out of a store.

Schema (``EVIDENCE_SCHEMA``, JSON object, one per line of a JSON Lines store):

* ``schema``: ``"agentbranch.earned/1"``
* ``id``: unique hex id; ``time``: UTC ISO-8601 (ms) when it was recorded
* ``key``: the evidence key (``evidence_key``): a hash of the question's identity (id,
  instructions, options, examples — its ``model_dump``) and of reader and model
* ``question_id``, ``reader``, ``model``: readable copies of what the key hashes
* ``source``: ``"fallback"`` (a ``Generate`` answer in the fallback band: every decision
  there gets one), ``"review"`` (a human's answer in the review band) or ``"audit"``
  (the audit teacher's answer for a sampled share ``rate`` of the decisions, taken ones
  or — with no ``Generate`` — fallback-band ones)
* ``band``: ``"take"`` or ``"fallback"``/``"review"``: where the decision was
* ``confidence``: the engine's confidence in [0, 1]; ``engine_label`` / ``teacher_label``:
  both among ``options``; ``correct``: ``engine_label == teacher_label``
* ``rate``: the probability this decision was labelled (1 for fallback and review, the
  audit rate for audits; each record stands for ``1/rate`` decisions)
* ``take_at`` (float or null: the band was closed) and ``trust``: the threshold in force
  when the decision was made
* ``state`` (optional, only with ``Earned(learn=True)``; absent otherwise): the labelled
  state's text, after ``Earned(redact=...)``, which the question learns from
  (``agentbranch.policy.learn``)
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

EVIDENCE_SCHEMA = "agentbranch.earned/1"

Trust = Literal["learning", "earned", "withdrawn", "fixed"]
Source = Literal["fallback", "review", "audit"]


class Evidence(BaseModel):
    """One teacher label for one engine decision (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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
    rate: float = Field(gt=0.0, le=1.0)
    take_at: float | None = Field(default=None, ge=0.0, le=1.0)
    trust: Trust = "learning"
    # -- learning hook (agentbranch.policy.learn): the labelled state, learn=True only --
    state: str | None = Field(default=None, max_length=100_000)

    @model_validator(mode="after")
    def _consistent(self) -> Evidence:
        if not math.isfinite(self.confidence):
            raise ValueError("confidence must be finite")
        for name in ("engine_label", "teacher_label"):
            if getattr(self, name) not in self.options:
                raise ValueError(f"{name} {getattr(self, name)!r} is not one of {self.options}")
        if self.correct != (self.engine_label == self.teacher_label):
            raise ValueError("correct must say whether engine_label == teacher_label")
        return self

    def to_json(self) -> dict[str, Any]:
        out = self.model_dump(mode="json", by_alias=True)
        if out.get("state") is None:  # learning hook: absent unless learn=True stored one
            out.pop("state", None)
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


def evidence_key(question_id: str, question: Any, reader: str | None, model: str | None) -> str:
    """The key evidence is kept under: question identity (id, instructions, options,
    examples — the whole ``model_dump``) plus reader and model. Change any of them and the
    question starts learning again."""
    spec = question.model_dump(mode="json") if hasattr(question, "model_dump") else question
    blob = json.dumps(
        {"id": question_id, "question": spec, "reader": reader, "model": model},
        sort_keys=True,
        ensure_ascii=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]
