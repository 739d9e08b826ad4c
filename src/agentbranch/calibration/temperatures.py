"""Temperature fitting: one temperature per question (or question type) minimising NLL;
``fit`` returns the ``Calibration`` the engine applies (``p_i ∝ p̃_i^(1/T)``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from agentbranch.calibration.measures import nll
from agentbranch.calibration.scored import Scored
from agentbranch.core.errors import ConfigurationError
from agentbranch.engine.calibration import Calibration, golden_section
from agentbranch.engine.plan import normalise

__all__ = ["By", "apply_temperature", "calibrated", "fit", "fit_temperature"]

By = Literal["question", "type"]

#: The temperature search range of ``fit_temperature``.
T_LOW, T_HIGH = 0.02, 50.0


def apply_temperature(probs: Sequence[float], temperature: float) -> list[float]:
    """``p_i ∝ p_i^(1/T)``, exactly as the engine applies a ``Calibration``."""
    return normalise(probs, temperature) or [1.0 / len(probs)] * len(probs)


def fit_temperature(
    scored: Sequence[Scored], *, low: float = T_LOW, high: float = T_HIGH, tol: float = 1e-4
) -> float:
    """The temperature minimising NLL: a log-spaced grid, then golden-section search
    around the best grid point. 1.0 when there is nothing to fit."""
    if not scored:
        return 1.0
    a, b = math.log(low), math.log(high)
    grid = [a + (b - a) * i / 60 for i in range(61)]
    losses = [nll(scored, math.exp(x)) for x in grid]
    if max(losses) - min(losses) < 1e-9:
        return high  # uniform reads: no signal, nothing a temperature can sharpen
    best = min(range(len(grid)), key=losses.__getitem__)
    lo, hi = golden_section(
        lambda x: nll(scored, math.exp(x)),
        grid[max(0, best - 1)],
        grid[min(len(grid) - 1, best + 1)],
        tol=tol,
    )
    x = (lo + hi) / 2
    return math.exp(x) if nll(scored, math.exp(x)) <= losses[best] else math.exp(grid[best])


def fit(scored: Sequence[Scored], *, by: By = "question", min_examples: int = 10) -> Calibration:
    """A ``Calibration``: a temperature per question type, and with ``by="question"`` one
    per question id that has at least ``min_examples`` examples (others use their type's)."""
    if by not in ("question", "type"):
        raise ConfigurationError("by must be 'question' or 'type'")
    by_type: dict[str, list[Scored]] = defaultdict(list)
    by_id: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        by_type[s.type].append(s)
        by_id[s.question_id].append(s)
    calibration = Calibration(by_type={t: fit_temperature(g) for t, g in by_type.items()})
    if by == "question":
        calibration.temperatures = {
            q: fit_temperature(g) for q, g in by_id.items() if len(g) >= min_examples
        }
    return calibration


def calibrated(scored: Sequence[Scored], calibration: Calibration | None) -> list[Scored]:
    """``scored`` with the calibration's temperatures applied."""
    if calibration is None:
        return list(scored)
    temperature = calibration.temperature
    return [
        replace(s, probs=tuple(apply_temperature(s.probs, temperature(s.question_id, s.type))))
        for s in scored
    ]
