"""Calibration: fit temperatures on labelled examples, measure, suggest thresholds
(docs/calibration.md). This package fits a ``Calibration``; the engine applies it
(``agentbranch.engine.calibration``). Every public name is importable from here.
"""

from __future__ import annotations

from agentbranch.calibration.diagram import reliability_diagram
from agentbranch.calibration.labelled import (
    EXPECTED_SHAPES,
    STATE_KEYS,
    Example,
    ExampleLine,
    HeaderLine,
    load_labelled,
    parse_labelled,
    split,
)
from agentbranch.calibration.measures import (
    Metrics,
    SuggestedThreshold,
    brier,
    check_threshold,
    ece,
    metrics,
    nll,
    suggest_threshold,
)
from agentbranch.calibration.report import Report, bound_warnings
from agentbranch.calibration.run import WORSE_FIT, calibrate, calibrate_scored, evaluate
from agentbranch.calibration.scored import Scored, read_examples
from agentbranch.calibration.temperatures import (
    T_HIGH,
    T_LOW,
    By,
    apply_temperature,
    calibrated,
    fit,
    fit_temperature,
)

__all__ = [
    "EXPECTED_SHAPES",
    "STATE_KEYS",
    "T_HIGH",
    "T_LOW",
    "WORSE_FIT",
    "By",
    "Example",
    "ExampleLine",
    "HeaderLine",
    "Metrics",
    "Report",
    "Scored",
    "SuggestedThreshold",
    "apply_temperature",
    "bound_warnings",
    "brier",
    "calibrate",
    "calibrate_scored",
    "calibrated",
    "check_threshold",
    "ece",
    "evaluate",
    "fit",
    "fit_temperature",
    "load_labelled",
    "metrics",
    "nll",
    "parse_labelled",
    "read_examples",
    "reliability_diagram",
    "split",
    "suggest_threshold",
]
