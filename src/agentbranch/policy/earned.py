"""``Earned``: a take threshold learned per question from the teacher's labels.

    policy = Policy(
        take_at=Earned(precision=0.9, level=0.95, store="evidence.jsonl"),
        fallbacks=[Generate(chat_model)],
        audit=Audit(rate=0.05),
    )

How it behaves (the API other code builds on):

* Per question (keyed by ``evidence_key``: id, instructions, options, examples, reader,
  model) the policy is in one of three states, shown in every decision record as
  ``trust`` with the threshold in force as ``take_at`` (``None``: the band is closed):
  ``"learning"`` (nothing is taken; every decision goes to the fallbacks and the
  engine's label is still recorded as ``engine_label``), ``"earned"`` (decisions at or
  above ``take_at`` are taken) and ``"withdrawn"`` (drift closed the band; learning
  again). ``start_at=`` begins at a hand-chosen threshold with ``trust="fixed"``; a plain
  float ``take_at`` is ``"fixed"`` too.
* Evidence: every ``Generate`` answer in the fallback band, every human review answer,
  and the audit teacher's answers for the audited share of taken decisions (with no
  ``Generate``, the audit teacher also samples the fallback band at its rate). Each is
  one ``Evidence`` record appended to the store (``agentbranch.policy.evidence``).
  Without ``Audit`` no taken decision is ever checked, so drift cannot withdraw a band
  and the threshold can only be lowered by fallback labels: give ``audit=Audit(rate=...)``
  (the smaller the rate, the more decisions pass before drift is seen).
* Thresholds are a deterministic function of the ordered evidence (``replay``), so every
  process sharing a store converges on the same thresholds once it has read the same
  records (each re-reads the store every ``refresh_s``; its own evidence counts at once).
  The statistics, their guarantee and their assumptions: ``agentbranch.policy.thresholds``.
* Reading it back (reports, diagrams):

  - ``earned.state(question_id, question, reader, model)`` → ``TrustState``: ``take_at``,
    ``trust``, ``labels`` (this epoch), ``looks``, ``audit_right``/``audit_wrong`` (since
    the band opened), ``drift_evalue`` (of the drift test, ``thresholds.Drift``),
    ``records``, and ``events``: every ``Event`` (``kind`` ``"look"`` | ``"earned"`` | ``"lowered"`` | ``"withdrawn"``, ``index`` of the
    record that caused it, its ``time``, ``take_at`` after it, ``labels``, ``reason``);
  - ``earned.stored()`` → ``{evidence key: TrustState}`` for every question the store
    holds evidence of (any process's); ``earned.states()`` those this process has used;
  - ``earned.evidence`` is the store (``load(key)``, ``keys()``): the ``Evidence``
    records themselves (confidence, engine and teacher labels, band, rate, the threshold
    and trust in force), from which coverage and precision over time follow;
    ``replay(records, earned)`` recomputes a state from any records.
  - ``thresholds.takes_to_withdraw(precision, dropped_to, level, history=, before=)``:
    audited takes the drift test needs to withdraw a band (at 0.9 and level 0.95: 93
    when precision falls to 0.8, 25 to 0.7, 7 to 0.5; to 0.6 after 1,000 good audits
    at 0.95: 42).
* Bad input: ``precision``/``level`` not strictly between 0 and 1 (NaN, negative, 1),
  and the other options out of range, are ``ConfigurationError``; a store holding
  anything that is not evidence is an ``InvalidFileError`` naming file and line (never a
  reset); a teacher answering outside the options gives no evidence (the fallback fails
  over, the audit counts a failure); evidence that does not validate is dropped with a
  WARNING; a changed question has another key and starts learning again.
* ``earned.freeze()``: thresholds stay what the evidence gives now, nothing more is
  written (regulated deployments; a read-only store).
* Under a replay cassette the threshold in force is the recorded one
  (``agentbranch.policy.in_force``) and replayed decisions are no evidence.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.policy.evidence import Evidence, Source, Trust, evidence_key, new_evidence
from agentbranch.policy.evidence_store import EvidenceStore, as_store
from agentbranch.policy.looks import Looks
from agentbranch.policy.thresholds import grid
from agentbranch.policy.trust import Threshold, TrustState, replay, step

log = logging.getLogger("agentbranch")


def _check_unit(name: str, value: Any, *, open_: bool) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = 0.0 < value < 1.0 if open_ else 0.0 <= value <= 1.0
    if not ok:
        span = "strictly between 0 and 1" if open_ else "in [0, 1]"
        raise ConfigurationError(f"Earned({name}=...) must be a number {span}, got {value!r}")
    return float(value)


@dataclass(eq=False)
class Earned:
    """A take threshold earned per question from evidence (see the module docstring).

    Args:
        precision: the take band's precision against the teacher to be shown, in (0, 1).
        level: confidence of the guarantee, in (0, 1): with probability ≥ ``level`` no
            threshold in force has a take band below ``precision`` (exchangeable traffic
            between withdrawals; the teacher as the reference).
        store: where evidence is kept: a JSON Lines path (one process), a LangGraph
            ``BaseStore`` (shared by processes and replicas), or ``None`` (in memory).
        min_evidence: labels before the first look; later looks at 2x, 4x ... as many.
        max_take_at / min_take_at: the highest and lowest thresholds ever used.
        start_at: begin at this hand-chosen threshold (``trust="fixed"``) instead of
            learning with nothing taken; evidence may lower it, drift withdraws it.
        step: spacing of candidate thresholds.
        refresh_s: re-read the store (other processes' evidence) at most this often;
            this process's own evidence counts at once.
        frozen: never write evidence; thresholds stay what the store gives (``freeze()``).
        learn: learn from the teacher (``agentbranch.policy.learn``): each label also
            becomes an example of the question's read, which is then a new version with
            its own evidence and threshold, in force once it has earned one on labels
            gathered after its fit. Stores each labelled state's text with its evidence.
        redact: with ``learn``, what is applied to a labelled state's text before it is
            stored and learned from (e.g. masking e-mail addresses); ``None``: as is.
    """

    precision: float = 0.9
    level: float = 0.95
    store: Any = None
    min_evidence: int = 50
    max_take_at: float = 1.0
    min_take_at: float = 0.0
    start_at: float | None = None
    step: float = 0.01
    refresh_s: float = 10.0
    frozen: bool = False
    learn: bool = False
    redact: Any = None

    def __post_init__(self) -> None:
        self.precision = _check_unit("precision", self.precision, open_=True)
        self.level = _check_unit("level", self.level, open_=True)
        self.max_take_at = _check_unit("max_take_at", self.max_take_at, open_=False)
        self.min_take_at = _check_unit("min_take_at", self.min_take_at, open_=False)
        if self.min_take_at > self.max_take_at:
            raise ConfigurationError(
                f"Earned(min_take_at={self.min_take_at}) is above max_take_at={self.max_take_at}"
            )
        if self.start_at is not None:
            self.start_at = _check_unit("start_at", self.start_at, open_=False)
        if (
            not isinstance(self.min_evidence, int)
            or isinstance(self.min_evidence, bool)
            or (self.min_evidence < 1)
        ):
            raise ConfigurationError(
                f"Earned(min_evidence=...) must be a whole number >= 1, got {self.min_evidence!r}"
            )
        step = self.step
        if not isinstance(step, int | float) or not math.isfinite(step) or not 0 < step <= 0.5:
            raise ConfigurationError(f"Earned(step=...) must be in (0, 0.5], got {step!r}")
        refresh = self.refresh_s
        if not isinstance(refresh, int | float) or not refresh >= 0:
            raise ConfigurationError(f"Earned(refresh_s=...) must be >= 0, got {refresh!r}")
        self.evidence: EvidenceStore = as_store(self.store)
        self.candidates = grid(self.max_take_at, self.min_take_at, self.step)
        #: When thresholds are re-estimated and what each look spends (``looks.Looks``).
        self.looks = Looks.doubling(self.min_evidence)
        #: Whether a look resumes the walk below the threshold it earned (hierarchical
        #: group-sequential testing) instead of testing again from the top.
        self.resume = True
        #: From this look on (0-based), a look that has shown nothing yet runs two walks
        #: at half its error each: from the top, and from the band the confidences
        #: predict is easiest to show (``thresholds.predicted_entry``). ``None``: never.
        self.second_walk_from: int | None = 2
        self._lock = threading.RLock()
        self._states: dict[str, TrustState] = {}
        self._loaded_at: dict[str, float] = {}
        self._names: dict[str, str] = {}
        # -- learning hook (agentbranch.policy.learn): versions of the read per question --
        if self.redact is not None and not callable(self.redact):
            raise ConfigurationError(
                f"Earned(redact=...) must be a function str -> str, got {self.redact!r}"
            )
        self.learner: Any = None
        if self.learn:
            from agentbranch.policy.learn.loop import Learner

            self.learner = Learner(self, redact=self.redact)

    @property
    def alpha(self) -> float:
        return 1.0 - self.level

    def __repr__(self) -> str:
        return (
            f"Earned(precision={self.precision}, level={self.level}, "
            f"store={self.evidence!r}{', frozen' if self.frozen else ''})"
        )

    def __copy__(self) -> Earned:
        return self  # one body of evidence and one cache, however it is copied

    def __deepcopy__(self, memo: dict) -> Earned:
        return self

    # -- for the policy -----------------------------------------------------------------

    def freeze(self) -> Earned:
        """Stop learning: thresholds stay what the evidence gives (read now, once per
        question), and no evidence is written. Returns ``self``."""
        with self._lock:
            self.frozen = True
        return self

    def key(self, question_id: str, question: Any, reader: str | None, model: str | None) -> str:
        return evidence_key(question_id, question, reader, model)

    def threshold(
        self, question_id: str, question: Any, reader: str | None, model: str | None
    ) -> Threshold:
        """The threshold in force for this question, reader and model."""
        return self.state(question_id, question, reader, model).threshold

    def state(
        self, question_id: str, question: Any, reader: str | None, model: str | None
    ) -> TrustState:
        """This question's trust (a live object: copy what you keep)."""
        if self.learner is not None:  # learning hook: the version's own trust
            return self.learner.state(question_id, question, reader, model)
        key = self.key(question_id, question, reader, model)
        with self._lock:
            self._names.setdefault(key, question_id)
            st = self._states.get(key)
            due = st is None or (
                not self.frozen and time.monotonic() - self._loaded_at[key] >= self.refresh_s
            )
            if due:
                st = self._reload(key, question_id, st)
            return st

    def states(self) -> dict[str, TrustState]:
        """Every evidence key this process has seen, with its trust."""
        with self._lock:
            return dict(self._states)

    def stored(self) -> dict[str, TrustState]:
        """Every question the store holds evidence of (any process's), by evidence key,
        recomputed from the records: for reports (the question id is
        ``state.question_id``; ``state.events`` the history)."""
        out = {}
        for key in self.evidence.keys():
            records = self.evidence.load(key)
            if records:
                out[key] = replay(records, self)
        return out

    def refresh(self) -> None:
        """Re-read the store for every question seen (other processes' evidence)."""
        with self._lock:
            for key, st in list(self._states.items()):
                self._reload(key, self._names.get(key, key), st)

    def observe(
        self,
        question_id: str,
        question: Any,
        *,
        reader: str | None,
        model: str | None,
        source: Source,
        band: str,
        confidence: float,
        options: Sequence[str],
        engine_label: str,
        teacher_label: str,
        rate: float,
        take_at: float | None,
        trust: Trust,
        state: str | None = None,
        version: int | None = None,
    ) -> Evidence | None:
        """Record one teacher label (no-op when frozen). Bad evidence (a label outside
        the options, a non-finite confidence) is dropped with a WARNING, never used.
        With ``learn=True``: ``state`` is the labelled state's text and ``version`` the
        version of the read that decided (``agentbranch.policy.learn``)."""
        if self.frozen:
            return None
        if self.learner is not None:  # learning hook: the version that decided learns
            return self.learner.observe(
                question_id,
                question,
                state=state,
                version=version,
                reader=reader,
                model=model,
                source=source,
                band=band,
                confidence=confidence,
                options=options,
                engine_label=engine_label,
                teacher_label=teacher_label,
                rate=rate,
                take_at=take_at,
                trust=trust,
            )
        key = self.key(question_id, question, reader, model)
        try:
            rec = new_evidence(
                key=key,
                question_id=question_id,
                reader=reader,
                model=model,
                source=source,
                band=band,
                confidence=confidence,
                options=list(options),
                engine_label=engine_label,
                teacher_label=teacher_label,
                rate=rate,
                take_at=take_at,
                trust=trust,
                **({"state": state} if state is not None else {}),
            )
        except Exception as e:  # noqa: BLE001 - pydantic ValidationError and friends
            log.warning(
                "agentbranch.earned: evidence for %r ignored (%s): %s",
                question_id,
                type(e).__name__,
                str(e).splitlines()[0] if str(e) else "",
            )
            return None
        self.evidence.append([rec])
        with self._lock:
            self._names.setdefault(key, question_id)
            st = self._states.get(key)
            if st is None:
                self._reload(key, question_id, None)
            elif st.last is None or rec.order > st.last:
                self._feed(key, question_id, st, [rec])
            else:
                self._reload(key, question_id, st)
        return rec

    # -- internals ------------------------------------------------------------------------

    def _reload(self, key: str, question_id: str, old: TrustState | None) -> TrustState:
        records = self.evidence.load(key)
        st = old
        if st is not None and st.records <= len(records):
            seen = records[: st.records]
            # Fast path: nothing new arrived before what was replayed.
            if not seen or seen[-1].order == st.last:
                self._feed(key, question_id, st, records[st.records :])
            else:
                st = None
        else:
            st = None
        if st is None:
            st = self._fresh()
            # Replayed from the start (first read, or records arrived out of order): only
            # withdrawals this process has not announced yet are new.
            known = None if old is None else {(e.kind, e.time, e.reason) for e in old.events}
            self._feed(key, question_id, st, records, known=known)
        self._states[key] = st
        self._loaded_at[key] = time.monotonic()
        return st

    def _fresh(self) -> TrustState:
        if self.start_at is not None:
            return TrustState(take_at=self.start_at, trust="fixed")
        return TrustState(take_at=None, trust="learning")

    def _feed(
        self,
        key: str,
        question_id: str,
        st: TrustState,
        records: Sequence[Evidence],
        *,
        known: AbstractSet[tuple[str, str, str]] | None = frozenset(),
    ) -> None:
        """Replay ``records`` into ``st``; a withdrawal not in ``known`` is logged
        (``known=None``: this process's first read of the question, nothing announced)."""
        before = len(st.events)
        for rec in records:
            step(st, rec, self)
        if known is not None:
            for ev in st.events[before:]:
                if ev.kind == "withdrawn" and (ev.kind, ev.time, ev.reason) not in known:
                    log.warning(
                        "agentbranch.earned: trust in question %r withdrawn: %s",
                        question_id,
                        ev.reason,
                    )
        self._states[key] = st
