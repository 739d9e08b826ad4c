"""Calibration the engine applies: a temperature per question id (or per type).

``p_i ∝ p̃_i^(1/T)`` where ``p̃`` are the reader's label probabilities; ``T > 1``
flattens an over-confident reader, ``T < 1`` sharpens an under-confident one. Fitting
lives in ``agentbranch.calibrate``; this module is what a saved file loads into.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field


class Calibration(BaseModel):
    """Temperatures by question id, then by question type, else ``default``."""

    temperatures: dict[str, float] = Field(default_factory=dict)
    by_type: dict[str, float] = Field(default_factory=dict)
    default: float = 1.0
    #: Suggested confidence thresholds by question id (from ``agentbranch calibrate``).
    thresholds: dict[str, float] = Field(default_factory=dict)

    def temperature(self, question_id: str, question_type: str) -> float:
        """The temperature for one question."""
        if question_id in self.temperatures:
            return self.temperatures[question_id]
        return self.by_type.get(question_type, self.default)

    def save(self, path: str | Path) -> Path:
        """Write as JSON."""
        path = Path(path)
        path.write_text(json.dumps(self.model_dump(), indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """Read a file written by ``save`` (or ``agentbranch calibrate``)."""
        return cls.model_validate_json(Path(path).read_text())
