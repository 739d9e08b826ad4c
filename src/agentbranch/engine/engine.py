"""``DecisionEngine``: questions in, decisions out, through one batched reader call.

Data flows one way: questions → question reads (chunks, permutations) → ``ReadRequest``
→ reader → ``LabelRead`` → calibrated distribution (stamped with the reading
``fingerprint``) → ``Decision``.

Over 500 lines: one idea, the engine's one pass from questions to decisions.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.at_exit import join_at_exit
from agentbranch.core.decisions import Decision, Decisions
from agentbranch.core.errors import (
    AgentBranchError,
    ConfigurationError,
    InvalidQuestionError,
    InvalidReadError,
    ReaderError,
    surrogate_at,
    timeout_seconds,
)
from agentbranch.core.questions import validate_questions
from agentbranch.core.reads import LabelRead, QuestionSpec, ReadRequest
from agentbranch.core.state import render_state
from agentbranch.core.teacher_calls import TeacherCalls
from agentbranch.engine.batching import BatchingReader, timed_out
from agentbranch.engine.calibration import Calibration
from agentbranch.engine.plan import QuestionPlans, Unit, combine, normalise
from agentbranch.engine.readers.base import Reader, is_plain, require_reader

log = logging.getLogger("agentbranch")
calibration_log = logging.getLogger("agentbranch.calibration")

T = TypeVar("T")


def _count(name: str, value: Any) -> int:
    """``value`` as a count >= 1, or ``ConfigurationError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be an integer >= 1, got {value!r}")
    return value


@dataclass
class _Prepared:
    """One decision's read request and how to fold its reads back."""

    request: ReadRequest
    #: Each question as asked (before chunks and permutations), and the reads of it.
    planned: list[tuple[QuestionSpec, list[Unit]]]


def _in_thread(fn: Callable[[], T]) -> Future[T]:
    """Run ``fn`` on a new daemon thread (in a copy of the caller's context), so a
    timeout measures the read itself, not a pool's queue. A read that times out keeps
    its thread until the reader returns (Python cannot stop a thread)."""
    future: Future[T] = Future()
    context = contextvars.copy_context()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(context.run(fn))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting caller
            future.set_exception(e)

    thread = threading.Thread(target=run, name="agentbranch-read", daemon=True)
    thread.start()
    # Joined at exit until it has really ended: after answering, the thread still drops
    # ``fn`` (which may hold the last reference to the reader, and so free its model).
    join_at_exit(thread)
    return future


class DecisionEngine:
    """Answers typed questions about a state with one structured read.

    Args:
        reader: where reads go (``TransformersReader``, ``VLLMReader``,
            ``RemoteReader``, the embedded CPU reader, ``ScriptedReader`` ...).
        instructions: an optional system prompt for every read.
        joint: put several questions on one canvas (canvas readers only).
        draws: noise draws per read (averaged; their agreement is reported).
        permutations: read choices in this many option orders and average (debiasing).
        calibration: temperatures (``Calibration`` or a path to a saved one). A question
            asked with no temperature of its own while the calibration has per-question
            ones (a renamed question?) is logged once as a warning on the
            ``agentbranch.calibration`` logger.
        timeout_s: a read that takes longer raises ``ReaderTimeoutError``; it measures
            the read itself (each timed sync read runs on its own thread, so concurrent
            callers never wait for each other's slot). Through the coalescer it also
            covers the wait for the batch the request joins; a read that times out is
            abandoned, and a hung batch nobody waits for no longer blocks the next one.
        log_state: include the rendered state in the decision log event.
        batching: coalesce concurrent calls (threads, asyncio tasks, ``graph.batch``)
            into shared reader batches through a ``BatchingReader`` (the default);
            ``False`` sends each call to the reader as is. A reader that already is a
            ``BatchingReader`` is used as given.
        eager: warm the reader up now (``warmup()``) instead of before the first read.

    ``latency_s`` in decisions is the read alone: loading the model never counts.
    """

    def __init__(
        self,
        reader: Reader,
        *,
        instructions: str | None = None,
        joint: bool = False,
        draws: int = 1,
        permutations: int = 1,
        calibration: Calibration | str | os.PathLike[str] | None = None,
        timeout_s: float | None = None,
        log_state: bool = False,
        eager: bool = False,
        batching: bool = True,
    ) -> None:
        require_reader(reader)
        if instructions is not None and not isinstance(instructions, str):
            raise ConfigurationError(
                f"instructions must be a string or None, got {type(instructions).__name__}"
            )
        if instructions is not None and (at := surrogate_at(instructions)) >= 0:
            raise ConfigurationError(
                f"instructions contain an unpaired surrogate at index {at}, which "
                "is not valid Unicode; decode the text with errors='replace' first"
            )
        self.reader = reader
        self.instructions = instructions
        self.joint = bool(joint)
        self.draws = _count("draws", draws)
        self.permutations = _count("permutations", permutations)
        if isinstance(calibration, str | os.PathLike):
            calibration = Calibration.load(calibration)
        elif calibration is not None and not isinstance(calibration, Calibration):
            raise ConfigurationError(
                "calibration must be a Calibration, a path to a saved one, or None; got "
                f"{type(calibration).__name__}"
            )
        self.calibration: Calibration | None = calibration
        self.timeout_s = timeout_seconds(timeout_s, "timeout_s")
        self.log_state = log_state
        self._uncalibrated: set[str] = set()  # question ids already warned about
        self._plans = QuestionPlans()
        self.batching = batching
        self._coalescer: BatchingReader | None = None
        if batching and not isinstance(reader, BatchingReader):
            self._coalescer = BatchingReader(reader)
        #: Why ``from_env`` chose this reader (``None`` when built directly).
        self.selection_reason: str | None = None
        self._loaded = False
        if eager:
            self.warmup()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> DecisionEngine:
        """The engine on the best reader this machine offers: vLLM with a configured
        DiffusionGemma on CUDA, else a remote ``/v1/systemone`` server when
        ``AGENTBRANCH_REMOTE_URL`` is set, else the embedded CPU reader. Why it picked
        that one is logged and kept in ``engine.selection_reason``
        (see ``agentbranch.engine.selection``). ``kwargs`` go to ``DecisionEngine``; without
        ``calibration`` the file named by ``AGENTBRANCH_CALIBRATION`` is loaded."""
        from agentbranch.engine.selection import reader_from_env

        reader, reason, calibration = reader_from_env(env)
        if "calibration" not in kwargs and calibration:
            kwargs["calibration"] = calibration
            reason += f"; calibration from {calibration}"
        engine = cls(reader, **kwargs)
        engine.selection_reason = reason
        telemetry.event(
            log,
            logging.INFO,
            "agentbranch.engine_selected",
            reader=reader.name,
            model=reader.model,
            reason=reason,
        )
        return engine

    def warmup(self) -> DecisionEngine:
        """Load the reader's model and run its one-off first-read work now (see
        ``Reader.warmup``), so no decision waits for it. Idempotent."""
        self.reader.warmup()
        self._loaded = True
        return self

    # -- public API ------------------------------------------------------------------

    def decide(
        self,
        state: Any,
        questions: Mapping[str, Any],
        *,
        draws: int | None = None,
        log_decisions: bool = True,
    ) -> Decisions:
        """Answer ``questions`` (id → ``Choice``/``Noul``/``Score``) about ``state``.

        ``draws`` overrides the engine's noise draws for this call. Each decision emits one
        ``agentbranch.decision`` log event; a policy that resolves decisions further passes
        ``log_decisions=False`` and logs the resolved one itself."""
        return self.decide_many([state], questions, draws=draws, log_decisions=log_decisions)[0]

    async def adecide(
        self,
        state: Any,
        questions: Mapping[str, Any],
        *,
        draws: int | None = None,
        log_decisions: bool = True,
    ) -> Decisions:
        """Async ``decide``."""
        many = await self.adecide_many([state], questions, draws=draws, log_decisions=log_decisions)
        return many[0]

    def decide_many(
        self,
        states: Sequence[Any],
        questions: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        draws: int | None = None,
        log_decisions: bool = True,
    ) -> list[Decisions]:
        """Decide for many states in ONE batched read. ``questions`` is one mapping for
        every state, or one mapping per state."""
        prepared = self._prepare_all(states, questions, draws)
        if not self._loaded:  # the model load is not part of any decision's latency
            self._load_reader()
        start = time.perf_counter()
        reads = self._read_sync([p.request for p in prepared])
        return self._finish_all(prepared, reads, time.perf_counter() - start, log_decisions)

    async def adecide_many(
        self,
        states: Sequence[Any],
        questions: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        draws: int | None = None,
        log_decisions: bool = True,
    ) -> list[Decisions]:
        """Async ``decide_many``."""
        prepared = self._prepare_all(states, questions, draws)
        if not self._loaded:
            await asyncio.to_thread(self._load_reader)
        start = time.perf_counter()
        reads = await self._read_async([p.request for p in prepared])
        return self._finish_all(prepared, reads, time.perf_counter() - start, log_decisions)

    def close(self) -> None:
        """Close the coalescer and the reader."""
        if self._coalescer is not None:
            self._coalescer.close()
        self.reader.close()

    @property
    def reads_via(self) -> Reader:
        """The reader reads go through: the coalescer over ``reader`` (made on first
        use, and again if ``reader`` is replaced), or ``reader`` itself."""
        if not self.batching or isinstance(self.reader, BatchingReader):
            return self.reader
        coalescer = self._coalescer
        if coalescer is None or coalescer.inner is not self.reader:
            coalescer = self._coalescer = BatchingReader(self.reader)
        return coalescer

    @property
    def teacher_calls(self) -> TeacherCalls | None:
        """What answers the teacher calls of policies deciding with this engine: the
        replay cassette its reader (or a reader it wraps) reads through, or ``None``."""
        for reader in self.reader.chain():
            if isinstance(reader.teacher_calls, TeacherCalls):
                return reader.teacher_calls
        return None

    def unrecorded(self) -> DecisionEngine:
        """This engine for reads that are no part of the run a replay cassette records
        (a learning version's trial reads): over its reader's ``unrecorded()`` view
        (``Reader.unrecorded``), or the engine itself."""
        made = self.__dict__.get("_unrecorded_engine")
        if made is not None and made.__dict__.get("_unrecorded_of") is self.reader:
            return made
        view = self.reader.unrecorded()
        if view is self.reader:
            return self
        made = copy.copy(self)
        made.reader, made._coalescer = view, None
        made._reader_settings = self._reader_settings  # the same reading fingerprint
        made.__dict__.pop("_unrecorded_engine", None)
        made.__dict__["_unrecorded_of"] = self.reader
        self.__dict__["_unrecorded_engine"] = made
        return made

    # -- preparation ---------------------------------------------------------------

    def _prepare_all(
        self,
        states: Sequence[Any],
        questions: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        draws: int | None,
    ) -> list[_Prepared]:
        if isinstance(states, str | bytes) or not isinstance(states, Sequence):
            raise ConfigurationError(
                f"decide_many takes a list of states, got {type(states).__name__}; for one "
                "state use decide(state, questions)"
            )
        draws = self.draws if draws is None else _count("draws", draws)
        if isinstance(questions, Mapping):
            questions = [questions] * len(states)
        if isinstance(questions, str | bytes) or not isinstance(questions, Sequence):
            raise InvalidQuestionError(
                "questions must be a mapping of id -> question, e.g. {'route': "
                "agentbranch.choice('Which team?', ['billing', 'outage'])} (or, in "
                f"decide_many, one such mapping per state); got {type(questions).__name__}"
            )
        if len(questions) != len(states):
            raise ConfigurationError(
                f"{len(states)} states but {len(questions)} question sets; pass one "
                "mapping for all states or one per state"
            )
        return [self._prepare(state, qs, draws) for state, qs in zip(states, questions)]

    def _prepare(self, state: Any, questions: Mapping[str, Any], draws: int) -> _Prepared:
        validated = validate_questions(questions)
        max_options, permutations = self.reader.max_options, self.permutations
        planned = [
            self._plans.plan(question_id, q, max_options=max_options, permutations=permutations)
            for question_id, q in validated.items()
        ]
        request = ReadRequest(
            state=render_state(state),
            questions=tuple(u.spec for _, units in planned for u in units),
            instructions=self.instructions,
            draws=draws,
            joint=self.joint,
        )
        return _Prepared(request=request, planned=planned)

    # -- reading -------------------------------------------------------------------

    def _load_reader(self) -> None:
        with self._reader_errors():
            self.reader.load()
        self._loaded = True

    @contextlib.contextmanager
    def _reader_errors(self) -> Iterator[None]:
        """A reader's own exception becomes a ``ReaderError`` saying what to do."""
        try:
            yield
        except AgentBranchError:
            raise
        except Exception as e:
            raise ReaderError(
                f"reader {self.reader.name!r} ({self.reader.model}) failed: {e!r}. The "
                "decision was not made; check the model/server, or choose fail-open or "
                "fail-closed handling in the integration."
            ) from e

    def _read_sync(self, requests: list[ReadRequest]) -> list[list[LabelRead]]:
        with self._reader_errors():
            via = self.reads_via
            if isinstance(via, BatchingReader):  # waits here; a timeout abandons the read
                return via.read(requests, timeout_s=self.timeout_s)
            if self.timeout_s is None:
                return via.read(requests)
            future = _in_thread(lambda: via.read(requests))
            try:
                return future.result(timeout=self.timeout_s)
            except FutureTimeout:
                raise timed_out(self.reader.name, self.timeout_s) from None

    async def _read_async(self, requests: list[ReadRequest]) -> list[list[LabelRead]]:
        with self._reader_errors():
            if self.timeout_s is None:
                return await self.reads_via.aread(requests)
            via = self.reads_via
            if type(via).aread is Reader.aread:
                # The default aread borrows the loop's default executor (a few threads):
                # a queue there would count against the timeout. Give the read its own.
                read = asyncio.wrap_future(_in_thread(lambda: via.read(requests)))
            else:
                read = via.aread(requests)
            try:
                # In this task, not one of its own (as asyncio.wait_for makes on Python
                # 3.11): the coalescer sees the task awaiting its answers.
                async with asyncio.timeout(self.timeout_s):
                    return await read
            except TimeoutError:
                raise timed_out(self.reader.name, self.timeout_s) from None

    # -- folding reads into decisions -----------------------------------------------

    def _finish_all(
        self,
        prepared: list[_Prepared],
        reads: list[list[LabelRead]],
        latency_s: float,
        log_decisions: bool,
    ) -> list[Decisions]:
        self._check_count(reads, len(prepared), "requests")
        results = [self._finish(p, r, latency_s) for p, r in zip(prepared, reads)]
        if log_decisions:
            for p, decisions in zip(prepared, results):
                for decision in decisions.values():
                    self._log(decision, p.request.state)
        return results

    def _finish(self, prepared: _Prepared, reads: list[LabelRead], latency_s: float) -> Decisions:
        # Checked per request, so in a shared batch a bad answer fails only its caller;
        # a reader may answer a request with the ReaderError it failed with.
        if isinstance(reads, ReaderError):
            raise reads
        self._check_count(reads, len(prepared.request.questions), "question reads")
        decisions: dict[str, Decision] = {}
        at = 0
        for spec, units in prepared.planned:
            question_id = spec.id
            unit_reads = reads[at : at + len(units)]
            at += len(units)
            folded = combine(len(spec.options), units, unit_reads)  # checks every read
            temperature = self._temperature(question_id, spec.type)
            probs = normalise(folded.scores, temperature)
            if probs is None:
                raise ReaderError(
                    f"reader {self.reader.name!r} gave no probability to any option of "
                    f"question {question_id!r}; the read is unusable"
                )
            decisions[question_id] = Decision.from_probs(
                question_id=question_id,
                type=spec.type,  # type: ignore[arg-type]
                options=spec.options,
                probs=probs,
                label_mass=folded.label_mass,
                argmax_is_label=folded.argmax_is_label,
                agreement=folded.agreement,
                reader=self.reader.name,
                model=self.reader.model,
                latency_s=latency_s,
                # (or the reader calibrated every read of the question itself)
                calibrated=temperature != 1.0
                or all(r.extras.get("calibrated") is True for r in unit_reads),
                reading=self._reading(prepared.request.draws, temperature),
            )
        usage, request_id = _usage(reads)
        return Decisions(decisions, latency_s=latency_s, usage=usage, request_id=request_id)

    def _check_count(self, reads: Any, expected: int, what: str) -> None:
        if not isinstance(reads, Sequence) or len(reads) != expected:
            got = len(reads) if isinstance(reads, Sequence) else type(reads).__name__
            raise InvalidReadError(
                f"reader {self.reader.name!r} answered {got} of {expected} {what}"
            )

    def reading_for(self, question_id: str, question: Any) -> str | None:
        """The reading fingerprint (``Decision.reading``) this engine's decision of
        ``question`` carries with the engine's own draws, known before the read."""
        spec = validate_questions({question_id: question})[question_id]
        return self._reading(self.draws, self._temperature(question_id, spec.type))

    def _reading(self, draws: int, temperature: float) -> str | None:
        """The reading fingerprint of a read with ``draws`` at ``temperature``."""
        return fingerprint(
            instructions=self.instructions,
            joint=self.joint,
            draws=draws,
            permutations=self.permutations,
            temperature=temperature,
            reader=self._reader_settings,
        )

    @functools.cached_property
    def _reader_settings(self) -> dict[str, Any]:
        """The reader's confidence-shaping settings (``reader_settings``), read once."""
        return reader_settings(self.reader)

    def _temperature(self, question_id: str, qtype: str) -> float:
        calibration = self.calibration
        if calibration is None:
            return 1.0
        if (
            calibration.temperatures
            and question_id not in calibration.temperatures
            and question_id not in self._uncalibrated
        ):
            self._uncalibrated.add(question_id)
            calibration_log.warning(
                "question %r has no temperature in the calibration, which calibrates %s; "
                "it uses the %s/default temperature. Renamed question? Re-run "
                "`agentbranch calibrate` with the current ids.",
                question_id,
                sorted(calibration.temperatures),
                qtype,
            )
        return calibration.temperature(question_id, qtype)

    def _log(self, d: Decision, state: str) -> None:
        if not log.isEnabledFor(logging.INFO):  # the usual case: nobody configured it
            return
        event: dict[str, Any] = dict(
            question_id=d.question_id,
            type=d.type,
            label=d.label,
            probabilities={k: round(p, 6) for k, p in d.probabilities.items()},
            entropy=round(d.entropy, 6),
            confidence=round(d.confidence, 6),
            label_mass=None if d.label_mass is None else round(d.label_mass, 6),
            decided_by="engine",
            reader=d.reader,
            model=d.model,
            latency_s=round(d.latency_s, 6),
        )
        if self.log_state:
            event["state"] = state
        telemetry.event(log, logging.INFO, "agentbranch.decision", **event)


def _usage(reads: list[LabelRead]) -> tuple[dict[str, int] | None, str | None]:
    """The request's token usage and request id, where the reader reported them."""
    usages = [r.extras["usage"] for r in reads if isinstance(r.extras.get("usage"), Mapping)]
    ids = [str(r.extras["request_id"]) for r in reads if r.extras.get("request_id")]
    usage = None
    if usages:
        usage = {
            key: sum(int(u.get(key) or 0) for u in usages)  # type: ignore[union-attr]
            for key in ("input_tokens", "output_tokens")
        }
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return usage, (ids[0] if ids else None)


def reader_settings(reader: Reader) -> dict[str, Any]:
    """The confidence-shaping settings (``Reader.reading_settings``) of the reader that
    does the reading: the innermost of the readers ``reader`` reads through."""
    *_, innermost = reader.chain()
    settings = dict(innermost.reading_settings())
    return {str(k): v if is_plain(v) else repr(v) for k, v in settings.items()}


def fingerprint(
    *,
    instructions: str | None,
    joint: bool,
    draws: int,
    permutations: int,
    temperature: float,
    reader: dict[str, Any],
) -> str | None:
    """``Decision.reading`` for these settings: ``None`` when every one is its default,
    else a short hash of those that are not. Each moves the same answer to another
    confidence, and a threshold earned on one confidence scale means nothing on another,
    so ``Earned`` keys its evidence by it. ``reader`` is the reader's own
    (``reader_settings``); question wording, reader name and model are in the evidence
    key already.
    """
    settings: dict[str, Any] = {}
    if instructions is not None:
        settings["instructions"] = instructions
    if joint:
        settings["joint"] = True
    if draws != 1:
        settings["draws"] = int(draws)
    if permutations != 1:
        settings["permutations"] = int(permutations)
    if temperature != 1.0:
        settings["temperature"] = repr(float(temperature))
    if reader:
        settings["reader"] = reader
    if not settings:
        return None
    blob = json.dumps(settings, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


__all__ = ["DecisionEngine"]
