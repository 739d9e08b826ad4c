"""Agent middleware for LangChain's ``create_agent`` (public import path).

``ToolGateMiddleware`` gates tool calls on a measured yes/no decision;
``ToolSelectorMiddleware`` picks the tools to bind with one read. The code lives in
``agentbranch.integrations.middleware``; this package is the path users import from
(docs/langchain.md). It needs the ``langchain`` package (``pip install
'agentbranch[agents]'``).
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
