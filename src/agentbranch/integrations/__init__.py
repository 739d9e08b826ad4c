"""The LangGraph and LangChain integrations: routers and nodes, the decision chat model
and tool, the agent middleware, and where decision records are emitted.

Users import them from ``agentbranch.integrations.langgraph``, ``agentbranch.integrations.langchain`` and
``agentbranch.integrations.middleware``; the code lives here.
"""

__all__: list[str] = []
