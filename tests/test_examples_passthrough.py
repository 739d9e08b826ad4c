"""Questions with examples reach the reader through every layer (ScriptedReader records
the read requests): the engine, LangGraph routers and nodes, the LangChain decision model
and tool."""

import agentbranch as ab
from agentbranch.langchain import AgentBranchDecisionModel, decision_tool
from agentbranch.langgraph import decide_node, route

EXAMPLES = {"yes": ["Production is down"], "no": ["Can I change my avatar?"]}
URGENT = ab.yes_no("Urgent?", examples=EXAMPLES)
WANT = (("Production is down",), ("Can I change my avatar?",))


def reader():
    return ab.ScriptedReader({"urgent": {"yes": 0.9, "no": 0.1}})


def seen(r: ab.ScriptedReader):
    return [q.examples for call in r.calls for req in call for q in req.questions]


def test_langgraph_router_and_decide_node_pass_examples():
    r = reader()
    router = route(ab.DecisionEngine(r), "urgent", URGENT, path_map={"yes": "a", "no": "b"})
    assert router.invoke({"messages": "The site is down"}) == "a"
    node = decide_node(ab.DecisionEngine(r), {"urgent": URGENT.model_dump()})
    node.invoke({"messages": "The site is down"})
    assert seen(r) == [WANT, WANT]


def test_langchain_decision_model_and_tool_pass_examples():
    r = reader()
    model = AgentBranchDecisionModel(engine=ab.DecisionEngine(r))
    response = model.invoke({"state": "The site is down", "questions": {"urgent": URGENT}})
    assert abs(response.nouls["urgent"].noul - 0.9) < 1e-9
    tool = decision_tool(ab.DecisionEngine(r), {"urgent": URGENT})
    tool.invoke({"text": "The site is down"})
    assert seen(r) == [WANT, WANT]
