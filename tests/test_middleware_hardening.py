"""Issue 22, middleware: tool calls sharing an id each get a decision and a ToolMessage;
a user message with nothing to read is never selected or gated from (hypothesis, on the
real embedded reader); a review without a checkpointer is a clear error."""

from __future__ import annotations

import uuid
from typing import TypedDict

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError
from agentbranch.core.state import render_state
from agentbranch.langchain import ToolGateMiddleware, ToolSelectorMiddleware
from agentbranch.langgraph import DecisionRecords, decide_node
from agentbranch.policy import GotoNode, Policy
from agentbranch.testing import FakeToolCallingModel

RAN: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a given city."""
    RAN.append(f"get_weather {city}")
    return f"sunny in {city}"


@tool
def shell(cmd: str) -> str:
    """Execute an arbitrary shell command and return its output."""
    RAN.append(f"shell {cmd}")
    return f"ran {cmd}"


@tool
def calculator(expr: str) -> str:
    """Evaluate an arithmetic expression."""
    RAN.append(f"calculator {expr}")
    return "42"


def risk(state: str, q) -> dict[str, float]:
    if "rm -rf" in state:
        return {"yes": 0.98, "no": 0.02}
    if '"ls' in state:
        return {"yes": 0.5, "no": 0.5}
    return {"yes": 0.02, "no": 0.98}


def gated_run(*calls, tools=(get_weather, shell), checkpointer=True, **gate_kwargs):
    RAN.clear()
    engine = ab.DecisionEngine(ab.ScriptedReader({"risky": risk}))
    model = FakeToolCallingModel(responses=[AIMessage("", tool_calls=list(calls)), "done"])
    agent = create_agent(
        model,
        tools=[get_weather, shell, calculator],
        middleware=[ToolGateMiddleware(engine, tools=list(tools), **gate_kwargs)],
        checkpointer=InMemorySaver() if checkpointer else None,
    )
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    out = agent.invoke({"messages": [HumanMessage("Weather in Paris, and tidy up")]}, config)
    return agent, config, out


def results(out) -> list[ToolMessage]:
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


# -- 1. two tool calls sharing one id ----------------------------------------------------


def test_calls_sharing_an_id_each_get_a_decision_and_a_tool_message():
    rm = {"name": "shell", "args": {"cmd": "rm -rf /home/me"}, "id": "dup"}
    weather = {"name": "get_weather", "args": {"city": "Paris"}, "id": "dup"}
    _, _, out = gated_run(rm, weather)
    assert RAN == []  # the blocked call does not run, and neither can its twin
    first, second = results(out)
    assert first.tool_call_id == second.tool_call_id == "dup"
    assert "blocked" in first.content and "risky=yes" in first.content
    assert "same id (dup)" in second.content and second.status == "error"
    records = out["tool_decisions"]
    assert set(records) == {"dup", "dup#2"}  # one record per call, none overwritten
    assert records["dup"]["tool_call"]["args"] == {"cmd": "rm -rf /home/me"}
    assert records["dup"]["label"] == "yes" and records["dup"]["outcome"] == "blocked"
    twin = records["dup#2"]
    assert twin["tool_call"] == {"id": "dup", "name": "get_weather", "args": {"city": "Paris"}}
    assert twin["label"] == "no" and twin["band"] == "take"  # its own decision
    assert twin["outcome"] == "blocked" and twin["shared_id_with"] == "dup"
    assert out["messages"][-1].content == "done"


def test_safe_calls_sharing_an_id_all_run():
    a = {"name": "get_weather", "args": {"city": "Paris"}, "id": "same"}
    b = {"name": "get_weather", "args": {"city": "Oslo"}, "id": "same"}
    _, _, out = gated_run(a, b)
    assert sorted(RAN) == ["get_weather Oslo", "get_weather Paris"]
    assert sorted(m.content for m in results(out)) == ["sunny in Oslo", "sunny in Paris"]
    records = out["tool_decisions"]
    assert [records[k]["tool_call"]["args"]["city"] for k in ("same", "same#2")] == [
        "Paris",
        "Oslo",
    ]
    assert all(r["outcome"] == "run" and "shared_id_with" not in r for r in records.values())


def test_an_unguarded_call_sharing_a_blocked_id_gets_a_tool_message():
    rm = {"name": "shell", "args": {"cmd": "rm -rf /"}, "id": "x"}
    calc = {"name": "calculator", "args": {"expr": "6*7"}, "id": "x"}
    _, _, out = gated_run(rm, calc)
    assert RAN == []
    msgs = results(out)
    assert [m.name for m in msgs] == ["shell", "calculator"]
    assert "same id (x)" in msgs[1].content and msgs[1].status == "error"
    assert set(out["tool_decisions"]) == {"x"}  # the calculator is not gated: no decision


def test_review_of_calls_sharing_an_id_one_action_request_each():
    a = {"name": "shell", "args": {"cmd": "ls"}, "id": "r"}
    b = {"name": "shell", "args": {"cmd": "ls /tmp"}, "id": "r"}
    agent, config, out = gated_run(a, b)
    (intr,) = out["__interrupt__"]
    assert [r["args"] for r in intr.value["action_requests"]] == [
        {"cmd": "ls"},
        {"cmd": "ls /tmp"},
    ]
    edit = {"type": "edit", "edited_action": {"name": "shell", "args": {"cmd": "ls -la"}}}
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}, edit]}), config)
    assert sorted(RAN) == ["shell ls", "shell ls -la"]  # the edit applied to its own call
    records = out["tool_decisions"]
    assert records["r"]["executed"] is None
    assert records["r#2"]["executed"] == {"name": "shell", "args": {"cmd": "ls -la"}}
    # approve one, reject the other: the approved twin cannot run alone
    agent, config, _ = gated_run(a, b)
    decisions = [{"type": "approve"}, {"type": "reject", "message": "no"}]
    out = agent.invoke(Command(resume={"decisions": decisions}), config)
    assert RAN == []
    assert [m.status for m in results(out)] == ["error", "error"]
    assert out["tool_decisions"]["r"]["shared_id_with"] == "r#2"


# -- 2. nothing to read: never selected or gated from -----------------------------------

NOTHING = st.one_of(
    st.sampled_from(["", " ", "\n\n", "?", "...", "!?", "<turn|>", "<|turn>", "</s>", "[SEP]"]),
    st.text(alphabet=" \t\n.,;:!?-_*#()[]{}'\"/\\|~^", max_size=12),
    st.lists(
        st.sampled_from(["<turn|>", "<|im_end|>", "<eos>", "<pad>", " ", "?"]), max_size=4
    ).map("".join),
)


def test_messages_with_nothing_to_read_render_as_the_empty_text():
    assert render_state([HumanMessage("")]) == render_state(HumanMessage(" ?")) == ""
    assert render_state([HumanMessage("<turn|>"), AIMessage("\n")]) == ""
    assert render_state([HumanMessage("hi"), AIMessage("")]) == "human: hi\nai: "
    with_call = AIMessage("", tool_calls=[{"name": "shell", "args": {}, "id": "1"}])
    assert render_state([HumanMessage(""), with_call]) == "human: \nai: [tool call shell {}]"


def test_what_counts_as_nothing_to_read():
    from agentbranch.core.state import has_readable_text

    nothing = ["", " \t\n", "?", "...!?", "🙂🔥", "<turn|>", "<|im_start|><|im_end|>", "</s>"]
    nothing += ["[SEP] [CLS]", "<b></b>", "<end_of_turn>"]
    assert not any(has_readable_text(t) for t in nothing)
    something = ["ok?", "42", "<turn|>hi", "<https://example.com>", "<a@b.c>", "日本", "é"]
    assert all(has_readable_text(t) for t in something)


@pytest.fixture(scope="module")
def embedded():
    return ab.DecisionEngine(ab.EmbeddedReader().load())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=NOTHING)
@example(text="?")
@example(text="<turn|>")
def test_the_embedded_reader_answers_nothing_uniformly_in_every_form(embedded, text):
    q = {"tool": ab.choice("Which tool?", {"get_weather": "Weather", "shell": "Run commands"})}
    for state in (text, HumanMessage(text), [SystemMessage(text), HumanMessage(text)]):
        d = embedded.decide(state, q)["tool"]
        assert d.probabilities == {"get_weather": 0.5, "shell": 0.5}, state


def select(engine, messages, mode, tools=(get_weather, shell)):
    model = FakeToolCallingModel(responses=["ok"])
    agent = create_agent(
        model,
        tools=list(tools),
        middleware=[ToolSelectorMiddleware(engine, mode=mode)],
        system_prompt="You are a helpful assistant.",
    )
    return agent.invoke({"messages": messages})["tool_selection"], model.bound_tools


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(NOTHING, min_size=1, max_size=3), system=st.booleans())
@example(texts=["<turn|>"], system=False)  # shell at 0.96, confidence 0.76 before
@example(texts=["?"], system=True)
@example(texts=[""], system=False)
def test_selector_never_selects_from_nothing(embedded, texts, system):
    messages = [SystemMessage(t) for t in texts[:1] if system]
    messages += [HumanMessage(t) for t in texts]
    for mode in ("choice", "yes_no"):
        selection, bound = select(embedded, messages, mode)
        assert selection["kept_all"] and bound == [["get_weather", "shell"]]
        for rec in selection["decisions"].values():
            assert rec["band"] != "take" and rec["confidence"] == pytest.approx(0.0, abs=1e-9)


def test_selector_with_undescribed_tools_reads_nothing_as_nothing(embedded):
    # Tools with no description: the old read gave `shell` p = 1.00 on an empty message.
    bare = [
        StructuredTool.from_function(lambda city: city, name="get_weather", description=""),
        StructuredTool.from_function(lambda cmd: cmd, name="shell", description=""),
    ]
    selection, _ = select(embedded, [HumanMessage("")], "choice", tools=bare)
    assert selection["kept_all"]
    assert selection["decisions"]["tool"]["probabilities"] == {"get_weather": 0.5, "shell": 0.5}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(NOTHING, max_size=3))
@example(texts=[""])
@example(texts=["<turn|>", "?"])
def test_gate_never_takes_from_nothing(embedded, texts):
    # A gate that reads the conversation only (a custom renderer): nothing in it to read,
    # so the answer is uniform and the uncertain call is blocked, never taken.
    RAN.clear()
    calls = [{"name": "shell", "args": {"cmd": "x"}, "id": "g"}]
    model = FakeToolCallingModel(
        responses=[AIMessage(texts[-1] if texts else "", tool_calls=calls), "done"]
    )
    gate = ToolGateMiddleware(
        embedded,
        tools=[shell],
        policy=Policy(take_at=0.5, fallbacks=[GotoNode("block")]),
        renderer=lambda tool_call, description, context: context,
    )
    agent = create_agent(
        model, tools=[shell], middleware=[gate], system_prompt="You are a careful assistant."
    )
    history = [(HumanMessage if i % 2 == 0 else AIMessage)(t) for i, t in enumerate(texts)]
    out = agent.invoke({"messages": history})
    rec = out["tool_decisions"]["g"]
    assert rec["band"] == "fallback" and rec["outcome"] == "blocked" and RAN == []
    assert rec["confidence"] == pytest.approx(0.0, abs=1e-9)


@given(texts=st.lists(NOTHING, min_size=1, max_size=4))
def test_gate_reads_a_call_alike_whatever_empty_messages_come_with_it(texts):
    # The default renderer: messages with nothing to read add nothing to what is read.
    from agentbranch.middleware import render_tool_call

    call = {"name": "shell", "args": {"cmd": "ls"}, "id": "1"}
    context = [HumanMessage(t) for t in texts]
    assert render_tool_call(call, "Run it.", context) == render_tool_call(call, "Run it.", [])


# -- 5. review without a checkpointer ---------------------------------------------------


def test_review_without_a_checkpointer_is_a_clear_error():
    ls = {"name": "shell", "args": {"cmd": "ls"}, "id": "c"}
    with pytest.raises(ConfigurationError, match="no checkpointer.*InMemorySaver"):
        gated_run(ls, checkpointer=False)
    assert RAN == []
    # without a review band, no checkpointer is needed
    _, _, out = gated_run(
        ls, checkpointer=False, policy=Policy(take_at=0.5, fallbacks=[GotoNode("block")])
    )
    assert out["tool_decisions"]["c"]["outcome"] == "blocked"


def test_async_gate_gives_calls_sharing_an_id_their_own_records():
    import asyncio

    RAN.clear()
    rm = {"name": "shell", "args": {"cmd": "rm -rf /"}, "id": "d"}
    weather = {"name": "get_weather", "args": {"city": "Oslo"}, "id": "d"}
    model = FakeToolCallingModel(responses=[AIMessage("", tool_calls=[rm, weather]), "done"])
    engine = ab.DecisionEngine(ab.ScriptedReader({"risky": risk}))
    agent = create_agent(
        model,
        tools=[get_weather, shell],
        middleware=[ToolGateMiddleware(engine, tools=[get_weather, shell])],
    )
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}))
    assert RAN == [] and [m.status for m in results(out)] == ["error", "error"]
    assert out["tool_decisions"]["d#2"]["shared_id_with"] == "d"


class TicketState(TypedDict, total=False):
    ticket: str
    decisions: DecisionRecords


def test_a_decide_node_review_without_a_checkpointer_is_a_clear_error():
    node = decide_node(
        ab.DecisionEngine(ab.ScriptedReader({"urgent": {"yes": 0.5, "no": 0.5}})),
        {"urgent": ab.yes_no("Urgent?", yes="blocked now", no="can wait")},
        policy=Policy(take_at=0.5, review_below=0.5),
        state_key="ticket",
    )
    graph = StateGraph(TicketState)
    graph.add_node("decide", node)
    graph.add_edge(START, "decide")
    graph.add_edge("decide", END)
    with pytest.raises(ConfigurationError, match="question 'urgent' needs a human review"):
        graph.compile().invoke({"ticket": "hello"})
    config = {"configurable": {"thread_id": "t"}}
    out = graph.compile(checkpointer=InMemorySaver()).invoke({"ticket": "hello"}, config)
    assert out["__interrupt__"][0].value["question_id"] == "urgent"
