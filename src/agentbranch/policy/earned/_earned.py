"""``Earned``: a take threshold learned per question from the teacher's labels.

    policy = Policy(
        take_at=Earned(precision=0.9, level=0.95, store="evidence.jsonl"),
        fallbacks=[Generate(chat_model)],
        audit=Audit(rate=0.05),
    )

Per question the policy is ``"learning"`` (nothing taken), ``"earned"`` (taken at or
above ``take_at``), ``"withdrawn"`` (drift closed the band) or ``"fixed"``; every
teacher label (fallback, review, audit) is an ``Evidence`` record, and the thresholds
are a deterministic function of the ordered evidence. What a user relies on (states,
read-back, bad input, ``freeze()``, replays) is in docs/earned.md.

``observe_record`` turns a labelled decision (its banded first read and the teacher's
label) into one ``Evidence`` record: the resolver hands over every label a resolution
obtained, the audit worker every audited take's. ``AuditHealth`` counts, per question, reader and model, each due audit as arrived or
missing and suspends the band while more than half of the last ``health_window`` due
audits are missing (the rule and why: its docstring).

Over 500 lines: one object, read as one: its settings and their checks, the decision
path, the trust seam the policy calls (``agentbranch.policy.trust``: each method a few
lines that hand over to the module doing the work), the store catch-up, the evidence
a labelled decision contributes and the audits it waits for.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import Question
from agentbranch.policy.config import DecisionRecord
from agentbranch.policy.earned._any_store import as_store
from agentbranch.policy.earned._evidence import Evidence, QuestionKey, Source, new_evidence
from agentbranch.policy.earned._label_loss import LabelLostError, append_counted
from agentbranch.policy.earned._state import Ledger, TrustState, fresh_state, replay, step
from agentbranch.policy.earned._statistics import (
    MAX_CANDIDATES,
    Looks,
    grid,
    grid_size,
    takes_to_withdraw,
)
from agentbranch.policy.earned._stores import EvidenceStore
from agentbranch.policy.records import is_replayed
from agentbranch.policy.trust import Asked, Threshold, Trust, TrustSource

log = logging.getLogger("agentbranch")


#: The threshold of a band suspended for missing audits: nothing is taken.
_SUSPENDED = Threshold(None, "learning")


def _check_unit(name: str, value: Any, *, open_: bool) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = 0.0 < value < 1.0 if open_ else 0.0 <= value <= 1.0
    if not ok:
        span = "strictly between 0 and 1" if open_ else "in [0, 1]"
        raise ConfigurationError(f"Earned({name}=...) must be a number {span}, got {value!r}")
    return float(value)


@dataclass(eq=False)
class Earned(TrustSource):
    """A take threshold earned per question from evidence (docs/earned.md); the trust
    source (``agentbranch.policy.trust.TrustSource``) the policy asks.

    Args:
        precision: the take band's precision against the teacher to be shown, in (0, 1).
        level: confidence of the guarantee, in (0, 1): with probability ≥ ``level`` no
            threshold in force has a take band below ``precision`` (exchangeable traffic
            between withdrawals; the teacher as the reference).
        store: where evidence is kept: a JSON Lines path (one process), a LangGraph
            ``BaseStore`` (shared by processes and replicas), an ``EvidenceStore``
            subclass (docs/stores.md), or ``None`` (in memory).
        min_evidence: labels before the first look; later looks at 2x, 4x ... as many.
        max_take_at / min_take_at: the highest and lowest thresholds ever used.
        start_at: begin at this hand-chosen threshold (``trust="fixed"``) instead of
            learning with nothing taken; evidence may lower it, drift withdraws it.
        step: spacing of candidate thresholds.
        refresh_s: re-read the store (other processes' evidence) at most this often;
            this process's own evidence counts at once.
        frozen: never write evidence; thresholds stay what the store gives (``freeze()``).
        learn: learn from the teacher (``agentbranch.policy.earned.learn``): each label also
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
            if self.start_at > self.max_take_at:
                raise ConfigurationError(
                    f"Earned(start_at={self.start_at}) is above max_take_at={self.max_take_at}, "
                    "the highest threshold ever used; lower start_at or raise max_take_at"
                )
        if (
            not isinstance(self.min_evidence, int)
            or isinstance(self.min_evidence, bool)
            or (self.min_evidence < 1)
        ):
            raise ConfigurationError(
                f"Earned(min_evidence=...) must be a whole number >= 1, got {self.min_evidence!r}"
            )
        step = self.step
        if (
            not isinstance(step, int | float)
            or isinstance(step, bool)
            or not math.isfinite(step)
            or not 0 < step <= 0.5
        ):
            raise ConfigurationError(f"Earned(step=...) must be in (0, 0.5], got {step!r}")
        if grid_size(self.max_take_at, self.min_take_at, step) > MAX_CANDIDATES:
            span = self.max_take_at - self.min_take_at
            raise ConfigurationError(
                f"Earned(step={step!r}) makes more than {MAX_CANDIDATES} candidate thresholds "
                f"between min_take_at={self.min_take_at} and max_take_at={self.max_take_at}; "
                f"every look tests them all. Use step >= {span / (MAX_CANDIDATES - 1):.3g} "
                "(0.01, the default, is finer than confidences are meaningful)"
            )
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
        #: predict is easiest to show (``predicted_entry_cells``). ``None``: never.
        self.second_walk_from: int | None = 2
        #: Whether each question's due audits arrive; a band whose audits stopped
        #: arriving is suspended (``AuditHealth``).
        self.audit_health = AuditHealth(self.precision, self.level)
        self._lock = threading.RLock()
        #: Serializes reading the store and feeding states (never held while deciding).
        self._feed_lock = threading.Lock()
        self._ledger = Ledger(self)
        self._read_at: float | None = None  # monotonic time of the last read of the store
        self._used: dict[str, str] = {}  # evidence keys this process asked for -> question id
        self._saved_at = 0  # store offset of the last checkpoint written
        #: Whether this Earned keeps a checkpoint beside its store (the copies that test
        #: learned versions, ``learn.ladder``, read the same store and keep none).
        self._checkpoints = True
        # -- learning hook (agentbranch.policy.earned.learn): versions of the read per question --
        if self.redact is not None and not callable(self.redact):
            raise ConfigurationError(
                f"Earned(redact=...) must be a function str -> str, got {self.redact!r}"
            )
        self.learner: Any = None
        #: What every record of a copy testing a learned version carries (``Evidence``),
        #: set by ``learn.ladder.version_earned`` and the learner: ``version``, ``written``
        #: and the ``entries`` of its anytime-valid test; empty: none.
        self.learn_fields: dict[str, Any] = {}
        #: (entries, error) of that test (``version_earned``; ``_state.step`` runs it)
        self.anytime: tuple[tuple[float, ...], float] | None = None
        #: The level of the drift test when it is not ``level`` (``drift_alpha``; set by
        #: ``version_earned``, and carried in the records' ``earned`` settings)
        self.drift_level: float | None = None
        if self.learn:
            from agentbranch.policy.earned.learn.loop import Learner

            self.learner = Learner(self, redact=self.redact)

    @property
    def settings(self) -> dict[str, Any]:
        """The settings each evidence record carries (``Evidence.earned``): a report
        reads the policy's own target from them and recomputes its thresholds."""
        return {
            "precision": self.precision,
            "level": self.level,
            "min_evidence": self.min_evidence,
            "max_take_at": self.max_take_at,
            "min_take_at": self.min_take_at,
            "start_at": self.start_at,
            "step": self.step,
            **({} if self.drift_level is None else {"drift_level": self.drift_level}),
        }

    @property
    def alpha(self) -> float:
        return 1.0 - self.level

    @property
    def drift_alpha(self) -> float:
        """The drift test's error: ``1 - level`` of the policy. A copy testing a learned
        version at its share of the error (``learn.ladder.version_earned``) keeps its
        policy's here: withdrawing is protective (a looser test only withdraws sooner),
        so every version in force is withdrawn within the bound the policy's level gives
        (docs/earned_method.md, "Drift")."""
        return self.alpha if self.drift_level is None else 1.0 - self.drift_level

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

    def key(self, key: QuestionKey) -> str:
        """The evidence key of ``key``."""
        return key.evidence_key

    def threshold(self, key: QuestionKey) -> Threshold:
        """The threshold in force for this question, reader, model and reading settings:
        what the evidence gives, closed (trust ``"learning"``) while the band's due audits
        are missing (``audit_health``)."""
        found = self.state(key).threshold
        if found.take_at is not None and self.audit_health.suspended(
            key.question_id, key.reader, key.model
        ):
            return _SUSPENDED
        return found

    def state(self, key: QuestionKey) -> TrustState:
        """This question's trust (a live object: copy what you keep).

        The decision path: a dictionary lookup, plus a read of what the store gained
        since the last one every ``refresh_s`` (skipped, not waited for, while another
        thread is reading it); only the first call of the process waits for the store."""
        if self.learner is not None:  # learning hook: the version's own trust
            return self.learner.state(key)
        evidence_key = key.evidence_key
        self._used.setdefault(evidence_key, key.question_id)
        if self._read_at is None:
            with self._feed_lock:
                if self._read_at is None:
                    self._catch_up(announce=False)
        elif not self.frozen and time.monotonic() - self._read_at >= self.refresh_s:
            if self._feed_lock.acquire(blocking=False):
                try:
                    self._catch_up()
                finally:
                    self._feed_lock.release()
        w = self._ledger.windows.get(evidence_key)
        if w is None:
            with self._feed_lock:
                w = self._ledger.window(evidence_key)
        return w.live

    def states(self) -> dict[str, TrustState]:
        """Every evidence key this process has seen, with its trust."""
        windows = self._ledger.windows
        return {k: windows[k].live for k in list(self._used) if k in windows}

    def stored(self) -> dict[str, TrustState]:
        """Every question the store holds evidence of (any process's), by evidence key:
        for reports (the question id is ``state.question_id``; ``state.events`` the
        history). Reads what the store gained, then the states kept up to date."""
        with self._feed_lock:
            self._catch_up(announce=self._read_at is not None)
            windows = dict(self._ledger.windows)
        states = {k: w.live for k, w in sorted(windows.items()) if w.live.records}
        if self.learn:  # learning hook: each version's key at its own share of the error
            from agentbranch.policy.earned.learn.stored import at_shares

            states = at_shares(self, states)
        return states

    def refresh(self) -> None:
        """Read what the store gained since the last read (other processes' evidence)."""
        with self._feed_lock:
            self._catch_up(announce=self._read_at is not None)

    def observe(
        self,
        key: QuestionKey,
        teacher_label: str,
        *,
        source: Source,
        band: str,
        confidence: float,
        options: Sequence[str],
        engine_label: str,
        rate: float,
        take_at: float | None,
        trust: Trust,
        decision: str | None = None,
        state: str | None = None,
        version: int | None = None,
        probability: float | None = None,
        audit_rate: float | None = None,
        floor: float | None = None,
        bet_alpha: float | None = None,
        shadow: bool = False,
    ) -> Evidence | None:
        """Record the teacher's label ``teacher_label`` of one decision of ``key`` (no-op
        when frozen). Bad evidence (a label outside the options, a non-finite confidence)
        is dropped with a WARNING, never used. ``decision``: its identity
        (``agentbranch.policy.records.decision_identity``; labels of one decision count
        once).
        With ``learn=True``: ``state`` is the labelled state's text, ``version`` the
        version of the read that decided and ``probability`` the probability it gave its
        label, ``audit_rate`` the policy's (0: none), ``floor``: ``Evidence.floor``,
        ``bet_alpha``: ``Evidence.bet_alpha``. ``shadow``: a trial version's read of a
        decision another version's record already labelled: stored as that version's
        evidence, not counted again as a teacher label (``agentbranch.labels.stored``
        counts each label once)."""
        if self.frozen:
            return None
        fields = {
            "source": source,
            "band": band,
            "confidence": confidence,
            "options": options,
            "engine_label": engine_label,
            "rate": rate,
            "take_at": take_at,
            "trust": trust,
            "decision": decision,
        }
        if self.learner is not None:  # learning hook: the version that decided learns
            extra = {"state": state, "version": version, "probability": probability}
            return self.learner.observe(key, teacher_label, audit_rate=audit_rate, **extra | fields)
        question_id = key.question_id
        try:
            rec = new_evidence(
                key=key.evidence_key,
                question_id=question_id,
                reader=key.reader,
                model=key.model,
                **{**fields, "options": list(options)},
                teacher_label=teacher_label,
                earned=self.settings,
                state=state,  # (learning hook: None is absent, ``Evidence.to_json``)
                probability=probability,
                floor=floor,
                bet_alpha=bet_alpha,
                **self.learn_fields,
            )
        except Exception as e:  # noqa: BLE001 - pydantic ValidationError and friends
            log.warning(
                "agentbranch.earned: evidence for %r ignored (%s): %s",
                question_id,
                type(e).__name__,
                str(e).splitlines()[0] if str(e) else "",
            )
            return None
        with self._feed_lock:
            self._append(rec, label=not shadow)
            self._ledger.feed([rec])
        return rec

    # -- the trust seam (agentbranch.policy.trust): what the resolver and audits call -----

    @property
    def asks_versions(self) -> bool:
        return self.learner is not None

    def in_force(
        self,
        question_id: str,
        question: Any,
        reader: str | None,
        model: str | None,
        reading: str | None = None,
    ) -> Threshold:
        return self.threshold(QuestionKey(question_id, question, reader, model, reading))

    def asked(self, engine: Any, questions: Mapping[str, Any], text: str) -> dict[str, Asked]:
        from agentbranch.policy.earned.learn.hooks import asked_questions

        asked, versions, reads, maps = asked_questions(engine, questions, self.learner, text)
        return {q: Asked(asked[q], reads[q], j, maps.get(q)) for q, j in versions.items()}

    def mark(self, record: dict[str, Any], asked: Asked) -> None:
        from agentbranch.policy.earned.learn.hooks import mark_version

        mark_version(record, asked.version, asked.probability_map)

    def observe_label(
        self,
        question_id: str,
        question: Any,
        banded: dict[str, Any],
        *,
        source: str,
        teacher_label: str,
        rate: float,
        decision: str | None = None,
        state: Any = None,
        audit_rate: float | None = None,
    ) -> None:
        observe_record(
            self,
            question_id,
            question,
            banded,
            source=source,
            teacher_label=teacher_label,
            rate=rate,
            decision=decision,
            state=state,
            audit_rate=audit_rate,
        )

    def suspended_take_at(
        self, question_id: str, question: Any, reader: str | None, model: str | None
    ) -> float | None:
        if not self.audit_health.suspended(question_id, reader, model):
            return None
        return self.state(QuestionKey(question_id, question, reader, model, None)).take_at

    def audit_arrived(self, question_id: str, reader: str | None, model: str | None) -> None:
        self.audit_health.arrived(question_id, reader, model)

    def audit_missing(
        self, question_id: str, reader: str | None, model: str | None, why: str = ""
    ) -> None:
        self.audit_health.missing(question_id, reader, model, why)

    # -- internals ------------------------------------------------------------------------

    def _append(self, rec: Evidence, label: bool = True) -> None:
        append_counted(self.evidence, rec, label)  # a label the store cannot take is counted
        self._check_lost()

    def _catch_up(self, *, announce: bool = True) -> None:
        """Feed what the store gained since the last read (the caller holds the feed
        lock)."""
        from agentbranch.policy.earned import _checkpoint as checkpoint

        if self._read_at is None and self._checkpoints and checkpoint.restore(self, self._ledger):
            self._saved_at = self.evidence.offset
        store = self.evidence
        while True:
            records = store.read_new()  # (a bounded batch: read until none is new)
            lost = self._check_lost()
            self._ledger.feed(records, announce=announce and not lost)
            if lost:
                self._saved_at = 0
            if (
                self._checkpoints
                and not self.frozen
                and store.offset - self._saved_at >= checkpoint.CHECKPOINT_BYTES
            ):
                checkpoint.save(self, self._ledger)
                self._saved_at = store.offset
            if not records:
                break
        self._read_at = time.monotonic()

    def _check_lost(self) -> bool:
        """The store was moved, deleted or replaced while serving: every question learns
        again from nothing (nothing is taken), an ERROR says so, a new store is started."""
        why = self.evidence.pop_lost()
        if why is None:
            return False
        log.error(
            "agentbranch.earned: %s; every question is learning again (nothing is taken "
            "until trust is earned anew) and new evidence goes to a new store at the same "
            "place",
            why,
        )
        self._ledger.reset()
        return True

    def _fresh(self) -> TrustState:
        return fresh_state(self)


def observe_record(
    earned: Earned,
    question_id: str,
    question: Question,
    banded: DecisionRecord,
    *,
    source: str,
    teacher_label: str,
    rate: float,
    decision: str | None = None,
    state: Any = None,
    audit_rate: float | None = None,
) -> None:
    """One evidence record for the banded decision ``banded`` (its first read), keyed
    with its reading fingerprint (``banded["reading"]``) and carrying its identity
    (``decision``, default ``banded["decision_id"]``: labels of one decision count
    once). A store that is not an evidence store raises; any other write failure is
    logged. ``state``: the state read, kept with the label when the policy learns
    (``learn=True``), and ``audit_rate`` the share of taken decisions the policy audits
    (what the learner's anytime-valid test needs to weigh the label, ``Evidence.floor``)."""
    if banded.get("confidence") is None or banded.get("engine_label") is None:
        return
    if is_replayed(banded):
        return  # a replayed decision is no live traffic
    band = banded["band"] if banded["band"] in ("take", "fallback", "review") else "fallback"
    learning = {}  # learning hook (agentbranch.policy.earned.learn): the state and the version
    if earned.learner is not None:
        from agentbranch.policy.generation import state_text

        text = state if isinstance(state, str) or state is None else state_text(state)
        read = (banded.get("probabilities") or {}).get(banded["engine_label"])
        learning = {
            "state": text,
            "version": banded.get("reader_version"),
            "probability": read,
            "audit_rate": audit_rate,
        }
    try:
        earned.observe(
            QuestionKey(
                question_id,
                question,
                banded.get("reader"),
                banded.get("model"),
                banded.get("reading"),
            ),
            teacher_label,
            source=source,
            band=band,
            confidence=banded["confidence"],
            options=banded["options"],
            engine_label=banded["engine_label"],
            rate=rate,
            take_at=banded.get("take_at"),
            trust=banded.get("trust") or "learning",
            decision=decision if decision is not None else banded.get("decision_id"),
            **learning,
        )
    except ConfigurationError:
        raise
    except LabelLostError:
        pass  # counted, and logged once per burst (agentbranch.policy.earned._label_loss)
    except Exception as e:  # noqa: BLE001 - a lost label never fails the decision
        log.warning(
            "agentbranch.earned: evidence for %r not stored: %s: %s",
            question_id,
            type(e).__name__,
            e,
        )


#: The fall below the target precision whose withdrawal sets the window.
REFERENCE_DROP = 0.2
#: The smallest window (a very low target or level gives a tiny one).
MIN_WINDOW = 8
#: The largest window (bounds memory per question).
MAX_WINDOW = 10_000

Who = tuple[str, str | None, str | None]  # question id, reader, model


def health_window(precision: float, level: float) -> int:
    """Due audits the health is judged on (see ``AuditHealth``)."""
    fallen_to = max(precision - REFERENCE_DROP, precision / 2)
    return min(MAX_WINDOW, max(MIN_WINDOW, takes_to_withdraw(precision, fallen_to, level)))


@dataclass(frozen=True)
class HealthStatus:
    """One question's audit health (a snapshot): of the last ``window`` due audits,
    ``seen`` counted so far and ``missing`` of them; ``suspended`` whether its band is
    closed for it; ``arrived_total`` / ``missing_total`` over the process's life."""

    window: int
    seen: int
    missing: int
    suspended: bool
    arrived_total: int
    missing_total: int


class _Ring:
    __slots__ = ("outcomes", "missing", "suspended", "arrived_total", "missing_total")

    def __init__(self, window: int) -> None:
        self.outcomes: deque[bool] = deque(maxlen=window)  # True: missing
        self.missing = 0
        self.suspended = False
        self.arrived_total = 0
        self.missing_total = 0


class AuditHealth:
    """Per question (id, reader, model): whether its due audits arrive.

    An ``Earned`` band is watched by its audits: the drift test withdraws it after about
    ``takes_to_withdraw(precision, fallen_to, level)`` audited takes. A teacher that hangs
    or fails, or an audit queue that overflows, silently stretches that: with a share
    ``m`` of the due audits missing, drift is seen only after ``1/(1 - m)`` times as many
    taken decisions. So every audit that was due (sampled) is counted per question, reader
    and model as *arrived* (the teacher's answer was used) or *missing* (dropped on a full
    queue, timed out, raised, or answered outside the options), and the band is
    **suspended** — nothing taken, every decision to the fallbacks, trust ``"learning"`` —
    while the last ``window`` due audits hold more than half missing:

    * ``window`` is ``takes_to_withdraw(precision, fallen_to, level)`` for a fall of
      ``REFERENCE_DROP`` (0.2) below the target (``fallen_to`` at least half the target),
      at least ``MIN_WINDOW``: at 0.9 and level 0.95, 25 due audits (a fall to 0.7).
    * More than half of them missing means drift would be seen after more than twice the
      audited takes the drift test promises (the same factor of two within which the
      simulations withdraw in 95 % of streams): the band is suspended once more than
      ``window / 2`` of the last ``window`` due audits went missing (at 0.9/0.95: after
      13 missing audits, fewer than the 25 a working teacher needs to see a fall to 0.7).
    * It is open again once no more than a quarter of the last ``window`` are missing
      (hysteresis: a teacher failing about half the time does not flap). While suspended,
      nothing is taken, so the decisions the band would take are still sent to the
      teacher at the audit rate as *probes*: their answers only count here, and are
      neither evidence nor audit records (those decisions are labelled by the fallback).

    Each outcome and each check is O(1) (a ring of the last ``window`` outcomes and a count
    of the missing ones); ``Earned.threshold`` asks ``suspended`` for every decision. The
    health is this process's: it knows which of its own audits went missing (replicas
    sharing a store each watch their own). Suspending is logged (WARNING, once per
    suspension) and so is reopening (INFO).
    """

    def __init__(self, precision: float, level: float) -> None:
        self.precision = precision
        self.level = level
        self._window: int | None = None
        self._rings: dict[Who, _Ring] = {}
        self._suspended: set[Who] = set()
        self._lock = threading.Lock()

    @property
    def window(self) -> int:
        if self._window is None:
            self._window = health_window(self.precision, self.level)
        return self._window

    def suspended(self, question_id: str, reader: str | None, model: str | None) -> bool:
        """Whether this question's band is suspended (O(1); the decision path asks)."""
        return bool(self._suspended) and (question_id, reader, model) in self._suspended

    def arrived(self, question_id: str, reader: str | None, model: str | None) -> None:
        """A due audit's answer came and was used."""
        self._record((question_id, reader, model), False, "")

    def missing(
        self, question_id: str, reader: str | None, model: str | None, why: str = ""
    ) -> None:
        """A due audit never came (``why``: dropped, timed out, failed)."""
        self._record((question_id, reader, model), True, why)

    def status(self, question_id: str, reader: str | None, model: str | None) -> HealthStatus:
        """A snapshot of this question's audit health."""
        with self._lock:
            ring = self._rings.get((question_id, reader, model))
            if ring is None:
                return HealthStatus(self.window, 0, 0, False, 0, 0)
            return HealthStatus(
                self.window,
                len(ring.outcomes),
                ring.missing,
                ring.suspended,
                ring.arrived_total,
                ring.missing_total,
            )

    def _record(self, who: Who, missing: bool, why: str) -> None:
        window = self.window
        with self._lock:
            ring = self._rings.get(who)
            if ring is None:
                ring = self._rings[who] = _Ring(window)
            if len(ring.outcomes) == window:
                ring.missing -= ring.outcomes[0]
            ring.outcomes.append(missing)
            ring.missing += missing
            if missing:
                ring.missing_total += 1
            else:
                ring.arrived_total += 1
            if not ring.suspended and 2 * ring.missing > window:
                ring.suspended = True
                self._suspended.add(who)
                changed = "suspended"
            elif ring.suspended and 4 * ring.missing <= window:
                ring.suspended = False
                self._suspended.discard(who)
                changed = "reopened"
            else:
                return
            seen, lost = len(ring.outcomes), ring.missing
        if changed == "suspended":
            log.warning(
                "agentbranch.earned: trust in question %r suspended: %d of the last %d due "
                "audits never came (%s), so drift could no longer be seen within the "
                "audited takes the drift test promises; nothing is taken (every decision "
                "goes to the fallbacks) until audits arrive again",
                who[0],
                lost,
                seen,
                why or "dropped or failed",
            )
        else:
            log.info(
                "agentbranch.earned: audits of question %r arrive again (%d of the last %d "
                "missing): the band it earned is open again",
                who[0],
                lost,
                seen,
            )


__all__ = [
    "Earned",
    "Threshold",
    "TrustState",
    "replay",
    "step",
    "AuditHealth",
    "HealthStatus",
    "MAX_WINDOW",
    "MIN_WINDOW",
    "REFERENCE_DROP",
    "Who",
    "health_window",
]
