"""Agent middleware for LangChain's ``create_agent``, answered by the decision engine:
``ToolGateMiddleware`` gates tool calls on a measured yes/no risk decision,
``ToolSelectorMiddleware`` picks the tools a model call binds with one read. They need
the ``langchain`` package (``pip install 'agentbranch[agents]'``).
"""

try:
    import langchain.agents.middleware  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    from agentbranch.core.errors import ConfigurationError

    raise ConfigurationError(
        "agentbranch's agent middleware needs LangChain's create_agent: "
        "pip install 'agentbranch[agents]' (or 'langchain>=1.5')"
    ) from e

from agentbranch.integrations.middleware.gate import (
    DEFAULT_POLICY,
    DEFAULT_QUESTION,
    ReviewResponseError,
    ToolGateMiddleware,
    default_blocked_message,
    render_tool_call,
)
from agentbranch.integrations.middleware.tool_selection import ToolSelectorMiddleware

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_QUESTION",
    "ReviewResponseError",
    "ToolGateMiddleware",
    "ToolSelectorMiddleware",
    "default_blocked_message",
    "render_tool_call",
]
