"""The version ladder of one question: which learned version of its read decides, and
which newer versions are on trial (the rule that keeps ``Earned``'s guarantee while the
read learns from the teacher's labels).

``refit_at`` and ``version_share`` say when a version is fitted and its share of the
error, ``elond_alpha`` what its anytime-valid test is checked at for one label,
``version_earned`` tests a version, ``Ladder`` holds the versions of one question.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from agentbranch.core.questions import to_spec
from agentbranch.policy.earned._statistics import Looks
from agentbranch.policy.earned.learn import eprocess

#: Labels at which the first learned version is fitted; later ones at 2x, 4x ...
FIRST_REFIT = 24
#: Versions on trial at once (the newest): each costs one shadow read per label.
MAX_TRIALS = 4


def refit_at(j: int, first: int = FIRST_REFIT) -> int:
    """Labels version ``j >= 1`` is fitted on."""
    return first * 2 ** (j - 1)


#: Version 0's share of the error ``1 - level`` (``version_share``).
BASE_SHARE = 0.8


def version_share(j: int, base: float | None = None) -> float:
    """Version ``j``'s share ``gamma_j`` of the error ``1 - level`` (all shares add up to
    1; ``base``: version 0's, default ``BASE_SHARE``)."""
    base = BASE_SHARE if base is None else base
    return base if j == 0 else (1.0 - base) / (j * (j + 1))


#: Version 0's share when the written read cannot open (``base_share``): a token (a
#: level must be below 1), the versions share the rest from the start.
BARE_BASE = 1e-6


def base_share(reader: str | None, question_id: str, question: Any) -> float:
    """Version 0's share of the error for ``question`` read by ``reader``: ``BARE_BASE``
    when the written read cannot open (on the embedded reader, a question that gives it
    nothing to read, ``readers.embedded.missing_signal``), else ``BASE_SHARE``. Decided
    from the question and the reader alone, before any label."""
    if reader != "embedded":
        return BASE_SHARE
    from agentbranch.engine.readers.embedded.scoring import missing_signal

    try:
        spec = to_spec(question_id, question)
    except Exception:  # noqa: BLE001 - a question the reader refuses: the default split
        return BASE_SHARE
    return BARE_BASE if missing_signal(spec) else BASE_SHARE


def elond_alpha(error: float, discoveries: int, level: float) -> float:
    """The error a learned version's anytime-valid test is checked at for one label
    (e-LOND): ``error`` (its test's share, ``eprocess.SHARE · (1 - level) · gamma_j``)
    times one more than the ``discoveries`` (the question's other versions that had
    earned a threshold before the label), capped at ``eprocess.SHARE · (1 - level)`` so
    each threshold holds at the policy's level by itself."""
    return min(error * (max(0, int(discoveries)) + 1), eprocess.SHARE * (1.0 - level))


#: Looks of the question as written that spend what they would without learning
#: (``written_looks``): a stream too short for a version to open loses nothing.
WRITTEN_LOOKS_AS_ALONE = 1


def written_looks(min_evidence: int, base: float | None = None) -> Any:
    """The looks of the question as written of a learning policy, at ``min_evidence``,
    2x, 4x ... labels: the first ``WRITTEN_LOOKS_AS_ALONE`` spend what they would without
    learning, the later ones halves of what is left of its share."""
    share = version_share(0, base)
    k = WRITTEN_LOOKS_AS_ALONE
    head = tuple(0.5 ** (i + 1) / share for i in range(k)) if share < 1.0 else ()
    while head and not sum(head) < 1.0:  # (a share too small to spend them all)
        head = head[:-1]
    return Looks(min_evidence, head)


def version_alphas(
    level: float, j: int, entry: tuple[float, ...] | None = None, base: float | None = None
) -> tuple[float, float | None]:
    """The errors version ``j`` of a policy at ``level`` spends: its looks' and its
    anytime-valid test's (``None``: none; with ``entry`` and ``j >= 1`` it takes
    ``eprocess.SHARE`` of the version's share)."""
    alpha = (1.0 - level) * version_share(j, base)
    if entry is None or j < 1:
        return alpha, None
    test = alpha * eprocess.SHARE
    return alpha - test, test


def version_earned(
    earned: Any,
    j: int,
    store: Any = None,
    base: float | None = None,
    entry: tuple[float, ...] | None = None,
) -> Any:
    """A copy of ``earned`` testing version ``j`` at its errors (``version_alphas``) on
    ``store`` (default: a view of ``earned``'s own); with ``entry`` its anytime-valid
    test walks down from there."""
    alpha, test = version_alphas(earned.level, j, entry, base)
    anytime = None if test is None else (tuple(entry or ()), test)
    store = earned.evidence.view() if store is None else store
    copy = replace(earned, level=1.0 - alpha, store=store, learn=False)
    copy._checkpoints = False  # one checkpoint per store: the original's
    # its drift test at the policy's level: withdrawal protects, sooner is safe
    copy.drift_level = earned.level if earned.drift_level is None else earned.drift_level
    if j == 0:
        copy.looks = written_looks(copy.min_evidence, base)
    copy.anytime = anytime  # (entry, error) of its anytime-valid test (``_state.step``)
    # its records say which version it is and where its test starts (``learn.stored``)
    copy.learn_fields = {"version": j}
    if anytime is not None and anytime[0]:
        copy.learn_fields["entries"] = anytime[0]
    copy.second_walk_from = earned.second_walk_from  # tuned on the original, kept alike
    return copy


def trial_fields(taken: bool, rate: float) -> dict[str, Any]:
    """The record fields of a trial version's shadow read of a labelled decision that
    the version in force took (``taken``, labelled at ``rate``) or did not."""
    return {
        "band": "review" if taken else "fallback",
        "rate": rate if taken else 1.0,
        "take_at": None,
        "trust": "learning",
    }


def widest(holds: list[bool], shares: list[float | None] | None = None) -> int | None:
    """Of versions in order (oldest first), the index of the one to put in force: of
    those holding a threshold, the one whose band holds the largest share of the
    decisions, the newer on a tie (the newest when a share is not known); ``None``: none."""
    shares = shares or [None] * len(holds)
    unknown = any(s is None for h, s in zip(holds, shares) if h)  # (then the newest)
    best, best_share = None, -math.inf
    for i, (holds_one, share) in enumerate(zip(holds, shares)):
        if holds_one and (unknown or share >= best_share):
            best, best_share = i, share
    return best


@dataclass
class Rung:
    """One version of a question's read on the ladder."""

    index: int
    fitted_on: int  #: labels it was fitted on (0: the question as written)
    model: Any = None  #: what reads it (a question with learned examples, a head ...)
    trust: Any = None  #: its trust (whatever the caller keeps: a ``TrustState``, a key)
    #: where its anytime-valid test's walks start (``eprocess.entry``; ``None``: looks only)
    entry: tuple[float, ...] | None = None


@dataclass
class Ladder:
    """The versions of one question: ``in_force`` decides, the newer ones ``fed`` beside
    it are on trial, tested on shadow reads of labels after their fit (the rule and its
    guarantee: docs/learning_method.md). The widest band held decides (``widest``);
    while none is held, the newest reads.
    """

    rungs: list[Rung] = field(default_factory=list)
    #: the newest version that held a threshold (0: none yet); it and newer ones are fed
    in_force: int = 0
    labels: int = 0  #: labels of the question (all versions)
    #: whether a fed version holds a threshold now (``adopt``)
    open: bool = False
    #: version 0's share of the error (``base_share``; ``None``: ``BASE_SHARE``)
    base: float | None = None
    #: indices of the versions that have held a threshold (e-LOND's discoveries)
    found: set[int] = field(default_factory=set)

    def discoveries(self, rung: Rung) -> int:
        """Versions other than ``rung`` that have held a threshold (``elond_alpha``)."""
        return len(self.found - {rung.index})

    def bet_alpha(self, rung: Rung, anytime: Any, level: float) -> float | None:
        """The error ``rung``'s anytime-valid test (``anytime``: its ``(entries,
        error)``, ``None``: none) is checked at for the next label (``elond_alpha``)."""
        return None if anytime is None else elond_alpha(anytime[1], self.discoveries(rung), level)

    @property
    def deciding(self) -> Rung:
        """The version whose read decides: the one in force while it holds a
        threshold, else the newest (it takes nothing: no fed version holds one)."""
        return self.rungs[self.in_force] if self.open else self.rungs[-1]

    @property
    def fed(self) -> list[Rung]:
        """The version in force and the newest (at most ``MAX_TRIALS``) newer ones on
        trial: every label goes to these."""
        trials = self.rungs[self.in_force + 1 :][-MAX_TRIALS:]
        return [self.rungs[self.in_force], *trials]

    def restore(self, holds: list[bool], shares: list[float | None]) -> None:
        """After a restart, given for every rung whether it holds a threshold and its
        band's share: the one ``widest`` picks in force, those holding one found."""
        self.in_force = widest(holds, shares) or 0
        self.open = any(holds)
        self.found.update(r.index for r, held in zip(self.rungs, holds) if held)

    def adopt(
        self, holds_threshold: list[bool], shares: list[float | None] | None = None
    ) -> Rung | None:
        """Given, for each fed rung, whether it now holds a threshold and its band's
        share of the decisions, put in force the one ``widest`` picks; the rung put in
        force when it changed."""
        fed = self.fed
        self.found.update(r.index for r, held in zip(fed, holds_threshold) if held)
        i = widest(holds_threshold, shares)
        self.open = i is not None
        if i is None or fed[i].index == self.in_force:
            return None
        self.in_force = fed[i].index
        return fed[i]


__all__ = [
    "BARE_BASE",
    "BASE_SHARE",
    "FIRST_REFIT",
    "Ladder",
    "MAX_TRIALS",
    "Rung",
    "base_share",
    "elond_alpha",
    "refit_at",
    "trial_fields",
    "version_alphas",
    "version_earned",
    "version_share",
    "widest",
]
