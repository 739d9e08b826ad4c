"""Where the earned-trust report reads its evidence (a file, a LangGraph store, an
``Earned``, records), as ``EvidenceRow``s: one teacher label for one decision, with the
threshold and trust in force for it. Each record is kept small (``Kept``), so a month's
store is reported on in a fraction of its size in memory."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentbranch.core.audit_records import check_record, load_records
from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.core.files import is_evidence_schema
from agentbranch.policy.earned import (
    Earned,
    EarnedSettings,
    Evidence,
    EvidenceStore,
    JsonlEvidenceStore,
    as_store,
)
from agentbranch.policy.trust import TRUSTS


@dataclass(frozen=True, slots=True)
class EvidenceRow:
    """One teacher label, from an evidence record or an audit record."""

    group: str  # the evidence key (audit records: question id, reader, model)
    question_id: str
    reader: str | None
    model: str | None
    time: str
    order: tuple[str, str]
    band: str  # "take" or not
    rate: float
    correct: bool
    take_at: float | None
    trust: str
    confidence: float | None = None
    source: str | None = None  # "fallback" | "review" | "audit"
    #: the ``Earned`` settings the record was made under (``None``: not recorded)
    settings: Mapping[str, Any] | None = None
    #: the evidence record itself (``None`` for an audit record): what is replayed
    record: Any = None


class Kept:
    """An evidence record as the report keeps it: every field of ``Evidence`` (read
    the same way), in slots; values that repeat from record to record (names, labels,
    settings) shared; the labelled state's text dropped (``state`` holds a placeholder
    where the record had one: the report asks only whether it did)."""

    __slots__ = tuple(Evidence.model_fields)

    @property
    def order(self) -> tuple[str, str]:
        return (self.time, self.id)


_SHARED = ("key", "question_id", "reader", "model", "source", "band", "engine_label")
_SHARED += ("teacher_label", "trust", "written", "rate", "take_at", "floor")


class _Keeper:
    """Makes rows of evidence records, each record ``Kept``, sharing repeated values."""

    def __init__(self) -> None:
        self.values: dict[Any, Any] = {}
        #: one instance (and its dict) for each distinct ``Evidence.earned``
        self.settings: dict[str, tuple[Any, dict[str, Any]]] = {}

    def share(self, value: Any) -> Any:
        return self.values.setdefault((type(value), value), value)  # 1.0 is not True

    def row(self, rec: Any) -> EvidenceRow:
        """``rec`` as a row, the record it keeps ``Kept``."""
        out = Kept()
        for name in Kept.__slots__:
            value = getattr(rec, name)
            setattr(out, name, self.share(value) if name in _SHARED else value)
        out.options = self.share(tuple(rec.options))
        if rec.state is not None:
            out.state = "(the labelled state; not kept by the report)"
        settings = None
        if rec.earned is not None:
            text = rec.earned.model_dump_json()
            if text not in self.settings:
                self.settings[text] = (rec.earned, rec.earned.model_dump())
            out.earned, settings = self.settings[text]
        return EvidenceRow(
            out.key,
            out.question_id,
            out.reader,
            out.model,
            out.time,
            out.order,
            out.band,
            out.rate,
            out.correct,
            out.take_at,
            out.trust,
            out.confidence,
            out.source,
            settings,
            out,
        )


# -- input ----------------------------------------------------------------------------


def is_evidence_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file whose first non-empty line is an evidence
    record (what ``Earned(store="....jsonl")`` writes) rather than an audit record.
    Reads at most the first 1 MiB; FIFOs, devices and directories are not opened."""
    for raw in _head(Path(path), 1 << 20).splitlines():
        if raw.strip():
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError):  # the audit loader says what is wrong
                return False
            # any release's evidence: a newer one is refused by name when read
            return isinstance(obj, dict) and is_evidence_schema(obj.get("schema"))
    return False


_POSTGRES = ("postgres://", "postgresql://")


def is_evidence_store(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names evidence the report can open: an evidence JSON Lines
    file, a SQLite database file (LangGraph ``SqliteStore``) or a PostgreSQL URI
    (``postgresql://...``, LangGraph ``PostgresStore``)."""
    return str(target).startswith(_POSTGRES) or is_evidence_file(target) or _is_sqlite(Path(target))


def _head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of a regular file (empty when it is none or unreadable)."""
    if not path.is_file():
        return b""
    try:
        with path.open("rb") as f:
            return f.read(size)
    except OSError:
        return b""


def _is_sqlite(path: Path) -> bool:
    return _head(path, 16) == b"SQLite format 3\x00"


def _check_sqlite_store(path: str) -> None:
    """A SQLite file without LangGraph's ``store`` table is somebody else's database:
    an error, and it stays untouched (opening it as a store would create tables)."""
    import sqlite3

    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as con:
            found = con.execute(
                "select 1 from sqlite_master where type = 'table' and name = 'store'"
            ).fetchone()
    except sqlite3.Error as e:
        raise ConfigurationError(f"cannot read evidence from {path}: {e}") from None
    if not found:
        raise ConfigurationError(
            f"cannot read evidence from {path}: it is a SQLite database but not a LangGraph "
            "store (no 'store' table); give the file Earned(store=SqliteStore...) writes to"
        )


def _database_rows(target: str) -> list[EvidenceRow]:
    """Rows of the evidence in a SQLite file or a PostgreSQL database (LangGraph's
    stores, as ``Earned(store=SqliteStore/PostgresStore)`` wrote them)."""
    if target.startswith(_POSTGRES):
        try:
            from langgraph.store.postgres import PostgresStore
        except ImportError:
            raise ConfigurationError(
                "reading a PostgreSQL evidence store needs langgraph-checkpoint-postgres: "
                "pip install langgraph-checkpoint-postgres"
            ) from None
        opener: Any = PostgresStore
    else:
        from langgraph.store.sqlite import SqliteStore

        _check_sqlite_store(target)
        opener = SqliteStore
    try:
        with opener.from_conn_string(target) as store:
            return evidence_rows(store)
    except ConfigurationError:
        raise
    except Exception as e:  # noqa: BLE001 - a database that is not a LangGraph store
        raise ConfigurationError(
            f"cannot read evidence from {target}: {type(e).__name__}: {e}; give the "
            "database Earned(store=SqliteStore/PostgresStore) writes to"
        ) from None


def _settings(raw: Any, where: str) -> dict[str, Any] | None:
    """An audit record's ``earned`` settings, checked like an evidence record's."""
    if raw is None:
        return None
    try:
        return EarnedSettings.model_validate(raw).model_dump()
    except ValueError as e:
        raise ConfigurationError(f"{where}: earned settings are not valid: {e}") from None


def _from_audit(rec: Mapping[str, Any], where: str) -> EvidenceRow | None:
    """An audit record (``check_record`` passed it) as a row; ``None`` for records of a
    fixed policy (nothing about earned trust in them)."""
    trust = rec.get("trust")
    if trust not in TRUSTS or trust == "fixed" and rec.get("take_at") is None:
        return None
    question_id = str(rec["question_id"])
    reader, model = rec.get("reader"), rec.get("model")
    time = str(rec.get("time") or "")
    return EvidenceRow(
        f"{question_id} ({reader}, {model})",
        question_id,
        reader,
        model,
        time,
        (time, str(rec.get("id") or "")),
        str(rec.get("band")),
        float(rec.get("rate") or 1.0),
        rec["teacher_label"] == rec["engine_label"],
        rec.get("take_at"),
        trust,
        float(rec["confidence"]),
        rec["kind"],
        _settings(rec.get("earned"), where),
    )


def evidence_rows(source: Any) -> list[EvidenceRow]:
    """Rows from an evidence file, an ``Earned``, an evidence store, a LangGraph store,
    or records (evidence records, their dicts, or audit records)."""
    if isinstance(source, str) and source.startswith(_POSTGRES):
        return _database_rows(source)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if _is_sqlite(path):
            return _database_rows(str(path))
        if not path.is_file():
            raise ConfigurationError(
                f"no evidence file at {path}; Earned(store='...jsonl') writes one"
            )
        if not is_evidence_file(path):
            return evidence_rows(load_records(path))
        source = JsonlEvidenceStore(path)
    if isinstance(source, Earned):
        source = source.evidence
    from langgraph.store.base import BaseStore

    if isinstance(source, BaseStore):
        source = as_store(source)
    keeper = _Keeper()
    if isinstance(source, EvidenceStore):  # one record at a time (a JSON Lines file: one pass)
        return [keeper.row(r) for r in source.records()]
    if isinstance(source, bytes | Mapping):
        raise ConfigurationError(f"cannot report on {type(source).__name__}")
    rows = []
    for i, rec in enumerate(source):
        if isinstance(rec, Evidence):
            rows.append(keeper.row(rec))
        elif isinstance(rec, Mapping) and is_evidence_schema(rec.get("schema")):
            try:
                rows.append(keeper.row(Evidence.model_validate(rec)))
            except ValueError as e:
                raise InvalidFileError(f"record {i} is not an evidence record: {e}") from None
        elif isinstance(rec, Mapping):
            row = _from_audit(check_record(rec, f"record {i}"), f"record {i}")
            if row is not None:
                rows.append(row)
        else:
            raise ConfigurationError(
                f"record {i}: expected an evidence or audit record, got {type(rec).__name__}"
            )
    return rows


__all__ = [
    "EvidenceRow",
    "evidence_rows",
    "is_evidence_file",
    "is_evidence_store",
]
