"""Running a decision stream through the learning ladder (``agentbranch.policy.earned.learn``)
as the policy feeds it, on the trust state machine directly (fast, like
``_earned_streams.run_stream``): shared by tests/test_earned_simulation.py's learning
variant and benchmarks/learning.py.

A version's read of the stream is given as arrays over the stream's decisions:
``conf`` (confidence), ``right`` (its label agrees with the teacher), ``top`` (its top
probability, for calibration).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from agentbranch.policy.earned._state import step
from agentbranch.policy.earned.learn import ladder as ld
from agentbranch.policy.earned.learn.probability import ProbabilityFit, apply


@dataclass
class Read:
    conf: np.ndarray
    right: np.ndarray
    top: np.ndarray


class Rec:
    """The fields of an evidence record the trust state machine reads."""

    __slots__ = ("band", "bet_alpha", "confidence", "correct", "floor", "index", "rate", "take_at")
    id = "s"
    question_id = "stream"

    def __init__(self, confidence, correct, rate, band, take_at, index, floor=None, bet_alpha=None):
        self.confidence, self.correct, self.rate, self.band = confidence, correct, rate, band
        self.take_at, self.index, self.floor = take_at, index, floor
        self.bet_alpha = bet_alpha

    @property
    def time(self) -> str:
        return f"{self.index:09d}"

    @property
    def order(self) -> tuple[int, str]:
        return (self.index, self.id)


@dataclass
class LadderRun:
    taken: np.ndarray  # taken by the version in force
    right: np.ndarray  # the deciding read was right
    top: np.ndarray  # the deciding read's top probability
    #: the probability reported: the deciding version's map, while it is in force
    #: (``agentbranch.policy.earned.learn.probability``), else ``top``
    probability: np.ndarray
    take_at: np.ndarray  # threshold in force (nan: closed)
    version: np.ndarray  # version in force
    labels_before: np.ndarray  # labels gathered before each decision
    labels: int
    #: every version (``Rung.trust``: its settings and trust state, whose events say
    #: each threshold it earned)
    rungs: list = field(default_factory=list)


def run_ladder(
    earned,
    base: Read,
    draw: np.ndarray,
    rate: float,
    fit: Callable[[int, np.ndarray], Read] | None,
    first: int | None = None,
    base_share: float | None = None,
    anytime: bool = True,
    ident: np.ndarray | None = None,
    memorize: bool = False,
) -> LadderRun:
    """One stream: the version in force decides at its threshold; a decision it does not
    take is labelled (the fallback), a taken one with probability ``rate`` (the audit).
    Each label feeds the version in force and the trials (``ladder.trial_fields``); at
    each refit point ``fit(j, labelled positions)`` gives version ``j``'s read of the
    whole stream. ``fit=None``: learning off, version 0 at the full level. ``anytime``:
    each version's anytime-valid test (``eprocess``) starts where its reads of its own
    pre-fit labels say (as the learner's out-of-fold reads do), as shipped.

    ``ident``: each decision's identity (a repeat — a retry, a redelivery — has the one
    it repeats); labels are counted as the learner counts them
    (``agentbranch.policy.earned.learn.loop.QuestionLabels``: one per identity, a repeat is
    no label). ``memorize``: a learned version reads the decisions it was fitted on
    sure and right (an overfit version), so a repeat counted as its evidence would
    open it on labels that say nothing of new traffic."""
    from agentbranch.policy.earned.learn import eprocess
    from agentbranch.policy.earned.learn.loop import QuestionLabels

    first = ld.FIRST_REFIT if first is None else first
    counted = QuestionLabels(first=first, per_option=1)
    n = len(base.conf)
    lad = ld.Ladder(base=base_share)
    cfg0 = ld.version_earned(earned, 0, store=None, base=base_share) if fit else earned
    lad.rungs.append(ld.Rung(0, 0, model=base, trust=(cfg0, cfg0._fresh())))
    fits = {0: ProbabilityFit()}
    out = LadderRun(
        np.zeros(n, bool),
        np.zeros(n, bool),
        np.zeros(n),
        np.zeros(n),
        np.full(n, np.nan),
        np.zeros(n, int),
        np.zeros(n, int),
        0,
    )
    train: list[int] = []

    learned: dict[int, int | None] = {}  # identity -> first version fitted on it (fixed once set)

    def read_of(r: ld.Rung, i: int) -> tuple[float, bool]:
        if memorize and ident is not None and r.index > 0:
            by = learned.get(int(ident[i]))
            if by is None:
                by = learned[int(ident[i])] = counted.learned_by(str(ident[i]), None)
            if by is not None and by <= r.index:
                return 0.99, True
        return float(r.model.conf[i]), bool(r.model.right[i])

    for i in range(n):
        rung = lad.deciding
        _, st = rung.trust
        t = st.take_at
        read = rung.model
        conf, right = read_of(rung, i)
        take = t is not None and conf >= t
        out.taken[i], out.right[i], out.top[i] = take, right, read.top[i]
        mapped = fits[rung.index].in_force if fit is not None else None
        out.probability[i] = read.top[i] if mapped is None else apply(mapped, conf)
        out.take_at[i] = np.nan if t is None else t
        out.labels_before[i], out.version[i] = lad.labels, rung.index
        if take and draw[i] >= rate:
            continue
        if ident is not None:
            if not counted.add(i, str(ident[i]), str(ident[i]), "label"):
                continue  # a repeat of a decision labelled before: no label
            counted.fold()
        lad.labels += 1
        train.append(i)
        floor = 1.0 if not lad.open else rate  # what held when the label was made
        fed = lad.fed
        # e-LOND: each version's bar from the thresholds earned before this label
        bars = [
            None
            if r.trust[0].anytime is None
            else ld.elond_alpha(r.trust[0].anytime[1], lad.discoveries(r), earned.level)
            for r in fed
        ]
        for r, bar in zip(fed, bars):
            rcfg, rst = r.trust
            if r is rung:
                band = "take" if take else "fallback"
                rec = Rec(conf, right, rate if take else 1.0, band, t, i, floor, bar)
            else:
                f = ld.trial_fields(take, rate)
                rec = Rec(*read_of(r, i), f["rate"], f["band"], None, i, floor, bar)
            step(rst, rec, rcfg)
            fits[r.index].add(rec.confidence, float(r.model.top[i]), rec.correct, 1.0 / rec.rate)
        fed = lad.fed  # the ladder's rule: the widest shown band decides (``Ladder.adopt``)
        lad.adopt(
            [r.trust[1].take_at is not None for r in fed], [r.trust[1].band_share() for r in fed]
        )
        if fit is not None and lad.labels == ld.refit_at(len(lad.rungs), first):
            j = len(lad.rungs)
            read_j = fit(j, np.array(train))
            entry = None
            if anytime:  # its reads of the labels it was fitted on: never its evidence
                at = np.array(train)
                entry = eprocess.entry(
                    read_j.conf[at],
                    read_j.right[at],
                    candidates=earned.candidates,
                    precision=earned.precision,
                )
            vcfg = ld.version_earned(earned, j, store=None, base=base_share, entry=entry)
            lad.rungs.append(ld.Rung(j, len(train), model=read_j, trust=(vcfg, vcfg._fresh())))
            fits[j] = ProbabilityFit()
    out.labels = lad.labels
    out.rungs = lad.rungs
    return out
