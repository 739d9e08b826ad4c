"""``Earned.stored()`` of a learning policy: each learned version's evidence key tested
as the live policy tests it, at that version's share of the error and with the
anytime-valid test walking from the entries its records carry (``key_entries``: records
that disagree on them replay with no bet, fail closed).
"""

from __future__ import annotations

import logging
from typing import Any

from agentbranch.policy.earned._state import replay
from agentbranch.policy.earned.learn import eprocess
from agentbranch.policy.earned.learn.ladder import version_earned, written_looks

log = logging.getLogger("agentbranch")


def key_version(records: list[Any]) -> int | None:
    """The version of the read a key's records are evidence of (its latest record's),
    ``None`` when they do not say."""
    return next((rec.version for rec in reversed(records) if rec.version is not None), None)


def key_entries(records: list[Any]) -> tuple[float, ...] | None:
    """The entries a key's records carry: where their version's anytime-valid test starts
    (``None``: none carries any; ``()``: they disagree, so nothing is bet)."""
    found = {tuple(e) for rec in records if (e := rec.entries) is not None}
    if len(found) <= 1:
        return next(iter(found), None)
    log.warning(
        "agentbranch.learn: the records of evidence key %s carry different walk entries "
        "(%s): the store was edited or mixes writers; its anytime-valid test is not replayed "
        "(looks only)",
        records[-1].key,
        "; ".join(sorted(", ".join(f"{t:g}" for t in e) for e in found)),
    )
    return ()


def recorded_anytime(
    records: list[Any], looks_level: float
) -> tuple[tuple[float, ...], float] | None:
    """The anytime-valid test (``(entries, error)``, as ``Earned.anytime``) of the
    learned version a key's records are evidence of, from ``looks_level``, the level
    they carry (its looks', ``1 - eprocess.SHARE`` of its share); ``None`` when they
    carry no entries or are not of a learned version."""
    j, entries = key_version(records), key_entries(records)
    if j is None or j < 1 or entries is None:
        return None
    return entries, (1.0 - looks_level) * eprocess.SHARE / (1.0 - eprocess.SHARE)


def recorded_looks(records: list[Any], earned: Any) -> Any:
    """The looks of the version a key's records are evidence of: the question as
    written's (``ladder.written_looks``) for version 0, else ``earned``'s own."""
    return written_looks(earned.min_evidence) if key_version(records) == 0 else earned.looks


def at_shares(earned: Any, states: dict[str, Any]) -> dict[str, Any]:
    """``states`` (by evidence key, computed at ``earned.level``) with every learned
    version's key replayed from the store as that version is tested (``version_earned``)."""
    copies: dict[tuple, Any] = {}
    out = dict(states)
    for key in states:
        records = earned.evidence.load(key)
        j = key_version(records)
        if j is None:
            continue
        entries = key_entries(records)
        if (j, entries) not in copies:
            copies[j, entries] = version_earned(earned, j, store=earned.evidence, entry=entries)
        out[key] = replay(records, copies[j, entries])
    return out


__all__ = [
    "at_shares",
    "key_entries",
    "key_version",
    "recorded_anytime",
    "recorded_looks",
]
