"""The calibration report (``Report``): metrics before and after a calibration, overall
and per question, with plain warnings (``bound_warnings``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentbranch.calibration.measures import Metrics, SuggestedThreshold
from agentbranch.calibration.scored import Scored
from agentbranch.calibration.temperatures import T_HIGH, T_LOW
from agentbranch.engine.calibration import Calibration

__all__ = ["Report", "bound_warnings"]


@dataclass
class Report:
    """What ``calibrate`` found: the calibration, and metrics before and after it on the
    evaluation split (the held-out split, or the fit split when there is none)."""

    calibration: Calibration
    before: Metrics
    after: Metrics
    per_question: dict[str, tuple[Metrics, Metrics]]
    #: The suggested thresholds (fit split, calibrated) checked on the evaluation split.
    held_out_thresholds: dict[str, SuggestedThreshold]
    n_fit: int
    n_eval: int
    held_out: bool
    eval_before: list[Scored] = field(repr=False, default_factory=list)
    eval_after: list[Scored] = field(repr=False, default_factory=list)
    #: Fits that hit a bound of the temperature search, and a fit that made the
    #: evaluation split worse, said plainly.
    warnings: list[str] = field(default_factory=list)

    @property
    def worse(self) -> bool:
        """Whether the calibration made both ECE and Brier worse on the evaluation split:
        such a fit should not replace the calibration in use (``agentbranch calibrate``
        refuses to save it without ``--force``)."""
        # NaN (no examples) compares False: nothing measured is not "worse".
        return self.after.ece > self.before.ece and self.after.brier > self.before.brier

    def as_dict(self) -> dict[str, Any]:
        return {
            "calibration": self.calibration.model_dump(),
            "warnings": list(self.warnings),
            "worse": self.worse,
            "n_fit": self.n_fit,
            "n_eval": self.n_eval,
            "held_out": self.held_out,
            "before": self.before.as_dict(),
            "after": self.after.as_dict(),
            "per_question": {
                q: {"before": b.as_dict(), "after": a.as_dict()}
                for q, (b, a) in self.per_question.items()
            },
        }


def bound_warnings(calibration: Calibration) -> list[str]:
    """One sentence per fitted temperature at a bound of the search: at the top the
    reader had no signal for that question (every answer gets flattened to uniform),
    at the bottom the fit wanted sharper reads than the search allows."""
    out = []
    fitted = [("question", q, t) for q, t in calibration.temperatures.items()]
    fitted += [("questions of type", q, t) for q, t in calibration.by_type.items()]
    for kind, name, t in fitted:
        if t >= T_HIGH * 0.99:
            out.append(
                f"no signal for {kind} {name!r}: its temperature hit the upper bound "
                f"(T = {T_HIGH:g}), so its answers are flattened to near-uniform. Add "
                "examples or descriptions to the question (or use a stronger reader)"
            )
        elif t <= T_LOW * 1.01:
            out.append(
                f"{kind} {name!r}: temperature hit the lower bound (T = {T_LOW:g}); the "
                "reader is far under-confident there or the labelled set is too easy/small"
            )
    return out
