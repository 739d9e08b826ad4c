"""LangGraph routers and nodes answered by the decision engine (public import path; the
code lives in ``agentbranch.integrations.langgraph`` and ``.router_first``; docs/langgraph.md).
"""

from agentbranch.integrations.langgraph import (  # noqa: F401 - re-exported
    END,
    AgentBranchError,
    CommandNode,
    ConfigurationError,
    DecideNode,
    DecisionRecords,
    DecisionRouter,
    RecordRouter,
    Resolver,
    aemit_all,
    build_path_map,
    check_resumable,
    command_node,
    decide_node,
    emit_all,
    merge_records,
    options_of,
    policy_for,
    review_with_interrupt,
    route,
    validate_questions,
)
from agentbranch.integrations.langgraph import __all__ as _graph_all
from agentbranch.integrations.router_first import (  # noqa: F401 - re-exported
    DecideFirst,
    RouterTeacher,
    ShadowReport,
    decide_first,
)

__all__ = [*_graph_all, "DecideFirst", "ShadowReport", "decide_first"]
