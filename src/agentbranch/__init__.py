"""agentbranch: LangGraph agents branch on typed, measured decisions.

>>> import agentbranch as ab
>>> engine = ab.DecisionEngine(reader=ab.ScriptedReader({"urgent": {"yes": 0.9, "no": 0.1}}))
>>> engine.decide("Production is down!", {"urgent": ab.yes_no("Is this urgent?")})["urgent"].label
'yes'
"""

from typing import Any

from agentbranch.decisions import Decision, Decisions
from agentbranch.engine.calibration import Calibration
from agentbranch.engine.engine import DecisionEngine
from agentbranch.engine.readers.base import Reader
from agentbranch.engine.readers.scripted import ScriptedReader
from agentbranch.errors import (
    AgentBranchError,
    ConfigurationError,
    InvalidQuestionError,
    InvalidStateError,
    LabelTokenError,
    ReaderError,
    ReaderTimeoutError,
    SpecialTokenError,
    StateTooLongError,
)
from agentbranch.questions import choice, score, yes_no

__all__ = [
    "AgentBranchError",
    "Calibration",
    "ConfigurationError",
    "Decision",
    "DecisionEngine",
    "Decisions",
    "InvalidQuestionError",
    "InvalidStateError",
    "LabelTokenError",
    "Reader",
    "ReaderError",
    "ReaderTimeoutError",
    "ScriptedReader",
    "SpecialTokenError",
    "StateTooLongError",
    "TransformersReader",
    "choice",
    "score",
    "yes_no",
]


def __getattr__(name: str) -> Any:
    # Readers with heavy dependencies load on first use.
    if name == "TransformersReader":
        from agentbranch.engine.readers.transformers import TransformersReader

        return TransformersReader
    raise AttributeError(f"module 'agentbranch' has no attribute {name!r}")
