"""``Earned.stored()`` of a learning policy: each learned version's evidence key tested
at that version's own share of the error (``ladder.version_share``), as the live policy
tests it, not at the policy's full level.

A key's version is what its records say (``Evidence.version``, written by the copy of
``Earned`` that tests that version). A key whose records say none (written before
versions were recorded, or by a policy that does not learn) keeps the state computed at
the full level.
"""

from __future__ import annotations

from typing import Any

from agentbranch.policy.earned.learn.ladder import version_earned


def key_version(records: list[Any]) -> int | None:
    """The version of the read a key's records are evidence of (its latest record's),
    ``None`` when they do not say."""
    for rec in reversed(records):
        j = getattr(rec, "version", None)
        if j is not None:
            return j
    return None


def at_shares(earned: Any, states: dict[str, Any]) -> dict[str, Any]:
    """``states`` (by evidence key, computed at ``earned.level``) with every learned
    version's key replayed from the store at its version's share of ``1 - level``."""
    from agentbranch.policy.earned._state import replay

    copies: dict[int, Any] = {}
    out = dict(states)
    for key in states:
        records = earned.evidence.load(key)
        j = key_version(records)
        if j is None:
            continue
        if j not in copies:
            copies[j] = version_earned(earned, j, store=earned.evidence)
        out[key] = replay(records, copies[j])
    return out


__all__ = [
    "at_shares",
    "key_version",
]
