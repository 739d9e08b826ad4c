"""The engine's fold: a decision's label reads back to calibrated ``Decisions``.

``Folding`` is mixed into ``agentbranch.engine.engine.DecisionEngine`` (whose reader,
calibration and settings it reads): it folds the reads of each question (chunks,
permutations, draws) into one distribution, applies the calibration's temperature,
stamps the reading fingerprint and logs the decision."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentbranch.core import logs
from agentbranch.core.decisions import Decision, Decisions
from agentbranch.core.errors import InvalidReadError, ReaderError
from agentbranch.core.questions import validate_questions
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine.plan import Unit, combine, normalise
from agentbranch.engine.reading import fingerprint, reader_settings

__all__ = ["Folding"]

log = logging.getLogger("agentbranch")
calibration_log = logging.getLogger("agentbranch.calibration")


@dataclass
class _Prepared:
    """One decision's read request and how to fold its reads back."""

    request: ReadRequest
    question_ids: list[str]
    types: list[str]
    options: list[tuple[str, ...]]
    units: list[list[Unit]]


class Folding:
    """The fold half of ``DecisionEngine`` (see module doc)."""

    reader: Any
    calibration: Any
    draws: int
    instructions: Any
    joint: bool
    permutations: Any
    log_state: bool
    _uncalibrated: set[str]

    def _finish_all(
        self,
        prepared: list[_Prepared],
        reads: list[list[LabelRead]],
        latency_s: float,
        log_decisions: bool,
    ) -> list[Decisions]:
        if not isinstance(reads, Sequence) or len(reads) != len(prepared):
            got = len(reads) if isinstance(reads, Sequence) else type(reads).__name__
            raise InvalidReadError(
                f"reader {self.reader.name!r} answered {got} of {len(prepared)} requests"
            )
        results = [self._finish(p, r, latency_s) for p, r in zip(prepared, reads)]
        if log_decisions:
            for p, decisions in zip(prepared, results):
                for decision in decisions.values():
                    self._log(decision, p.request.state)
        return results

    def _finish(self, prepared: _Prepared, reads: list[LabelRead], latency_s: float) -> Decisions:
        # Checked per request, so in a shared batch a bad answer fails only its caller.
        # A reader may answer a request with the ReaderError it failed with instead of
        # its reads (RemoteReader does for an invalid server answer).
        if isinstance(reads, ReaderError):
            raise reads
        if not isinstance(reads, Sequence) or len(reads) != len(prepared.request.questions):
            got = len(reads) if isinstance(reads, Sequence) else type(reads).__name__
            raise InvalidReadError(
                f"reader {self.reader.name!r} answered {got} of "
                f"{len(prepared.request.questions)} question reads"
            )
        decisions: dict[str, Decision] = {}
        at = 0
        for question_id, qtype, options, units in zip(
            prepared.question_ids, prepared.types, prepared.options, prepared.units
        ):
            unit_reads = reads[at : at + len(units)]
            at += len(units)
            folded = combine(len(options), units, unit_reads)  # checks every read
            temperature = self._temperature(question_id, qtype)
            reading = self._reading(prepared.request.draws, temperature)
            probs = normalise(folded.scores, temperature)
            if probs is None:
                raise ReaderError(
                    f"reader {self.reader.name!r} gave no probability to any option of "
                    f"question {question_id!r}; the read is unusable"
                )
            decision = Decision.from_probs(
                question_id=question_id,
                type=qtype,  # type: ignore[arg-type]
                options=options,
                probs=probs,
                label_mass=folded.label_mass,
                argmax_is_label=folded.argmax_is_label,
                agreement=folded.agreement,
                reader=self.reader.name,
                model=self.reader.model,
                latency_s=latency_s,
                calibrated=temperature != 1.0 or _reader_calibrated(unit_reads),
                reading=reading,
            )
            decisions[question_id] = decision
        usage, request_id = _usage(reads)
        return Decisions(decisions, latency_s=latency_s, usage=usage, request_id=request_id)

    def reading_for(self, question_id: str, question: Any) -> str | None:
        """The reading fingerprint (``Decision.reading``) this engine's decision of
        ``question`` carries, with the engine's own draws (no per-call ``draws=``): a
        learning policy keys the version it asks by it before the read."""
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
            reader=self._reader_settings(),
        )

    def _reader_settings(self) -> dict[str, Any]:
        """The reader's confidence-shaping settings (``engine.reading``), read once."""
        got = self.__dict__.get("_reading_settings")
        if got is None:
            got = self.__dict__["_reading_settings"] = reader_settings(self.reader)
        return got

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
        logs.event(log, logging.INFO, "agentbranch.decision", **event)


def _reader_calibrated(reads: Sequence[LabelRead]) -> bool:
    """Whether the reader calibrated every read of a question itself (``LabelRead``)."""
    return bool(reads) and all(r.extras.get("calibrated") is True for r in reads)


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
