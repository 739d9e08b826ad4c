"""The LangGraph and LangChain integrations: routers and nodes, the decision chat model
and tool, the agent middleware, and where decision records are emitted.

Users import them from ``agentbranch.langgraph``, ``agentbranch.langchain`` and
``agentbranch.middleware``; the code lives here.
"""

__all__: list[str] = []
