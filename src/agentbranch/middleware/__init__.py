"""Agent middleware for LangChain's ``create_agent`` (public import path; the code lives
in ``agentbranch.integrations.middleware``; docs/langchain.md).
"""

from agentbranch.integrations.middleware import (  # noqa: F401 - re-exported
    DEFAULT_POLICY,
    DEFAULT_QUESTION,
    ReviewResponseError,
    ToolGateMiddleware,
    ToolSelectorMiddleware,
    __all__,
    default_blocked_message,
    render_tool_call,
)
