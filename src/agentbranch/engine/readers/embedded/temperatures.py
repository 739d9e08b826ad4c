"""The temperatures of the embedded reader's softmax: the shipped per-type values
(``embedded_temperatures.json``), and fitting one by maximum likelihood (leave-one-out on
a question's examples, as the posterior mode around the shipped value)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from agentbranch.core.errors import ConfigurationError
from agentbranch.engine.calibration import golden_section

__all__ = [
    "OBJECTIVE",
    "PRIOR_WEIGHT",
    "fit_temperature",
    "log_softmax",
    "shipped_temperatures",
    "temperature_file",
    "top_label_log_likelihood",
]

#: Bounds of every temperature this reader fits (on the similarity scale).
T_MIN, T_MAX = 0.005, 1.0


#: How many leave-one-out reads the shipped with-examples temperature is worth as a
#: prior (chosen on the benchmark's fit parts, over 5 draws of examples, with each
#: question's prior fitted on the other questions; see docs/quality.md).
PRIOR_WEIGHT = 3.0
#: What the with-examples temperatures (shipped and leave-one-out) minimise: the log
#: loss of the top answer's probability (``top_label_log_likelihood``; the NLL leaves
#: tone scores under-confident in their top answer; docs/quality.md).
OBJECTIVE = "top_label"


def temperature_file() -> Path:
    return Path(__file__).with_name("embedded_temperatures.json")


def shipped_temperatures(with_examples: bool = False) -> dict[str, float]:
    """The per-type temperatures fitted on public labelled data
    (``benchmarks/embedded_calibration.py``; see docs/quality.md): for questions read
    by descriptions, or (``with_examples=True``) for questions with examples."""
    data = json.loads(temperature_file().read_text())
    key = "with_examples" if with_examples else "by_type"
    return {k: float(v) for k, v in data[key].items()}


def log_softmax(scores: Sequence[float], temperature: float) -> list[float]:
    """``log_softmax(scores / temperature)``."""
    scaled = [x / temperature for x in scores]
    top = max(scaled)
    log_z = top + math.log(sum(math.exp(x - top) for x in scaled))
    return [x - log_z for x in scaled]


def top_label_log_likelihood(row: Sequence[float], target: int, temperature: float) -> float:
    """Log-likelihood of whether the top answer of ``softmax(row / temperature)`` is
    ``target``: ``log p_top`` when it is, ``log(1 − p_top)`` when it is not (the log
    loss of the confidence in the top answer, what ECE and thresholds look at). For
    two options it is the log-likelihood of ``target``."""
    logp = log_softmax(row, temperature)
    top = max(range(len(logp)), key=logp.__getitem__)
    if top == target:
        return logp[top]
    rest = [x for i, x in enumerate(logp) if i != top]
    high = max(rest)
    return high + math.log(sum(math.exp(x - high) for x in rest))


def fit_temperature(
    rows: Sequence[Sequence[float]],
    targets: Sequence[int],
    lo: float = T_MIN,
    hi: float = T_MAX,
    prior: float | None = None,
    prior_weight: float = 1.0,
    objective: str = "nll",
) -> float:
    """The temperature in ``[lo, hi]`` minimising the mean NLL of ``targets`` under
    ``softmax(row / T)`` (golden-section search on log T; the NLL is unimodal in it).

    ``objective="top_label"``: minimise instead the log loss of the top answer's
    probability as a forecast of its being right (``top_label_log_likelihood``; the
    same as the NLL with two options). With three or more options a temperature
    cannot make both the top probability and the split of the rest right when the
    wrong answers are confused evenly (tone); the NLL then trades the top answer's
    calibration for the rest's.

    ``prior``: a temperature to shrink towards, by a penalty
    ``prior_weight × (log T/prior)² / n`` (a Gaussian prior on log T worth about
    ``prior_weight`` observations): a few examples that separate perfectly would
    otherwise fit T at its lower bound and read over-confidently, and a few that fail
    to separate by chance at its upper bound."""
    if objective not in ("nll", "top_label"):
        raise ConfigurationError(f"objective must be 'nll' or 'top_label', not {objective!r}")
    n = max(1, len(rows))

    def log_lik(r: Sequence[float], y: int, t: float) -> float:
        return (
            top_label_log_likelihood(r, y, t) if objective == "top_label" else log_softmax(r, t)[y]
        )

    def nll(log_t: float) -> float:
        t = math.exp(log_t)
        value = -sum(log_lik(r, y, t) for r, y in zip(rows, targets)) / n
        if prior is not None:
            value += prior_weight * (log_t - math.log(prior)) ** 2 / n
        return value

    a, b = math.log(lo), math.log(hi)
    if objective == "top_label":
        # Not always unimodal in log T (each read's loss is monotone, the sum need not
        # be): bracket the best of a coarse grid first.
        grid = [a + (b - a) * i / 40 for i in range(41)]
        i = min(range(41), key=lambda k: nll(grid[k]))
        a, b = grid[max(0, i - 1)], grid[min(40, i + 1)]
    a, b = golden_section(nll, a, b, steps=60)
    best = (a + b) / 2
    # The ends are candidates too (a monotone NLL sits on a bound).
    return math.exp(min((nll(x), x) for x in (best, math.log(lo), math.log(hi)))[1])
