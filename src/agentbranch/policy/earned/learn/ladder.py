"""The version ladder of one question: which learned version of its read decides, and
which newer versions are on trial (the rule that keeps ``Earned``'s guarantee while the
read learns from the teacher's labels).

``refit_at`` and ``version_share`` say when a version is fitted and what share of the
error it is given (``base_share``: none for a written read that cannot open),
``elond_alpha`` the error a version's anytime-valid test is checked at for one label
(e-LOND: thresholds earned by other versions earn it more), ``version_earned`` tests a
version, ``Ladder`` holds the versions of one question (the rule in full: its docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

#: Labels at which the first learned version is fitted; later ones at 2x, 4x ...
#: ``benchmarks/learning_path.py``, ten orders of every public question, learning on:
#: 16 labels 0.2428 of the decisions taken, 20 0.2511, 24 0.2551, 28 0.2537, 32 0.2507
#: (a version fitted sooner opens sooner, one fitted on too few labels reads worse).
FIRST_REFIT = 24
#: Versions on trial at once (the newest ones): each label costs one shadow read per
#: trial, and a trial that has not passed by the time four newer versions exist (16x
#: the labels it was fitted on) is retired. Two was measured to cost a quarter of the
#: gain (``benchmarks/learning.py``: 1.54x instead of 1.66x the coverage of learn-off):
#: an early version, with the most trial evidence, is often the first to pass.
MAX_TRIALS = 4


def refit_at(j: int, first: int = FIRST_REFIT) -> int:
    """Labels version ``j >= 1`` is fitted on."""
    return first * 2 ** (j - 1)


#: Version 0's share of the error ``1 - level``; version ``j >= 1`` gets
#: ``(1 - BASE_SHARE) / (j (j + 1))`` (the shares add up to 1). Chosen on the ``tune``
#: half of the public sets (``benchmarks/learning_path.py --split tune``: 0.198 of the
#: decisions taken at 0.8 against 0.170 at 0.5, with learned versions on the
#: anytime-valid test).
BASE_SHARE = 0.8


def version_share(j: int, base: float | None = None) -> float:
    """Version ``j``'s share ``gamma_j`` of the error ``1 - level`` (all shares add up to
    1; ``base``: version 0's, default ``BASE_SHARE``)."""
    base = BASE_SHARE if base is None else base
    return base if j == 0 else (1.0 - base) / (j * (j + 1))


#: Version 0's share of the error when the written read cannot open (``base_share``):
#: its reads are near-uniform by construction (confidence 0: no band above any
#: candidate), so it is kept a token share (a level must be below 1) and the versions
#: share the rest from the start.
BARE_BASE = 1e-6


def base_share(reader: str | None, question_id: str, question: Any) -> float:
    """Version 0's share of the error for ``question`` read by ``reader``: ``BARE_BASE``
    when the written read cannot open, else ``BASE_SHARE``. It cannot open on the
    embedded reader when the question gives it nothing to read
    (``readers.embedded.missing_signal``: a bare yes/no, bare score words), which that
    reader answers uniformly. Decided from the question and the reader alone, before any
    label, so the split stays fixed in advance (a yes/no whose two descriptions embed
    alike is found only at read time: it keeps ``BASE_SHARE``)."""
    if reader != "embedded":
        return BASE_SHARE
    from agentbranch.core.questions import to_spec
    from agentbranch.engine.readers.embedded.scoring import missing_signal

    try:
        spec = to_spec(question_id, question)
    except Exception:  # noqa: BLE001 - a question the reader refuses: the default split
        return BASE_SHARE
    return BARE_BASE if missing_signal(spec) else BASE_SHARE


def elond_alpha(error: float, discoveries: int, level: float) -> float:
    """The error a learned version's anytime-valid test is checked at for one label
    (e-LOND, Xu & Ramdas, "Online multiple testing with e-values", AISTATS 2024):
    ``min(error · (discoveries + 1), eprocess.SHARE · (1 - level))``, where ``error`` is
    its share of the test's error (``eprocess.SHARE · (1 - level) · gamma_j``, the
    paper's ``alpha · gamma_j``) and ``discoveries`` the versions of the question other
    than this one that had earned a threshold before the label was made (the paper's
    ``|R_{t-1}|``). The cap keeps each threshold at the policy's level by itself."""
    from agentbranch.policy.earned.learn import eprocess

    most = eprocess.SHARE * (1.0 - level)
    return min(error * (max(0, int(discoveries)) + 1), most)


#: Looks of the question as written that spend, with learning on, the error they would
#: spend without learning (``written_looks``). One: its first look (at 50 labels by
#: default) opens exactly what it opens without learning, so a stream too short for a
#: version to open loses nothing to learning; later looks spend less (the rest of its
#: share). ``benchmarks/learning_path.py``, ten orders of every public question: the
#: first 100 decisions 0.0326 -> 0.0392 of them taken (0.0362 without learning), whole
#: streams 0.2516 -> 0.2507; two looks: 0.2489.
WRITTEN_LOOKS_AS_ALONE = 1


def written_looks(min_evidence: int, base: float | None = None) -> Any:
    """The looks of the question as written (version 0) of a learning policy: at the
    policy's own labels (``min_evidence``, 2x, 4x ...); its first
    ``WRITTEN_LOOKS_AS_ALONE`` looks spend what they would spend without learning
    (``(1 - level) / 2**(k+1)``), the later ones halves of what is left of its share."""
    from agentbranch.policy.earned._statistics import Looks

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
    anytime-valid test's (``None``: it has none; with ``entry`` and ``j >= 1`` it takes
    ``eprocess.SHARE`` of the version's share). ``version_earned`` tests at these; a
    replay from the store (``learn.stored``) at the same ones."""
    from agentbranch.policy.earned.learn import eprocess

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
    """A copy of ``earned`` testing version ``j`` at its share of the error, on
    ``store`` (default: ``earned``'s own evidence store, shared). With entries
    (chosen from the version's pre-fit labels, ``eprocess.entry``) a share
    ``eprocess.SHARE`` of it goes to the anytime-valid test walking down from there
    (``eprocess``), the rest to the looks."""
    alpha, test = version_alphas(earned.level, j, entry, base)
    anytime = None if test is None else (tuple(entry or ()), test)
    extra = {"learn": False} if hasattr(earned, "learn") else {}

    copy = replace(
        earned,
        level=1.0 - alpha,
        store=earned.evidence.view() if store is None else store,
        **extra,
    )
    copy._checkpoints = False  # one checkpoint per store: the original's
    # its drift test at the policy's level: withdrawal protects, sooner is safe
    copy.drift_level = earned.level if earned.drift_level is None else earned.drift_level
    if j == 0:
        copy.looks = written_looks(copy.min_evidence, base)
    copy.anytime = anytime  # (entry, error) of its anytime-valid test (``_state.step``)
    # its evidence says which version it is, and where its test starts (so a replay
    # from the store runs the same test: ``learn.stored``)
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
    those holding a threshold (``holds``), the one whose band holds the largest share
    of the decisions (``shares``), the newer one on a tie; the newest holding one when
    any of their shares is not known. ``None``: none holds a threshold."""
    held = [
        (i, share)
        for i, (holds_one, share) in enumerate(zip(holds, shares or [None] * len(holds)))
        if holds_one
    ]
    if any(share is None for _, share in held):  # (a size not known: the newest)
        held = [(i, 0.0) for i, _ in held]
    best, best_share = None, -math.inf
    for i, share in held:
        if share >= best_share:
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
    """The versions of one question: ``in_force`` decides, ``trials`` are tested.

    * **Versions.** Version 0 is the question as written. Version ``j >= 1`` is fitted on
      the first ``refit_at(j)`` labels of the question (``first``, ``2·first``, ``4·first``
      ...): a reader that changed from its labels is a new reader, with an evidence key of
      its own (the learned examples are part of the question, so they are part of the key).
    * **Trials.** A version is tested only on labels gathered *after* its fit, each read
      again by that version (a shadow read of the same state): no label it learned from is
      evidence for it. Until it has earned a threshold of its own, the version in force
      keeps deciding at its own threshold (closing the band at every refit was measured to
      end below not learning at all).
    * **Strata.** A trial's labels were sampled by the decisions of the version in force:
      every decision outside its take band was labelled, a taken one only at the audit
      rate. So for the trial the sample's strata are those two sets, whatever the trial's
      own confidence says; a trial record is written with ``take_at=None`` (nothing of the
      trial was in force) and the audited ones in a stratum of their own (``band="review"``,
      the statistics' second stratum flag, with ``rate`` the audit rate), so the stratified
      test weights the two sets by their share of the decisions (``_statistics``).
    * **Adoption.** After every label, of the fed versions holding a threshold, the one
      whose band holds the largest share of the decisions decides (``widest``: each
      band's share as its own labels estimate it, weighted ``1/rate``; a newer one wins a
      tie): a newer version shown on a narrower band than the one in force stays on
      trial until its band is as wide. Which shown version decides spends no error: each
      holds its own threshold (the error below). Versions older than the one in
      force are no longer fed. While no fed version holds one, nothing is taken
      whichever version reads, so the newest version reads (its read, and the confidence
      its own map gives it, is what the decision carries, always sent to the teacher); the
      older fed ones keep getting every label, as shadow reads, so any of them may still
      earn a threshold and decide. At most ``MAX_TRIALS`` versions are on trial at once
      (the newest): each costs a shadow read per label.
    * **Error: the guarantee.** Two statements, each under exchangeable traffic within a
      version's trial (between drift withdrawals), the teacher as the reference, as for
      ``Earned`` itself:

      1. *Per threshold.* Each threshold a version earns has a take band at or above the
         target precision with probability at least ``level``, on labels the version
         never learned from.
      2. *Across versions (FDR).* Of the versions of a question that earn a threshold,
         the expected share whose threshold is below the target is at most ``1 - level``.

      Version ``j`` is given a share ``gamma_j`` of ``alpha = 1 - level``
      (``version_share``: version 0 ``base``, version ``j >= 1`` ``(1 - base)/(j (j+1))``;
      they add up to 1). ``base`` is ``BASE_SHARE``, or ``BARE_BASE`` where the written
      read cannot open (``base_share``: the versions get its share from the start). The
      rule is e-LOND (Xu & Ramdas 2024): hypothesis ``t`` is rejected when its e-value
      ``e_t >= 1/alpha_t``, ``alpha_t = alpha · gamma_t · (|R_{t-1}| + 1)``; the FDR is then
      at most ``alpha · sum gamma_t`` under any dependence, because a rejected ``t`` has
      ``|R_T| >= |R_{t-1}| + 1``, so ``1{t rejected} / |R_T| <= alpha gamma_t e_t``. Here:

      - a version's *looks* (and the written question's, its only test) spend a fixed
        error, ``(1 - eprocess.SHARE)`` of ``alpha · gamma_j`` (all of it for version 0):
        their e-value is ``1{shown} / that error``;
      - its *anytime-valid test* (``eprocess``) is checked, at each label, against
        ``elond_alpha``: ``eprocess.SHARE · alpha · gamma_j · (D + 1)``, capped at
        ``eprocess.SHARE · alpha`` (statement 1), where ``D`` counts the *other* versions
        of the question that had earned a threshold *before that label* (each version
        once, a withdrawn one too: it was put in force). Its e-value is the wealth at the
        first crossing of its first candidate below the target;
      - the version's e-value is ``(1 - SHARE) ·`` the looks' ``+ SHARE ·`` the test's,
        at least ``1 / (alpha gamma_j (D + 1))`` when either shows a threshold.

      *Order.* Concurrent versions are not ranked: the count a label is checked with is
      of discoveries that stand before the label, whichever version made them (an older
      or a newer one); a threshold earned on a label counts from the next label. The proof
      needs only ``|R_T| >= D + 1`` for a version that earns one, which holds whatever
      order they earn in. The count a label was bet at is written in its record
      (``Evidence.bet_alpha``), so a replay from the store runs the same test.
      ``tests/test_learn_simulation.py`` checks both statements, with retries, repeats and
      drift.

      A learned version's test costs only ``log(1/alpha)`` per label in its band, so the
      versions open after a few dozen labels; each threshold shown lowers the bar of every
      other version's test. The written question's first look spends what it spends
      without learning (``written_looks``): where it opens at that look, it opens at the
      same label as without learning.
    """

    first: int = field(default_factory=lambda: FIRST_REFIT)
    rungs: list[Rung] = field(default_factory=list)
    #: index into ``rungs`` of the newest version that held a threshold (0: none yet):
    #: it and the newer ones are fed
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
        if anytime is None:
            return None
        return elond_alpha(anytime[1], self.discoveries(rung), level)

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

    def due(self) -> bool:
        """Whether a new version is due now (``labels`` just reached a refit point)."""
        return self.labels == refit_at(len(self.rungs), self.first)

    def restore(self, holds: list[bool], shares: list[float | None]) -> None:
        """After a restart, given for every rung whether it holds a threshold and its
        band's share: the one ``widest`` picks in force, those holding one found."""
        self.in_force = widest(holds, shares) or 0
        self.open = any(holds)
        self.found.update(r.index for r, held in zip(self.rungs, holds) if held)

    def adopt(
        self, holds_threshold: list[bool], shares: list[float | None] | None = None
    ) -> Rung | None:
        """Given, for each fed rung, whether it now holds a threshold (and the share of
        the decisions its band holds, ``TrustState.band_share``), put in force the one
        that takes the most: a newer version replaces the one in force only when its
        band holds at least as large a share of the decisions (without ``shares``, or
        where a share is not known, the newest one holding a threshold). Returns the
        rung put in force when it changed."""
        fed = self.fed
        self.found.update(r.index for r, held in zip(fed, holds_threshold) if held)
        i = widest(holds_threshold, shares)
        best = None if i is None else fed[i]
        self.open = best is not None
        if best is None or best.index == self.in_force:
            return None
        self.in_force = best.index
        return best


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
