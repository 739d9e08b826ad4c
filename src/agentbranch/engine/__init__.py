"""The decision engine: label slots, canvas/prompt building, readers, batching, calibration."""

from agentbranch.core.reads import LabelRead, QuestionSpec, ReadRequest, SlotLogprobs, TokenRead
from agentbranch.engine.calibration import Calibration
from agentbranch.engine.engine import DecisionEngine

__all__ = [
    "Calibration",
    "DecisionEngine",
    "LabelRead",
    "QuestionSpec",
    "ReadRequest",
    "SlotLogprobs",
    "TokenRead",
]
