"""Audit records as labelled examples: calibration from the teacher's labels, with no
read again (each record holds the engine's distribution and the teacher's label).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentbranch.calibration import By, Example, Report, Scored, apply_temperature
from agentbranch.core.audit_records import check_records, load_records
from agentbranch.core.errors import ConfigurationError
from agentbranch.core.questions import coerce_question

Record = dict[str, Any]


def _records(records: Iterable[Record] | str | Path) -> list[Record]:
    """Records checked against the schema (``AuditRecord``), from a file or in memory."""
    if isinstance(records, str | Path):
        return load_records(records)
    if isinstance(records, Mapping):  # one record, not a list of them
        raise ConfigurationError("give a list of audit records (or a file path), not one record")
    return check_records(records)


def labelled_examples(records: Iterable[Record] | str | Path) -> list[Example]:
    """One ``calibration.Example`` per record, labelled with the teacher's answer. The state
    is the rendered text when the audit kept it (``Audit(include_state=True)``), else
    ``None`` (enough for ``scored_examples``, not for reading again)."""
    out = []
    for i, rec in enumerate(_records(records), 1):
        question_id = rec["question_id"]
        if not isinstance(rec.get("spec"), dict):
            raise ConfigurationError(f"audit record {i} ({question_id!r}) has no question 'spec'")
        question = coerce_question(question_id, rec["spec"])
        out.append(Example(rec.get("state"), question_id, question, rec["teacher_label"], line=i))
    return out


def scored_examples(records: Iterable[Record] | str | Path, *, raw: bool = True) -> list[Scored]:
    """The engine's distributions with the teacher's labels, as ``calibration.Scored``.

    ``raw`` undoes the temperature the engine applied when deciding, so a fit starts
    from the reader's own probabilities; ``raw=False`` keeps them as the run saw them."""
    out = []
    for rec in _records(records):
        options = tuple(rec["options"])
        probs = [float(rec["probabilities"][o]) for o in options]
        temperature = float(rec.get("temperature") or 1.0)
        if raw and temperature != 1.0:
            probs = apply_temperature(probs, 1.0 / temperature)
        out.append(
            Scored(
                rec["question_id"],
                rec["type"],
                options,
                tuple(probs),
                options.index(rec["teacher_label"]),
            )
        )
    return out


def calibrate_from_audit(
    records: Iterable[Record] | str | Path,
    *,
    by: By = "question",
    holdout: float = 0.3,
    target_precision: float = 0.9,
    seed: int = 0,
    min_examples: int = 10,
) -> Report:
    """Fit temperatures (and suggest thresholds) on the teacher's labels: the same report
    ``agentbranch calibrate`` gives for a labelled file, with no engine read.

    Suggested thresholds treat every record alike; the take band is sampled and the
    fallback band kept whole, so they err high. ``audit_report`` weights them."""
    from agentbranch import calibration as cal

    recs = _records(records)
    if not recs:
        raise ConfigurationError(
            "no audit records to fit on; Policy(audit=Audit(sink=...)) writes them as the graph "
            "runs"
        )
    scored = scored_examples(recs)  # (an example's line is its record's number, from 1)
    fit_ex, test_ex = cal.split(labelled_examples(recs), holdout, seed=seed)
    fit: Sequence[Any] = [scored[ex.line - 1] for ex in fit_ex]
    test = [scored[ex.line - 1] for ex in test_ex]
    return cal.calibrate_scored(
        fit,
        test or None,
        by=by,
        target_precision=target_precision,
        min_examples=min_examples,
    )


__all__ = [
    "Record",
    "calibrate_from_audit",
    "labelled_examples",
    "scored_examples",
]
