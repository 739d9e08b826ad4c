"""The labels one learning question has: each decision once, which versions learned from
it, and what each version's fit reads (a bounded sample per option).

``QuestionLabels`` counts them (identity, rank and what a fit reads: its docstring);
``identity`` says what makes two labels one, ``same_text`` which states are one text
to a version that learned from one of them, ``priority`` a label's place in its
option's sample.
"""

from __future__ import annotations

import bisect
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from agentbranch.policy.earned.learn import ladder as _ladder
from agentbranch.policy.earned.learn.ladder import refit_at

__all__ = ["FIT_PER_OPTION", "Labelled", "QuestionLabels", "identity", "priority", "same_text"]

#: Labels per option a version's fit reads at most (``benchmarks/learning_bound.py``:
#: the head fitted on this many per option is within noise of the head fitted on all).
FIT_PER_OPTION = 256

Labelled = tuple[Any, str, str]  #: (record order, state, teacher's label)


def identity(decision: str | None, text: str | None) -> str | None:
    """What makes two labels one: the decision's identity, else its state's text."""
    if decision is not None:
        return f"decision:{decision}"
    return None if text is None else f"state:{text}"


def same_text(text: str) -> str:
    """A state's text as a version that learned from it sees it: Unicode NFKC, case
    folded, whitespace runs as one space and none at the ends. Two states with the same
    ``same_text`` are one training state: a version fitted on one is never tested on the
    other, whatever their decision identities (a new LangGraph thread gives the same
    text a new one)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def priority(ident: str) -> int:
    """A label's place in its option's sample: smallest first (a 64-bit hash)."""
    from agentbranch.policy.earned._state import digest

    return digest(f"sample:{ident}")


@dataclass
class _Pending:
    order: Any
    ids: tuple[int, ...]  #: digests: the identity's, then the state's (when any)
    text: str
    label: str
    prio: int


@dataclass
class QuestionLabels:
    """The counted labels of one question.

    * **Identity.** A label is its decision's (``Evidence.decision``: a retried node, a
      redelivered message, a re-run of the same decision all carry the same one) or, for a
      record without one, its labelled state's text. A label whose identity was counted is
      not counted again, whichever version's evidence key it is stored under.
    * **Rank.** Labels are counted in replay order (record order) once settled; a label's
      rank says which versions learned from it: version ``j`` is fitted on ranks below
      ``refit_at(j)``, so a label of rank ``r`` is among the training labels of every
      version ``j`` with ``refit_at(j) > r``, and never evidence for them (``learned_by``).
      Nor is any other label of the same text (``same_text``: case, whitespace and Unicode
      forms aside), whatever its identity: ``learned_text_by`` says which versions learned
      that text. Per segment of ranks between two refit points 8-byte digests of the
      identity and of the state's ``same_text`` are kept (``_digests.DigestSet``): 16 bytes
      a label, the price of counting each label once over any span of time, like the
      evidence windows' digests.
    * **What a fit reads.** Version ``j`` reads, per option, the ``per_option`` labels of
      its first ``refit_at(j)`` with the smallest priority (a hash of the identity): a
      uniform sample without replacement of each option's labels, the same on every replica
      and after a restart, kept as the labels arrive (``per_option`` texts per option, never
      more). ``FIT_PER_OPTION`` was chosen by measurement (``benchmarks/learning_bound.py``).
    """

    first: int = field(default_factory=lambda: _ladder.FIRST_REFIT)
    per_option: int = FIT_PER_OPTION
    count: int = 0  #: labels counted (distinct identities, in rank order)
    #: per segment of ranks [refit_at(i), refit_at(i+1)) (``refit_at(0)`` = 0): digests
    _segments: list[Any] = field(default_factory=list)
    #: labels not counted yet (not settled), in record order, and their digests
    _pending: list[_Pending] = field(default_factory=list)
    _pending_ids: set[int] = field(default_factory=set)
    #: per option: (priority, order, text) of the sample, smallest priority first
    _sample: dict[str, list[tuple[int, Any, str]]] = field(default_factory=dict)
    #: version -> the labelled states it is fitted on (its sample, in record order)
    due: dict[int, list[Labelled]] = field(default_factory=dict)

    def _bound(self, i: int) -> int:
        return 0 if i == 0 else refit_at(i, self.first)

    @staticmethod
    def _ids(decision: str | None, text: str | None) -> tuple[int, ...]:
        from agentbranch.policy.earned._state import digest

        ident = identity(decision, text)
        ids = () if ident is None else (digest(ident),)
        if text is not None:
            ids += (digest(f"text:{same_text(text)}"),)
        return ids

    def _segment_of(self, d: int) -> int | None:
        for i, seg in enumerate(self._segments):
            if d in seg:
                return i
        return None

    def learned_by(self, decision: str | None, text: str | None) -> int | None:
        """The first version whose fit includes the label of this identity (every
        later one's does too); ``None``: no version learned from it (a label not
        counted yet, or counted after the newest refit point)."""
        ids = self._ids(decision, text)
        if not ids:
            return None
        i = self._segment_of(ids[0])
        return None if i is None else i + 1

    def learned_text_by(self, text: str | None) -> int | None:
        """The first version whose fit includes a label of a state with the same text
        (``same_text``) as ``text``, whatever its identity (every later one's does too);
        ``None``: no version learned from such a state."""
        if text is None:
            return None
        from agentbranch.policy.earned._state import digest

        i = self._segment_of(digest(f"text:{same_text(text)}"))
        return None if i is None else i + 1

    def known(self, decision: str | None, text: str | None) -> bool:
        """Whether a label of this identity was already counted (or is about to be)."""
        ids = self._ids(decision, text)
        if not ids:
            return False
        d = ids[0]
        return d in self._pending_ids or self._segment_of(d) is not None

    def add(self, order: Any, decision: str | None, text: str, label: str) -> bool:
        """A labelled state of record order ``order``; ``False`` when its identity was
        counted already (it is not counted again). Counted by ``fold``."""
        if self.known(decision, text):
            return False
        ident = identity(decision, text) or ""  # (never empty: text is a str)
        item = _Pending(order, self._ids(decision, text), text, label, priority(ident))
        orders = [p.order for p in self._pending]
        self._pending.insert(bisect.bisect(orders, order), item)
        self._pending_ids.add(item.ids[0])
        return True

    def ready(self, settled: Any = None) -> int:
        """Pending labels ``fold`` would count now."""
        if settled is None:
            return len(self._pending)
        n = 0
        while n < len(self._pending) and settled(self._pending[n].order):
            n += 1
        return n

    def next_refit(self) -> int:
        """The label count at which the next version is due."""
        i = max(len(self._segments), 1)
        return self._bound(i) if self.count < self._bound(i) else self._bound(i + 1)

    def fold(self, settled: Any = None) -> bool:
        """Count the pending labels in record order, up to the first not ``settled``
        (``settled(order)``; default: all); whether any was counted."""
        from agentbranch.policy.earned._state import DigestSet

        folded = False
        while self._pending and (settled is None or settled(self._pending[0].order)):
            item = self._pending.pop(0)
            self._pending_ids.discard(item.ids[0])
            seg = len(self._segments) - 1
            if seg < 0 or self.count >= self._bound(seg + 1):
                self._segments.append(DigestSet())
                seg += 1
            for d in item.ids:
                self._segments[seg].add(d)
            sample = self._sample.setdefault(item.label, [])
            if len(sample) < self.per_option or item.prio < sample[-1][0]:
                bisect.insort(sample, (item.prio, item.order, item.text))
                del sample[self.per_option :]
            self.count += 1
            folded = True
            if self.count == self._bound(seg + 1):  # a refit point: version seg + 1 is due
                self.due[seg + 1] = self.sample()
        return folded

    def sample(self) -> list[Labelled]:
        """What a fit would read now: per option its sample, in record order."""
        rows = [(o, t, y) for y, kept in self._sample.items() for _, o, t in kept]
        return sorted(rows, key=lambda s: s[0])

    @property
    def sampled(self) -> int:
        """Labelled states held for fits (at most ``per_option`` per option)."""
        return sum(len(rows) for rows in self._sample.values())

    @property
    def nbytes(self) -> int:
        """Memory held by the digests (what grows with the labels: 16 bytes each)."""
        return sum(seg.nbytes for seg in self._segments)
