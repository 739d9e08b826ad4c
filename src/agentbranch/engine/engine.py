"""``DecisionEngine``: questions in, decisions out, through one batched reader call.

Data flows one way: questions → question reads (chunks, permutations) → ``ReadRequest``
→ reader → ``LabelRead`` → calibrated distribution → ``Decision``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import structlog

from agentbranch.decisions import Decision, Decisions
from agentbranch.engine.batching import BatchingReader
from agentbranch.engine.calibration import Calibration
from agentbranch.engine.plan import Unit, combine, expand, normalise
from agentbranch.engine.readers.base import Reader
from agentbranch.engine.reads import LabelRead, ReadRequest
from agentbranch.errors import (
    AgentBranchError,
    ConfigurationError,
    ReaderError,
    ReaderTimeoutError,
)
from agentbranch.questions import to_spec, validate_questions
from agentbranch.state import render_state

log = structlog.stdlib.get_logger("agentbranch")


@dataclass
class _Prepared:
    """One decision's read request and how to fold its reads back."""

    request: ReadRequest
    question_ids: list[str]
    types: list[str]
    options: list[tuple[str, ...]]
    units: list[list[Unit]]


class DecisionEngine:
    """Answers typed questions about a state with one structured read.

    Args:
        reader: where reads go (``TransformersReader``, ``VLLMReader``,
            ``RemoteReader``, the embedded CPU reader, ``ScriptedReader`` ...).
        instructions: an optional system prompt for every read.
        joint: put several questions on one canvas (canvas readers only).
        draws: noise draws per read (averaged; their agreement is reported).
        permutations: read choices in this many option orders and average (debiasing).
        calibration: temperatures (``Calibration`` or a path to a saved one).
        timeout_s: a read that takes longer raises ``ReaderTimeoutError``.
        log_state: include the rendered state in the decision log event.
        batching: coalesce concurrent calls (threads, asyncio tasks, ``graph.batch``)
            into shared reader batches through a ``BatchingReader`` (the default);
            ``False`` sends each call to the reader as is. A reader that already is a
            ``BatchingReader`` is used as given.
    """

    def __init__(
        self,
        reader: Reader,
        *,
        instructions: str | None = None,
        joint: bool = False,
        draws: int = 1,
        permutations: int = 1,
        calibration: Calibration | str | None = None,
        timeout_s: float | None = None,
        log_state: bool = False,
        batching: bool = True,
    ) -> None:
        if draws < 1 or permutations < 1:
            raise ConfigurationError("draws and permutations must be at least 1")
        self.reader = reader
        self.instructions = instructions
        self.joint = joint
        self.draws = draws
        self.permutations = permutations
        self.calibration = (
            Calibration.load(calibration) if isinstance(calibration, str) else calibration
        )
        self.timeout_s = timeout_s
        self.log_state = log_state
        self.batching = batching
        self._coalescer: BatchingReader | None = None
        if batching and not isinstance(reader, BatchingReader):
            self._coalescer = BatchingReader(reader)
        self._pool: ThreadPoolExecutor | None = None
        #: Why ``from_env`` chose this reader (``None`` when built directly).
        self.selection_reason: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: Any) -> DecisionEngine:
        """The engine on the best reader this machine offers: vLLM with a configured
        DiffusionGemma on CUDA, else a remote ``/v1/systemone`` server when
        ``AGENTBRANCH_REMOTE_URL`` is set, else the embedded CPU reader. Why it picked
        that one is logged and kept in ``engine.selection_reason``
        (see ``agentbranch.selection``)."""
        from agentbranch.selection import engine_from_env

        engine, reason = engine_from_env(env, **kwargs)
        engine.selection_reason = reason
        return engine

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
        ``agentbranch.decision`` structlog event; an integration that resolves decisions
        further (a policy) passes ``log_decisions=False`` and emits the resolved event
        itself, so every decision is logged once."""
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
        start = time.perf_counter()
        reads = await self._read_async([p.request for p in prepared])
        return self._finish_all(prepared, reads, time.perf_counter() - start, log_decisions)

    def close(self) -> None:
        """Close the reader and the timeout worker."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
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

    # -- preparation ---------------------------------------------------------------

    def _prepare_all(
        self,
        states: Sequence[Any],
        questions: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        draws: int | None,
    ) -> list[_Prepared]:
        if isinstance(states, str | bytes) or not isinstance(states, Sequence):
            raise ConfigurationError("decide_many takes a list of states")
        if isinstance(questions, Mapping):
            per_state: Sequence[Mapping[str, Any]] = [questions] * len(states)
        else:
            per_state = questions
            if len(per_state) != len(states):
                raise ConfigurationError(
                    f"{len(states)} states but {len(per_state)} question sets; pass one "
                    "mapping for all states or one per state"
                )
        return [
            self._prepare(state, qs, draws or self.draws) for state, qs in zip(states, per_state)
        ]

    def _prepare(self, state: Any, questions: Mapping[str, Any], draws: int) -> _Prepared:
        validated = validate_questions(questions)
        specs = [to_spec(qid, q) for qid, q in validated.items()]
        units = [
            expand(s, max_options=self.reader.max_options, permutations=self.permutations)
            for s in specs
        ]
        request = ReadRequest(
            state=render_state(state),
            questions=tuple(u.spec for group in units for u in group),
            instructions=self.instructions,
            draws=draws,
            joint=self.joint,
        )
        return _Prepared(
            request=request,
            question_ids=[s.id for s in specs],
            types=[s.type for s in specs],
            options=[s.options for s in specs],
            units=units,
        )

    # -- reading -------------------------------------------------------------------

    def _reader_failed(self, e: Exception) -> ReaderError:
        return ReaderError(
            f"reader {self.reader.name!r} ({self.reader.model}) failed: {e!r}. The "
            "decision was not made; check the model/server, or choose fail-open or "
            "fail-closed handling in the integration."
        )

    def _timed_out(self) -> ReaderTimeoutError:
        return ReaderTimeoutError(
            f"reader {self.reader.name!r} did not answer within {self.timeout_s}s; raise "
            "timeout_s or check the model/server load"
        )

    def _read_sync(self, requests: list[ReadRequest]) -> list[list[LabelRead]]:
        try:
            if self.timeout_s is None:
                return self.reads_via.read(requests)
            if self._pool is None:
                # One thread per concurrent caller, so parallel branches still reach a
                # batching reader together instead of queueing behind each other.
                self._pool = ThreadPoolExecutor(32, thread_name_prefix="agentbranch-read")
            future = self._pool.submit(self.reads_via.read, requests)
            try:
                return future.result(timeout=self.timeout_s)
            except FutureTimeout:
                future.cancel()
                raise self._timed_out() from None
        except AgentBranchError:
            raise
        except Exception as e:
            raise self._reader_failed(e) from e

    async def _read_async(self, requests: list[ReadRequest]) -> list[list[LabelRead]]:
        try:
            if self.timeout_s is None:
                return await self.reads_via.aread(requests)
            try:
                return await asyncio.wait_for(self.reads_via.aread(requests), self.timeout_s)
            except TimeoutError:
                raise self._timed_out() from None
        except AgentBranchError:
            raise
        except Exception as e:
            raise self._reader_failed(e) from e

    # -- folding -------------------------------------------------------------------

    def _finish_all(
        self,
        prepared: list[_Prepared],
        reads: list[list[LabelRead]],
        latency_s: float,
        log_decisions: bool,
    ) -> list[Decisions]:
        if len(reads) != len(prepared):
            raise ReaderError(
                f"reader {self.reader.name!r} answered {len(reads)} of {len(prepared)} requests"
            )
        results = [self._finish(p, r, latency_s) for p, r in zip(prepared, reads)]
        if log_decisions:
            for p, decisions in zip(prepared, results):
                for decision in decisions.values():
                    self._log(decision, p.request.state)
        return results

    def _finish(self, prepared: _Prepared, reads: list[LabelRead], latency_s: float) -> Decisions:
        if len(reads) != len(prepared.request.questions):
            raise ReaderError(
                f"reader {self.reader.name!r} answered {len(reads)} of "
                f"{len(prepared.request.questions)} question reads"
            )
        decisions: dict[str, Decision] = {}
        at = 0
        for qid, qtype, options, units in zip(
            prepared.question_ids, prepared.types, prepared.options, prepared.units
        ):
            unit_reads = reads[at : at + len(units)]
            at += len(units)
            folded = combine(len(options), units, unit_reads)
            temperature = self.calibration.temperature(qid, qtype) if self.calibration else 1.0
            probs = normalise(folded.scores, temperature)
            if probs is None:
                raise ReaderError(
                    f"reader {self.reader.name!r} gave no probability to any option of "
                    f"question {qid!r}; the read is unusable"
                )
            decision = Decision.from_probs(
                question_id=qid,
                type=qtype,  # type: ignore[arg-type]
                options=options,
                probs=probs,
                label_mass=folded.label_mass,
                argmax_is_label=folded.argmax_is_label,
                agreement=folded.agreement,
                reader=self.reader.name,
                model=self.reader.model,
                latency_s=latency_s,
                calibrated=temperature != 1.0,
            )
            decisions[qid] = decision
        return Decisions(decisions, latency_s=latency_s)

    def _log(self, d: Decision, state: str) -> None:
        event: dict[str, Any] = dict(
            question_id=d.question_id,
            type=d.type,
            label=d.label,
            probabilities=d.probabilities,
            entropy=round(d.entropy, 6),
            confidence=round(d.confidence, 6),
            label_mass=round(d.label_mass, 6),
            decided_by="engine",
            reader=d.reader,
            model=d.model,
            latency_s=round(d.latency_s, 6),
        )
        if self.log_state:
            event["state"] = state
        log.info("agentbranch.decision", **event)
