"""agentbranch: LangGraph agents branch on typed, measured decisions.

>>> import agentbranch as ab
>>> engine = ab.DecisionEngine(reader=ab.ScriptedReader({"urgent": {"yes": 0.9, "no": 0.1}}))
>>> engine.decide("Production is down!", {"urgent": ab.yes_no("Is this urgent?")})["urgent"].label
'yes'
"""

import logging
from typing import Any

from agentbranch.core.decisions import Decision, Decisions
from agentbranch.core.errors import (
    AgentBranchError,
    ConfigurationError,
    FallbackError,
    InvalidFileError,
    InvalidQuestionError,
    InvalidReadError,
    InvalidStateError,
    LabelTokenError,
    ReaderError,
    ReaderTimeoutError,
    SpecialTokenError,
    StateTooLongError,
)
from agentbranch.core.questions import any_of, choice, score, yes_no
from agentbranch.engine.batching import BatchingReader
from agentbranch.engine.calibration import Calibration
from agentbranch.engine.engine import DecisionEngine
from agentbranch.engine.readers.base import Reader
from agentbranch.engine.readers.scripted import ScriptedReader
from agentbranch.policy import (
    Audit,
    Earned,
    FailClosed,
    FailOpen,
    Generate,
    GotoNode,
    MoreDraws,
    Policy,
)

# A library is silent unless the application configures logging (see agentbranch.core._telemetry).
logging.getLogger("agentbranch").addHandler(logging.NullHandler())

__all__ = [
    "AgentBranchDecisionModel",
    "AgentBranchError",
    "Audit",
    "BatchingReader",
    "Calibration",
    "ConfigurationError",
    "Decision",
    "DecisionEngine",
    "Decisions",
    "Earned",
    "EmbeddedReader",
    "FailClosed",
    "FailOpen",
    "FallbackError",
    "Generate",
    "GotoNode",
    "InvalidFileError",
    "InvalidQuestionError",
    "InvalidReadError",
    "InvalidStateError",
    "LabelTokenError",
    "LocalChatModel",
    "MoreDraws",
    "Policy",
    "Reader",
    "ReaderError",
    "RemoteReader",
    "ReaderTimeoutError",
    "ScriptedReader",
    "SpecialTokenError",
    "StateTooLongError",
    "TransformersReader",
    "VLLMReader",
    "any_of",
    "choice",
    "decide_first",
    "decision_tool",
    "local_generator",
    "score",
    "smollm2",
    "use_meter_provider",
    "use_tracer_provider",
    "yes_no",
]


_LAZY = {
    # Heavy dependencies (torch, langchain tools) load on first use.
    "TransformersReader": "agentbranch.engine.readers.transformers",
    "EmbeddedReader": "agentbranch.engine.readers.embedded",
    "VLLMReader": "agentbranch.engine.readers.vllm",
    "RemoteReader": "agentbranch.engine.readers.remote",
    "AgentBranchDecisionModel": "agentbranch.integrations.langchain",
    "decision_tool": "agentbranch.integrations.langchain",
    # the engine in front of a router a graph already has (docs/langgraph.md)
    "decide_first": "agentbranch.langgraph",
    "LocalChatModel": "agentbranch.integrations.local_chat",
    "local_generator": "agentbranch.integrations.local_chat",
    "smollm2": "agentbranch.engine.readers.smollm2",
    # metrics through OpenTelemetry's API (docs/metrics.md)
    "use_meter_provider": "agentbranch.core._telemetry",
    "use_tracer_provider": "agentbranch.core._telemetry",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":  # read on demand: importlib.metadata is not free at import
        from agentbranch.core._telemetry import package_version

        return package_version()
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agentbranch' has no attribute {name!r}")
