"""The decision engine: label slots, canvas/prompt building, readers, batching, calibration."""

from agentbranch.engine.calibration import Calibration
from agentbranch.engine.engine import DecisionEngine
from agentbranch.engine.reads import LabelRead, QuestionSpec, ReadRequest, SlotLogprobs, TokenRead

__all__ = [
    "Calibration",
    "DecisionEngine",
    "LabelRead",
    "QuestionSpec",
    "ReadRequest",
    "SlotLogprobs",
    "TokenRead",
]
