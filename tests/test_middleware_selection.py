"""ToolSelectorMiddleware in real create_agent graphs: the model call binds the selected
tools only; below the confidence floor every tool is kept; records in state and stream."""

from __future__ import annotations

import asyncio

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError, ReaderError
from agentbranch.langchain import ToolSelectorMiddleware

BOUND: list[list[str]] = []


class Recorder(GenericFakeChatModel):
    """A fake chat model that records the tools each call binds."""

    def bind_tools(self, tools, **kwargs):
        BOUND.append([t.name for t in tools])
        return self


@tool
def get_weather(city: str) -> str:
    """Today's weather forecast for a city."""
    return "sunny"


@tool
def search_flights(origin: str, destination: str) -> str:
    """Search flights between two airports."""
    return "AF123"


@tool
def convert_currency(amount: float, to: str) -> str:
    """Convert an amount of money into another currency."""
    return "12 EUR"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return "sent"


TOOLS = [get_weather, search_flights, convert_currency, send_email]


def run(selector, text="Any flights from Paris to Oslo tomorrow?", *, stream=False):
    BOUND.clear()
    model = Recorder(messages=iter([AIMessage("ok")]))
    agent = create_agent(model, tools=TOOLS, middleware=[selector])
    inputs = {"messages": [HumanMessage(text)]}
    if not stream:
        return agent.invoke(inputs), []
    events, final = [], None
    for mode, chunk in agent.stream(inputs, stream_mode=["custom", "values"]):
        if mode == "custom":
            events.append(chunk["agentbranch.decision"])
        else:
            final = chunk
    return final, events


def engine(script, **kw):
    reader = ab.ScriptedReader(script, **kw)
    return ab.DecisionEngine(reader), reader


def sure(option, p=0.97):
    def dist(state, q):
        rest = (1 - p) / (len(q.options) - 1)
        return {o: (p if o == option else rest) for o in q.options}

    return dist


def test_choice_binds_the_chosen_tool_only():
    eng, reader = engine({"tool": sure("search_flights")})
    out, events = run(ToolSelectorMiddleware(eng), stream=True)
    assert BOUND == [["search_flights"]]
    sel = out["tool_selection"]
    assert sel["selected"] == ["search_flights"] and not sel["kept_all"]
    rec = sel["decisions"]["tool"]
    assert rec["label"] == "search_flights" and rec["band"] == "take"
    assert events == [rec]  # the record is streamed once
    (request,) = reader.calls[0]
    assert request.state == "human: Any flights from Paris to Oslo tomorrow?"
    (spec,) = request.questions
    assert spec.options == ("get_weather", "search_flights", "convert_currency", "send_email")
    assert "Search flights between two airports." in spec.descriptions


def test_choice_max_tools_and_always_include():
    def dist(state, q):
        return {"search_flights": 0.6, "convert_currency": 0.3, "get_weather": 0.1}

    eng, reader = engine({"tool": dist})
    run(ToolSelectorMiddleware(eng, max_tools=2, always_include=["send_email"], min_confidence=0.1))
    assert BOUND == [["search_flights", "convert_currency", "send_email"]]
    assert "send_email" not in reader.calls[0][0].questions[0].options


def test_max_tools_binds_only_the_tools_the_read_supports():
    # max_tools is a cap, not a quota: a tool after the top one is bound only when the
    # read gives it at least min_probability (0.1 by default); never one at p = 0.00.
    def dist(state, q):
        return {"search_flights": 0.85, "convert_currency": 0.12, "get_weather": 0.03}

    eng, _ = engine({"tool": dist})
    out, _ = run(ToolSelectorMiddleware(eng, max_tools=4, min_confidence=0.0))
    assert BOUND == [["search_flights", "convert_currency"]]
    assert out["tool_selection"]["selected"] == ["search_flights", "convert_currency"]
    run(ToolSelectorMiddleware(eng, max_tools=4, min_confidence=0.0, min_probability=0.2))
    assert BOUND == [["search_flights"]]
    run(ToolSelectorMiddleware(eng, max_tools=4, min_confidence=0.0, min_probability=0.0))
    assert BOUND == [[t.name for t in TOOLS]]  # 0.0: every tool, the old quota
    with pytest.raises(ConfigurationError, match="min_probability"):
        ToolSelectorMiddleware(eng, min_probability=1.5)


def test_uncertain_choice_keeps_every_tool():
    eng, _ = engine({})  # uniform: confidence 0
    out, _ = run(ToolSelectorMiddleware(eng, min_confidence=0.5))
    assert BOUND == [[t.name for t in TOOLS]]
    sel = out["tool_selection"]
    assert sel["kept_all"] and sel["decisions"]["tool"]["band"] == "fallback"
    assert sel["decisions"]["tool"]["fallback"] == {"kind": "keep_tools", "floor": 0.5}


def test_yes_no_one_joint_read_binds_the_yes_tools():
    def needed(state, q):
        return (
            {"yes": 0.97, "no": 0.03}
            if q.id in ("tools/search_flights", "tools/get_weather")  # (the AnyOf's members)
            else {
                "yes": 0.03,
                "no": 0.97,
            }
        )

    eng, reader = engine({}, default=needed)
    out, _ = run(ToolSelectorMiddleware(eng, mode="yes_no"))
    assert BOUND == [["get_weather", "search_flights"]]
    assert len(reader.calls) == 1 and len(reader.calls[0]) == 1  # one read ...
    assert len(reader.calls[0][0].questions) == 4  # ... one yes/no per tool
    assert set(out["tool_selection"]["decisions"]) == {t.name for t in TOOLS}


def test_yes_no_keeps_uncertain_tools_and_caps_by_probability():
    def needed(state, q):
        return {
            "search_flights": {"yes": 0.99, "no": 0.01},
            "get_weather": {"yes": 0.6, "no": 0.4},  # unsure: kept
        }.get(q.id.removeprefix("tools/"), {"yes": 0.01, "no": 0.99})

    eng, _ = engine({}, default=needed)
    run(ToolSelectorMiddleware(eng, mode="yes_no"))
    assert BOUND == [["get_weather", "search_flights"]]
    run(ToolSelectorMiddleware(eng, mode="yes_no", max_tools=1))
    assert BOUND == [["search_flights"]]


def test_yes_no_tools_are_one_any_of_question_under_a_policy():
    from _lg_fixtures import StrictFakeChat

    from agentbranch.policy import Generate, Policy

    def needed(state, q):
        return {
            "tools/search_flights": {"yes": 0.99, "no": 0.01},
            "tools/get_weather": {"yes": 0.6, "no": 0.4},  # unsure: the teacher answers
        }.get(q.id, {"yes": 0.01, "no": 0.99})

    teacher = StrictFakeChat(replies=['{"label": "no"}'])
    eng, _ = engine({}, default=needed)
    policy = Policy(take_at=0.5, fallbacks=[Generate(teacher)])
    out, _ = run(ToolSelectorMiddleware(eng, mode="yes_no", policy=policy))
    assert BOUND == [["search_flights"]] and teacher.calls == 1
    weather = out["tool_selection"]["decisions"]["get_weather"]
    assert (weather["question_id"], weather["band"]) == ("tools/get_weather", "fallback")
    assert (weather["engine_label"], weather["label"], weather["decided_by"]) == (
        "yes",
        "no",
        "fallback",
    )
    with pytest.raises(ConfigurationError, match="policy= is a Policy for yes_no mode"):
        ToolSelectorMiddleware(eng, policy=policy)
    reviewed = Policy(take_at=0.5, review_below=0.5)
    with pytest.raises(ConfigurationError, match="cannot have a review band"):
        ToolSelectorMiddleware(eng, mode="yes_no", policy=reviewed)


def test_engine_errors_raise_or_keep_all():
    eng, _ = engine({}, error=RuntimeError("down"))
    with pytest.raises(ReaderError):
        run(ToolSelectorMiddleware(eng))
    out, _ = run(ToolSelectorMiddleware(eng, on_error="all"))
    assert BOUND == [[t.name for t in TOOLS]]
    assert out["tool_selection"]["kept_all"] and "down" in out["tool_selection"]["error"]


def test_async_selection():
    eng, _ = engine({"tool": sure("get_weather")})
    BOUND.clear()
    agent = create_agent(
        Recorder(messages=iter([AIMessage("ok")])),
        tools=TOOLS,
        middleware=[ToolSelectorMiddleware(eng)],
    )
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Rain in Oslo?")]}))
    assert BOUND == [["get_weather"]]
    assert out["tool_selection"]["selected"] == ["get_weather"]


def test_selector_configuration_errors():
    eng, _ = engine({})
    with pytest.raises(ConfigurationError, match="mode"):
        ToolSelectorMiddleware(eng, mode="vote")
    with pytest.raises(ConfigurationError, match="max_tools"):
        ToolSelectorMiddleware(eng, max_tools=0)
    with pytest.raises(ConfigurationError, match="name"):
        ToolSelectorMiddleware(eng, mode="yes_no", instructions="Is this tool needed?")
    with pytest.raises(ConfigurationError, match="always_include"):
        run(ToolSelectorMiddleware(eng, always_include=["nope"]))


def test_agentbranch_langchain_does_not_import_langchain_agents_until_asked():
    import subprocess
    import sys

    code = (
        "import sys, agentbranch.langchain as m; "
        "assert 'langchain.agents' not in sys.modules; "
        "m.ToolGateMiddleware; assert 'langchain.agents' in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
