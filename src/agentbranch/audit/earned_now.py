"""What the earned-trust report says is in force for one question, and why: the evidence
replayed under the policy's own settings (every record carries them), and a precision
asked of the report replayed as a *what if*, never as the threshold in force.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentbranch.audit.earned_sources import EvidenceRow
from agentbranch.policy.earned import Earned, replay

#: The target a report uses when the records do not say it and none is asked.
DEFAULT_PRECISION = 0.9
DEFAULT_LEVEL = 0.95


def test_of(why: str) -> str:
    """The test behind a ``why`` (a reason ``from_state`` gives), in words: a learned
    version's anytime-valid test (``policy.earned.learn.eprocess``), else Learn-then-Test."""
    if why.startswith("anytime-valid test"):
        return (
            "Anytime-valid betting test: e-processes checked after every label, thresholds "
            "walked down from entries chosen on the version's pre-fit labels"
        )
    return "Learn-then-Test: one-sided exact binomial tests, thresholds walked from the top"


@dataclass(frozen=True)
class Target:
    """The precision and level a question is reported against, and where they come
    from: ``"policy"`` (the policy's own, as its records or the ``Earned`` say),
    ``"asked"`` (given to the report: the records do not say) or ``"default"``
    (neither)."""

    precision: float
    level: float
    origin: str
    settings: Mapping[str, Any] | None = None  # the full Earned settings, when recorded


@dataclass(frozen=True)
class Recomputed:
    """The threshold the policy computes from the records now, and what set it."""

    take_at: float | None
    trust: str
    why: str  # the look (or withdrawal) that set it, in words
    labels: int  # labels in the current epoch (since learning last (re)started)
    next_look_at: int | None  # labels at which the next look runs (while not earned)
    opened_at: int | None = None  # index of the record whose look set an open threshold
    #: share of the decisions the band in force holds (``TrustState.band_share``)
    band_share: float | None = None


@dataclass(frozen=True)
class WhatIf:
    """The same evidence replayed at another precision (asked, not in force)."""

    precision: float
    level: float
    take_at: float | None
    trust: str


def target(rows: Sequence[EvidenceRow], precision: float | None, level: float | None) -> Target:
    """The question's own target (its latest record's settings), else the asked one,
    else the default."""
    for r in reversed(rows):
        if r.settings is not None:
            return Target(r.settings["precision"], r.settings["level"], "policy", r.settings)
    if precision is not None or level is not None:
        return Target(precision or DEFAULT_PRECISION, level or DEFAULT_LEVEL, "asked")
    return Target(DEFAULT_PRECISION, DEFAULT_LEVEL, "default")


def _earned(settings: Mapping[str, Any]) -> Any:
    settings = dict(settings)
    drift_level = settings.pop("drift_level", None)
    earned = Earned(**settings, store=None, refresh_s=0.0)
    earned.drift_level = drift_level  # (a learned version's: the policy's level)
    return earned


def _replay(rows: Sequence[EvidenceRow], settings: Mapping[str, Any]) -> Any:
    """``rows`` replayed under ``settings``; a learned version's with the anytime-valid
    test its records say it ran (``learn.stored.recorded_anytime``), and a learning
    question's written read with its own looks (``learn.stored.recorded_looks``), as the
    live policy runs them."""
    from agentbranch.policy.earned.learn.stored import recorded_anytime, recorded_looks

    records = [r.record for r in rows]
    earned = _earned(settings)
    earned.anytime = recorded_anytime(records, earned.level)
    earned.looks = recorded_looks(records, earned)
    return replay(records, earned)


def recompute(rows: Sequence[EvidenceRow], tgt: Target) -> Recomputed | None:
    """What the policy computes from ``rows`` now (``None``: the rows are audit records,
    not the evidence itself, and cannot be replayed)."""
    if not rows or any(r.record is None for r in rows):
        return None
    settings = tgt.settings or {"precision": tgt.precision, "level": tgt.level}
    return from_state(_replay(rows, settings), _earned(settings))


def from_state(st: Any, earned: Any) -> Recomputed:
    """A ``TrustState`` (replayed, or a live ``Earned``'s) as the report shows it."""
    setting = [e for e in st.events if e.kind in ("earned", "lowered", "withdrawn")]
    if st.trust == "fixed" and not setting:
        why = f"start_at {st.take_at:g}, chosen by hand; no look has lowered it yet"
    elif setting and (st.trust != "learning" or setting[-1].kind == "withdrawn"):
        why = setting[-1].reason
    else:
        looks = [e for e in st.events if e.kind == "look"]
        why = looks[-1].reason if looks and st.looks else "no look yet"
    next_look = earned.looks.at(st.looks) if st.trust in ("learning", "withdrawn") else None
    opened_at = None
    if st.take_at is not None and setting and setting[-1].kind != "withdrawn":
        opened_at = setting[-1].index
    return Recomputed(st.take_at, st.trust, why, st.labels, next_look, opened_at, st.band_share())


def what_if(rows: Sequence[EvidenceRow], tgt: Target, precision: float, level: float) -> WhatIf:
    """The threshold the same evidence gives at ``precision``/``level`` (recorded take_at
    and trust when the rows are audit records and cannot be replayed: then ``trust`` is
    ``"not recomputed"``)."""
    if any(r.record is None for r in rows):
        return WhatIf(precision, level, None, "not recomputed")
    st = _replay(rows, {**(tgt.settings or {}), "precision": precision, "level": level})
    return WhatIf(precision, level, st.take_at, st.trust)


def meaning(take_at: float | None, precision: float, rows: Sequence[EvidenceRow]) -> str | None:
    """One sentence for a threshold well below the target precision (0.09 at 0.9 reads
    like a mistake; it is not one)."""
    if take_at is None or take_at > precision - 0.3:
        return None
    confs = [r.confidence for r in rows if r.confidence is not None]
    median = statistics.median(confs) if confs else None
    how = (
        f"are low (median {median:.2f}) but well ordered"
        if median is not None and median < precision
        else "are well ordered"
    )
    return (
        f"take_at is compared with the engine's confidence (1 - entropy / ln options), "
        f"not with a chance of being right: this question's confidences {how}, so the "
        f"decisions at or above {take_at:g} were shown right at least {precision:.0%} of "
        "the time"
    )


__all__ = [
    "DEFAULT_LEVEL",
    "DEFAULT_PRECISION",
    "Recomputed",
    "Target",
    "WhatIf",
    "from_state",
    "meaning",
    "recompute",
    "target",
    "test_of",
    "what_if",
]
