"""LangGraph routers and nodes answered by the decision engine (public import path).

The code lives in ``agentbranch.integrations.langgraph``, with the other integrations;
this module is the path users import from (docs/langgraph.md).
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
    __all__,
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
