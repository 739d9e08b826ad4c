"""The whole job: ``calibrate`` (read, split, fit, measure on the held-out part),
``calibrate_scored`` (on examples already read) and ``evaluate`` (fit nothing).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agentbranch.calibration.labelled import Example, split
from agentbranch.calibration.measures import check_threshold, metrics
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
    for question_id, group in _by_question(calibrated(fit_scored, calibration)).items():
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
        report.warnings.append(
            f"{WORSE_FIT} the {'held-out' if held_out else 'fitted'} examples worse: "
            f"{_change(report)}. Keep the calibration you have (or none) and collect "
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
    measured = functools.partial(metrics, target_precision=target_precision)
    before_by, after_by = _by_question(scored), _by_question(after)
    return Report(
        calibration=calibration,
        before=measured(scored),
        after=measured(after),
        per_question={q: (measured(b), measured(after_by[q])) for q, b in before_by.items()},
        held_out_thresholds={
            q: check_threshold(a, calibration.thresholds.get(q), target_precision)
            for q, a in after_by.items()
        },
        n_fit=n_fit,
        n_eval=len(scored),
        held_out=held_out,
        eval_before=scored,
        eval_after=after,
        warnings=bound_warnings(calibration),
    )


def _by_question(scored: Sequence[Scored]) -> dict[str, list[Scored]]:
    """``scored`` grouped by question id, in order of first appearance."""
    out: dict[str, list[Scored]] = {}
    for s in scored:
        out.setdefault(s.question_id, []).append(s)
    return out


def _change(report: Report) -> str:
    """``ECE before → after, Brier before → after`` of ``report``."""
    b, a = report.before, report.after
    return f"ECE {b.ece:.3f} → {a.ece:.3f}, Brier {b.brier:.3f} → {a.brier:.3f}"


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
    calibration = calibration or engine.calibration or Calibration()
    scored = read_examples(engine, examples, progress=progress)
    report = _report(scored, calibration, target_precision, n_fit=0, held_out=True)
    if report.worse:
        report.warnings.append(
            "this calibration makes these examples worse than the raw reads: "
            f"{_change(report)}; refit it on labels like these"
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
