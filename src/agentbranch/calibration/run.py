"""The whole job: ``calibrate`` (read, split, fit, measure on the held-out part),
``calibrate_scored`` (on examples already read) and ``evaluate`` (fit nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agentbranch.calibration.labelled import Example, split
from agentbranch.calibration.measures import Metrics, SuggestedThreshold, check_threshold, metrics
from agentbranch.calibration.report import Report, bound_warnings
from agentbranch.calibration.scored import Scored, read_examples
from agentbranch.calibration.temperatures import By, calibrated, fit
from agentbranch.core.errors import ConfigurationError
from agentbranch.engine.calibration import Calibration

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["WORSE_FIT", "calibrate", "calibrate_scored", "evaluate"]

logger = logging.getLogger("agentbranch.calibration")

#: How the warning about a fit that made the evaluation split worse begins.
WORSE_FIT = "the fit makes"


def calibrate_scored(
    fit_scored: Sequence[Scored],
    eval_scored: Sequence[Scored] | None = None,
    *,
    by: By = "question",
    target_precision: float = 0.9,
    min_examples: int = 10,
) -> Report:
    """Fit on ``fit_scored``; measure on ``eval_scored`` (or the fit set when ``None``).
    Suggested thresholds (per question id, on calibrated confidence) come from the fit
    set and are stored in ``calibration.thresholds``. A fit that makes both ECE and
    Brier worse on the evaluation split is logged as a warning (logger
    ``agentbranch.calibration``) and in ``Report.warnings``; ``Report.worse`` says so."""
    _check_settings(target_precision, min_examples)
    if not fit_scored:
        raise ConfigurationError(
            "nothing to fit: every example went to the held-out split; lower the holdout "
            "share or add labelled examples"
        )
    calibration = fit(fit_scored, by=by, min_examples=min_examples)
    fit_after = calibrated(fit_scored, calibration)
    for question_id in dict.fromkeys(s.question_id for s in fit_after):
        group = [s for s in fit_after if s.question_id == question_id]
        t = metrics(group, target_precision=target_precision).threshold
        if t.threshold is not None:
            calibration.thresholds[question_id] = round(t.threshold, 4)
    held_out = eval_scored is not None and len(eval_scored) > 0
    report = _report(
        list(eval_scored) if held_out else list(fit_scored),
        calibration,
        target_precision,
        n_fit=len(fit_scored),
        held_out=held_out,
    )
    if report.worse:
        split_name = "held-out" if held_out else "fitted"
        report.warnings.append(
            f"{WORSE_FIT} the {split_name} examples worse: ECE {report.before.ece:.3f} → "
            f"{report.after.ece:.3f}, Brier {report.before.brier:.3f} → "
            f"{report.after.brier:.3f}. Keep the calibration you have (or none) and collect "
            "more labelled examples or audits before fitting again"
        )
        logger.warning("agentbranch.calibration: %s", report.warnings[-1])
    return report


def _report(
    scored: list[Scored],
    calibration: Calibration,
    target_precision: float,
    *,
    n_fit: int,
    held_out: bool,
) -> Report:
    """``calibration`` measured on ``scored``: metrics before and after, per question,
    the held-out thresholds, and the calibration's bound warnings."""
    after = calibrated(scored, calibration)
    per_question: dict[str, tuple[Metrics, Metrics]] = {}
    thresholds: dict[str, SuggestedThreshold] = {}
    for question_id in dict.fromkeys(s.question_id for s in scored):
        b = [s for s in scored if s.question_id == question_id]
        a = [s for s in after if s.question_id == question_id]
        per_question[question_id] = (
            metrics(b, target_precision=target_precision),
            metrics(a, target_precision=target_precision),
        )
        stored = calibration.thresholds.get(question_id)
        thresholds[question_id] = check_threshold(a, stored, target_precision)
    return Report(
        calibration=calibration,
        before=metrics(scored, target_precision=target_precision),
        after=metrics(after, target_precision=target_precision),
        per_question=per_question,
        held_out_thresholds=thresholds,
        n_fit=n_fit,
        n_eval=len(scored),
        held_out=held_out,
        eval_before=scored,
        eval_after=after,
        warnings=bound_warnings(calibration),
    )


def _check_settings(target_precision: float, min_examples: int) -> None:
    if not (isinstance(target_precision, int | float) and 0.0 < target_precision <= 1.0):
        raise ConfigurationError(f"target_precision must be in (0, 1], got {target_precision!r}")
    if isinstance(min_examples, bool) or not isinstance(min_examples, int) or min_examples < 1:
        raise ConfigurationError(f"min_examples must be a whole number >= 1, got {min_examples!r}")


def evaluate(
    engine: Engine,
    examples: Sequence[Example],
    calibration: Calibration | None,
    *,
    target_precision: float = 0.9,
    progress: Callable[[int], None] | None = None,
) -> Report:
    """Score an existing ``calibration`` (``None``: the engine's own) on ``examples``
    without fitting anything: metrics of the raw reads (before) and of the calibrated
    ones (after), and the calibration's stored thresholds checked on them."""
    _check_settings(target_precision, 1)
    calibration = calibration if calibration is not None else engine.calibration
    calibration = calibration if calibration is not None else Calibration()
    scored = read_examples(engine, examples, progress=progress)
    report = _report(scored, calibration, target_precision, n_fit=0, held_out=True)
    if report.worse:
        report.warnings.append(
            f"this calibration makes these examples worse than the raw reads: ECE "
            f"{report.before.ece:.3f} → {report.after.ece:.3f}, Brier "
            f"{report.before.brier:.3f} → {report.after.brier:.3f}; refit it on labels like "
            "these"
        )
    return report


def calibrate(
    engine: Engine,
    examples: Sequence[Example],
    *,
    by: By = "question",
    holdout: float = 0.3,
    target_precision: float = 0.9,
    seed: int = 0,
    min_examples: int = 10,
    progress: Callable[[int], None] | None = None,
) -> Report:
    """Read ``examples`` with ``engine`` (uncalibrated, batched), fit temperatures on a
    split and report before/after on the held-out part."""
    _check_settings(target_precision, min_examples)
    fit_ex, test_ex = split(examples, holdout, seed=seed)
    scored = read_examples(engine, list(fit_ex) + list(test_ex), progress=progress)
    return calibrate_scored(
        scored[: len(fit_ex)],
        scored[len(fit_ex) :] or None,
        by=by,
        target_precision=target_precision,
        min_examples=min_examples,
    )
