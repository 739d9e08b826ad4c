"""LangChain surfaces answered by the decision engine (public import path; the code lives
in ``agentbranch.integrations.langchain``; docs/langchain.md).
"""

from typing import Any

from agentbranch.integrations import langchain as _langchain
from agentbranch.integrations.langchain import (  # noqa: F401 - re-exported
    AgentBranchDecisionModel,
    AgentBranchError,
    InvalidQuestionError,
    Resolver,
    __all__,
    aemit_all,
    decision_tool,
    emit_all,
    render_state,
    summarize,
    validate_questions,
)


def __getattr__(name: str) -> Any:
    # ToolGateMiddleware and ToolSelectorMiddleware, imported on first use.
    return getattr(_langchain, name)
