"""LangGraph routers and nodes answered by the decision engine (public import path).

The code lives in ``agentbranch.integrations.langgraph``, with the other integrations;
this module is the path users import from (docs/langgraph.md). ``decide_first`` puts
the engine in front of a router the graph already has (``integrations.router_first``).
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
