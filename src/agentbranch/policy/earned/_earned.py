"""``Earned``: a take threshold learned per question from the teacher's labels.

Every teacher label (fallback, review, audit) is an ``Evidence`` record and the
thresholds are a deterministic function of the ordered evidence (docs/earned.md).
``AuditHealth`` suspends a band whose due audits stop arriving. Over 500 lines: one
object with its settings, decision path, trust seam, store catch-up and audit health.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import Question
from agentbranch.policy.config import DecisionRecord
from agentbranch.policy.earned._any_store import as_store
from agentbranch.policy.earned._evidence import (
    EarnedSettings,
    Evidence,
    QuestionKey,
    Source,
    new_evidence,
)
from agentbranch.policy.earned._label_loss import LabelLostError, append_counted
from agentbranch.policy.earned._state import Ledger, TrustState, fresh_state
from agentbranch.policy.earned._statistics import (
    Looks,
    grid,
    takes_to_withdraw,
)
from agentbranch.policy.earned._stores import EvidenceStore
from agentbranch.policy.records import is_replayed
from agentbranch.policy.trust import Asked, TeacherLabel, Threshold, Trust, TrustSource

log = logging.getLogger("agentbranch")


def _number(name: str, value: Any, ok: Callable[[float], bool], want: str) -> float:
    """``value`` as a float: a real number (not a bool or NaN) that ``ok`` accepts."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not ok(value):
        raise ConfigurationError(f"Earned({name}=...) must be {want}, got {value!r}")
    return float(value)


@dataclass(eq=False)
class Earned(TrustSource):
    """A take threshold earned per question from evidence; the trust source
    (``agentbranch.policy.trust.TrustSource``) the policy asks. Every setting, in a
    table: docs/earned.md, "The knobs".

    Args:
        precision: the take band's precision against the teacher to be shown, in (0, 1).
        level: with probability ≥ ``level`` no threshold in force has a take band below
            ``precision`` (exchangeable traffic between withdrawals), in (0, 1).
        store: a JSON Lines path, a LangGraph ``BaseStore``, an ``EvidenceStore``
            (docs/stores.md) or ``None`` (in memory).
        min_evidence: labels before the first look; later looks at 2x, 4x ... as many.
        max_take_at / min_take_at: the highest and lowest thresholds ever used.
        start_at: begin at this threshold (``trust="fixed"``) instead of learning.
        step: spacing of candidate thresholds.
        refresh_s: re-read the store (other processes' evidence) at most this often.
        frozen: never write evidence (``freeze()``).
        learn: also learn a better read of the question from the labels
            (``agentbranch.policy.earned.learn``); stores each labelled state's text.
        redact: with ``learn``, applied to a labelled state's text before it is stored.
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
        between, within = "a number strictly between 0 and 1", "a number in [0, 1]"

        def unit(name: str, open_: bool) -> float:
            ok = (lambda v: 0 < v < 1) if open_ else (lambda v: 0 <= v <= 1)
            return _number(name, getattr(self, name), ok, between if open_ else within)

        self.precision, self.level = unit("precision", True), unit("level", True)
        self.max_take_at, self.min_take_at = unit("max_take_at", False), unit("min_take_at", False)
        if self.min_take_at > self.max_take_at:
            raise ConfigurationError(
                f"Earned(min_take_at={self.min_take_at}) is above max_take_at={self.max_take_at}"
            )
        if self.start_at is not None:
            self.start_at = unit("start_at", False)
            if self.start_at > self.max_take_at:
                raise ConfigurationError(
                    f"Earned(start_at={self.start_at}) is above max_take_at={self.max_take_at}, "
                    "the highest threshold ever used; lower start_at or raise max_take_at"
                )
        whole = "a whole number >= 1"
        _number("min_evidence", self.min_evidence, lambda v: isinstance(v, int) and v >= 1, whole)
        _number("step", self.step, lambda v: 0 < v <= 0.5, "in (0, 0.5]")
        _number("refresh_s", self.refresh_s, lambda v: v >= 0, ">= 0")
        self.evidence: EvidenceStore = as_store(self.store)
        self.candidates = grid(self.max_take_at, self.min_take_at, self.step)
        #: When thresholds are re-estimated and what each look spends (``looks.Looks``).
        self.looks = Looks(self.min_evidence)
        #: From this look on, one that has shown nothing also walks from the predicted entry.
        self.second_walk_from: int | None = 2
        self.audit_health = AuditHealth(self.precision, self.level)
        #: Serializes reading the store and feeding states (never held while deciding).
        self._feed_lock = threading.Lock()
        self._ledger = Ledger(self)
        self._read_at: float | None = None  # monotonic time of the last read of the store
        self._used: dict[str, str] = {}  # evidence keys this process asked for -> question id
        self._saved_at = 0  # store offset of the last checkpoint written
        self._checkpoints = True  # (copies testing learned versions keep none)
        # -- learning hook (agentbranch.policy.earned.learn): versions of the read per question --
        if self.redact is not None and not callable(self.redact):
            raise ConfigurationError(
                f"Earned(redact=...) must be a function str -> str, got {self.redact!r}"
            )
        self.learner: Any = None
        #: Set on a copy testing a learned version (``learn.ladder.version_earned``): its
        #: records' fields, its anytime-valid test and its drift test's level.
        self.learn_fields: dict[str, Any] = {}
        self.anytime: tuple[tuple[float, ...], float] | None = None
        self.drift_level: float | None = None
        if self.learn:
            from agentbranch.policy.earned.learn.loop import Learner

            self.learner = Learner(self)

    @property
    def settings(self) -> dict[str, Any]:
        """The settings each evidence record carries (``Evidence.earned``): a report
        reads the policy's own target from them and recomputes its thresholds."""
        out = {name: getattr(self, name) for name in EarnedSettings.model_fields}
        if self.drift_level is None:
            del out["drift_level"]  # absent unless it differs from level
        return out

    @property
    def alpha(self) -> float:
        return 1.0 - self.level

    @property
    def drift_alpha(self) -> float:
        """The drift test's error: the policy's ``1 - level``, also in a copy testing a
        learned version at its share (withdrawing sooner is safe)."""
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
        self.frozen = True
        return self

    def key(self, key: QuestionKey) -> str:
        """The evidence key of ``key``."""
        return key.evidence_key

    def threshold(self, key: QuestionKey) -> Threshold:
        """The threshold in force for ``key``: what the evidence gives, closed (trust
        ``"learning"``) while the band's due audits are missing (``audit_health``)."""
        found = self.state(key).threshold
        if found.take_at is not None and self.audit_health.suspended(
            key.question_id, key.reader, key.model
        ):
            return Threshold(None, "learning")  # suspended for missing audits
        return found

    def state(self, key: QuestionKey) -> TrustState:
        """This question's trust (a live object: copy what you keep). The decision path:
        a lookup, and every ``refresh_s`` a read of what the store gained (skipped while
        another thread reads it); only the process's first call waits for the store."""
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
        """Every question the store holds evidence of (any process's), by evidence key, for
        reports (``state.question_id``, ``state.events``); reads what the store gained."""
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
        when frozen); bad evidence is dropped with a WARNING, never used. ``decision``:
        its identity (labels of one decision count once). The learning fields are the
        record's (``Evidence``; ``audit_rate``: the policy's). ``shadow``: a trial
        version's read of an already labelled decision, not counted again as a label."""
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
        try:
            rec = new_evidence(
                key=key.evidence_key,
                question_id=key.question_id,
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
                key.question_id,
                type(e).__name__,
                str(e).splitlines()[0] if str(e) else "",
            )
            return None
        with self._feed_lock:
            append_counted(self.evidence, rec, not shadow)  # (a label lost is counted)
            self._check_lost()
            self._ledger.feed([rec])
        return rec

    # -- the trust seam (agentbranch.policy.trust): what the resolver and audits call -----

    @property
    def asks_versions(self) -> bool:
        return self.learner is not None

    in_force = threshold  # the seam's name for it

    def asked(self, engine: Any, questions: Mapping[str, Any], text: str) -> dict[str, Asked]:
        from agentbranch.policy.earned.learn.hooks import asked_questions

        return asked_questions(engine, questions, self.learner, text)

    def mark(self, record: dict[str, Any], asked: Asked) -> None:
        from agentbranch.policy.earned.learn.hooks import mark_version

        mark_version(record, asked.version, asked.probability_map)

    def observe_label(
        self, question_id: str, question: Question, banded: DecisionRecord, label: TeacherLabel
    ) -> None:
        # One evidence record for the banded decision (its first read), keyed with its
        # reading fingerprint and carrying its identity (labels of one decision count once).
        if banded.get("confidence") is None or banded.get("engine_label") is None:
            return
        if is_replayed(banded):
            return  # a replayed decision is no live traffic
        band = banded["band"] if banded["band"] in ("take", "fallback", "review") else "fallback"
        learning = {}  # learning hook: the state and the version
        if self.learner is not None:
            from agentbranch.policy.generation import state_text

            state = label.state
            learning = {
                "state": state if isinstance(state, str | None) else state_text(state),
                "version": banded.get("reader_version"),
                "probability": (banded.get("probabilities") or {}).get(banded["engine_label"]),
                "audit_rate": label.audit_rate,
            }
        key = QuestionKey(
            question_id, question, banded.get("reader"), banded.get("model"), banded.get("reading")
        )
        try:
            self.observe(
                key,
                label.label,
                source=label.source,
                band=band,
                confidence=banded["confidence"],
                options=banded["options"],
                engine_label=banded["engine_label"],
                rate=label.rate,
                take_at=banded.get("take_at"),
                trust=banded.get("trust") or "learning",
                decision=banded.get("decision_id"),
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

    def suspended_take_at(self, key: QuestionKey) -> float | None:
        if not self.audit_health.suspended(key.question_id, key.reader, key.model):
            return None
        return self.state(key).take_at

    def audit_arrived(self, question_id: str, reader: str | None, model: str | None) -> None:
        self.audit_health.arrived(question_id, reader, model)

    def audit_missing(
        self, question_id: str, reader: str | None, model: str | None, why: str = ""
    ) -> None:
        self.audit_health.missing(question_id, reader, model, why)

    # -- internals ------------------------------------------------------------------------

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


#: The fall below the target precision whose withdrawal sets the window, and its bounds.
REFERENCE_DROP = 0.2
MIN_WINDOW = 8
MAX_WINDOW = 10_000  # (bounds memory per question)

Who = tuple[str, str | None, str | None]  # question id, reader, model


def health_window(precision: float, level: float) -> int:
    """Due audits the health is judged on (see ``AuditHealth``)."""
    fallen_to = max(precision - REFERENCE_DROP, precision / 2)
    return min(MAX_WINDOW, max(MIN_WINDOW, takes_to_withdraw(precision, fallen_to, level)))


@dataclass(frozen=True)
class HealthStatus:
    """One question's audit health (a snapshot): of the last ``window`` due audits, ``seen``
    so far and ``missing``; whether ``suspended``; and totals over the process's life."""

    window: int
    seen: int
    missing: int
    suspended: bool
    arrived_total: int
    missing_total: int


@dataclass(slots=True)
class _Ring:
    outcomes: deque[bool]  # the last ``window`` due audits, True: missing
    missing: int = 0
    arrived_total: int = 0
    missing_total: int = 0


class AuditHealth:
    """Per question (id, reader, model): whether its due audits arrive.

    Missing audits stretch the drift test's promise, so every due audit is counted as
    arrived or missing, and the band is suspended (nothing taken, trust ``"learning"``)
    while more than half of the last ``window`` are missing; it opens again once no more
    than a quarter are (docs/earned_method.md, "When audits stop arriving"). O(1) per
    outcome and per check; each process watches its own audits.
    """

    def __init__(self, precision: float, level: float) -> None:
        self.precision = precision
        self.level = level
        self._rings: dict[Who, _Ring] = {}
        self._suspended: set[Who] = set()
        self._lock = threading.Lock()

    @cached_property
    def window(self) -> int:
        return health_window(self.precision, self.level)

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
        who = (question_id, reader, model)
        with self._lock:
            ring = self._rings.get(who) or _Ring(deque())
            return HealthStatus(
                self.window,
                len(ring.outcomes),
                ring.missing,
                who in self._suspended,
                ring.arrived_total,
                ring.missing_total,
            )

    def _record(self, who: Who, missing: bool, why: str) -> None:
        window = self.window
        with self._lock:
            ring = self._rings.get(who)
            if ring is None:
                ring = self._rings[who] = _Ring(deque(maxlen=window))
            if len(ring.outcomes) == window:
                ring.missing -= ring.outcomes[0]
            ring.outcomes.append(missing)
            ring.missing += missing
            ring.missing_total += missing
            ring.arrived_total += not missing
            suspended = who in self._suspended
            if not suspended and 2 * ring.missing > window:
                self._suspended.add(who)
                changed = "suspended"
            elif suspended and 4 * ring.missing <= window:
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
    "AuditHealth",
    "HealthStatus",
    "health_window",
]
