"""ToolGateMiddleware in real create_agent graphs: take / block / human review / fallback,
batched reads, engine errors, records in state and stream, replay from a cassette."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from _lg_fixtures import StrictFakeChat
from langchain.agents import create_agent
from langchain.agents.middleware.human_in_the_loop import HITLRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError, ReaderError
from agentbranch.langchain import ToolGateMiddleware
from agentbranch.middleware import ReviewResponseError
from agentbranch.policy import FailClosed, FailOpen, Generate, GotoNode, Policy
from agentbranch.replay import cassette_reader

RAN: list[str] = []


class Proposer(GenericFakeChatModel):
    """A fake chat model that proposes scripted tool calls (any tools bind)."""

    def bind_tools(self, tools, **kwargs):
        return self


@tool
def get_weather(city: str) -> str:
    """Look up today's weather forecast for a city (read-only)."""
    RAN.append(f"get_weather {city}")
    return f"sunny in {city}"


@tool
def shell(cmd: str) -> str:
    """Run a shell command on the user's machine."""
    RAN.append(f"shell {cmd}")
    return f"ran {cmd}"


@tool
def calculator(expr: str) -> str:
    """Evaluate an arithmetic expression."""
    RAN.append(f"calculator {expr}")
    return "42"


def risk(state: str, q) -> dict[str, float]:
    """Scripted risk reads: rm -rf is risky, ls is a coin flip, the rest is safe."""
    if "rm -rf" in state:
        return {"yes": 0.98, "no": 0.02}
    if '"ls' in state:
        return {"yes": 0.5, "no": 0.5}
    return {"yes": 0.02, "no": 0.98}


def call(name: str, cid: str, **args) -> dict:
    return {"name": name, "args": args, "id": cid}


WEATHER = call("get_weather", "c1", city="Paris")
RM = call("shell", "c2", cmd="rm -rf /home/me")
LS = call("shell", "c3", cmd="ls")
CALC = call("calculator", "c4", expr="6*7")


def agent_for(*tool_calls, reader=None, tools=(get_weather, shell), **gate_kwargs):
    RAN.clear()
    reader = reader or ab.ScriptedReader({"risky": risk})
    engine = ab.DecisionEngine(reader)
    model = Proposer(messages=iter([AIMessage("", tool_calls=list(tool_calls)), AIMessage("done")]))
    gate = ToolGateMiddleware(engine, tools=list(tools), **gate_kwargs)
    agent = create_agent(
        model,
        tools=[get_weather, shell, calculator],
        middleware=[gate],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    return agent, config, reader


def ask(agent, config, text="Weather in Paris, then tidy my home folder"):
    return agent.invoke({"messages": [HumanMessage(text)]}, config)


def tool_messages(out) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}


# -- take: safe runs, risky is blocked ---------------------------------------------------


def test_confident_safe_call_runs():
    agent, config, reader = agent_for(WEATHER)
    out = ask(agent, config)
    assert RAN == ["get_weather Paris"]
    assert tool_messages(out)["c1"].content == "sunny in Paris"
    rec = out["tool_decisions"]["c1"]
    assert (rec["label"], rec["band"], rec["decided_by"], rec["outcome"]) == (
        "no",
        "take",
        "engine",
        "run",
    )
    assert rec["tool_call"] == {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}
    assert out["messages"][-1].content == "done"


def test_confident_risky_call_is_blocked_with_an_error_tool_message():
    agent, config, _ = agent_for(RM)
    out = ask(agent, config)
    assert RAN == []  # the tool never ran
    msg = tool_messages(out)["c2"]
    assert msg.status == "error" and msg.name == "shell"
    assert msg.content.startswith("The tool call `shell` was blocked: the decision engine ")
    assert "risky=yes (p=0.98, confidence 0.86)" in msg.content
    rec = out["tool_decisions"]["c2"]
    assert (rec["label"], rec["outcome"]) == ("yes", "blocked")
    assert msg.artifact["agentbranch.decision"] == rec
    assert msg.additional_kwargs["lc_source"] == "agentbranch_gate"
    assert msg.additional_kwargs["lc_data"] == {"outcome": "blocked", "decided_by": "engine"}
    assert out["messages"][-1].content == "done"  # the model saw the block and answered


def test_the_engine_reads_the_call_its_description_and_the_conversation():
    agent, config, reader = agent_for(RM)
    ask(agent, config, "Please tidy my home folder")
    state = reader.calls[0][0].state
    assert state.splitlines()[:4] == [
        'Proposed tool call: shell({"cmd": "rm -rf /home/me"})',
        "Tool description: Run a shell command on the user's machine.",
        "Conversation (latest last):",
        "human: Please tidy my home folder",
    ]


def test_unguarded_tools_run_without_a_read():
    agent, config, reader = agent_for(CALC, RM)
    out = ask(agent, config)
    assert RAN == ["calculator 6*7"]
    assert set(out["tool_decisions"]) == {"c2"}
    assert len(reader.calls) == 1 and len(reader.calls[0]) == 1


def test_several_calls_of_one_turn_are_one_batched_read():
    calls = [WEATHER, RM, call("get_weather", "c5", city="Oslo")]
    agent, config, reader = agent_for(*calls)
    out = ask(agent, config)
    assert len(reader.calls) == 1  # one decide_many ...
    assert len(reader.calls[0]) == 3  # ... carrying the three calls
    assert sorted(RAN) == ["get_weather Oslo", "get_weather Paris"]
    assert {k: r["outcome"] for k, r in out["tool_decisions"].items()} == {
        "c1": "run",
        "c2": "blocked",
        "c5": "run",
    }


# -- review: LangChain's HITL interrupt shape -----------------------------------------------


def interrupted(out) -> HITLRequest:
    (intr,) = out["__interrupt__"]
    return intr.value


def test_uncertain_call_interrupts_with_a_hitl_request():
    agent, config, reader = agent_for(WEATHER, LS)
    out = ask(agent, config)
    request = interrupted(out)
    assert set(request) == {"action_requests", "review_configs"}
    (action,) = request["action_requests"]
    assert action["name"] == "shell" and action["args"] == {"cmd": "ls"}
    assert "Engine: risky=yes (yes 0.50, no 0.50; confidence 0.00)" in action["description"]
    assert request["review_configs"] == [
        {"action_name": "shell", "allowed_decisions": ["approve", "edit", "reject", "respond"]}
    ]
    assert RAN == []  # nothing runs before the human answers
    assert len(reader.calls) == 1


@pytest.mark.parametrize(
    ("decision", "ran", "content", "status", "outcome"),
    [
        ({"type": "approve"}, ["shell ls"], "ran ls", "success", "run"),
        (
            {"type": "edit", "edited_action": {"name": "shell", "args": {"cmd": "ls -la"}}},
            ["shell ls -la"],
            "ran ls -la",
            "success",
            "run",
        ),
        (
            {"type": "reject", "message": "not now"},
            [],
            "User rejected the tool call for `shell` with reason: not now",
            "error",
            "blocked",
        ),
        ({"type": "respond", "message": "file1 file2"}, [], "file1 file2", "success", "answered"),
    ],
    ids=["approve", "edit", "reject", "respond"],
)
def test_uncertain_call_resumes_with_each_hitl_decision(decision, ran, content, status, outcome):
    agent, config, reader = agent_for(WEATHER, LS)
    ask(agent, config)
    out = agent.invoke(Command(resume={"decisions": [decision]}), config)
    assert sorted(RAN) == sorted(["get_weather Paris", *ran])
    msg = tool_messages(out)["c3"]
    assert (msg.content, msg.status) == (content, status)
    rec = out["tool_decisions"]["c3"]
    assert rec["decided_by"] == "human" and rec["band"] == "review"
    assert rec["review"] == decision and rec["outcome"] == outcome
    assert rec["label"] == ("no" if decision["type"] in ("approve", "edit") else "yes")
    assert out["tool_decisions"]["c1"]["decided_by"] == "engine"
    if decision["type"] == "edit":
        ai = next(m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls)
        assert ai.tool_calls[1]["args"] == {"cmd": "ls -la"}  # the human's call ran
        assert rec["executed"] == {"name": "shell", "args": {"cmd": "ls -la"}}
    assert out["messages"][-1].content == "done"


def test_bad_hitl_responses_are_clear_errors():
    agent, config, _ = agent_for(LS, allowed_decisions=["approve", "reject"])
    ask(agent, config)
    with pytest.raises(ReviewResponseError, match="1 tool call"):
        agent.invoke(Command(resume={"decisions": []}), config)
    agent, config, _ = agent_for(LS, allowed_decisions=["approve", "reject"])
    ask(agent, config)
    with pytest.raises(ReviewResponseError, match="not allowed"):
        agent.invoke(Command(resume={"decisions": [{"type": "respond", "message": "x"}]}), config)
    agent, config, _ = agent_for(LS)
    ask(agent, config)
    with pytest.raises(ReviewResponseError, match="HITLResponse"):
        agent.invoke(Command(resume="yes"), config)


def test_async_review_round_trip():
    agent, config, reader = agent_for(WEATHER, LS)

    async def run():
        out = await agent.ainvoke({"messages": [HumanMessage("go")]}, config)
        assert interrupted(out)["action_requests"][0]["name"] == "shell"
        return await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config)

    out = asyncio.run(run())
    assert sorted(RAN) == ["get_weather Paris", "shell ls"]
    assert out["tool_decisions"]["c3"]["decided_by"] == "human"


# -- fallbacks -------------------------------------------------------------------------------


def test_generate_fallback_resolves_uncertain_calls():
    judge = StrictFakeChat(replies=["no"])
    policy = Policy(take_at=0.5, fallbacks=[Generate(judge)])
    agent, config, _ = agent_for(WEATHER, LS, policy=policy)
    out = ask(agent, config)
    assert "__interrupt__" not in out
    assert sorted(RAN) == ["get_weather Paris", "shell ls"]
    rec = out["tool_decisions"]["c3"]
    assert rec["decided_by"] == "fallback" and rec["label"] == "no"
    assert rec["fallback"]["kind"] == "generate"
    assert judge.calls == 1  # only the uncertain call reached the model
    assert 'shell({"cmd": "ls"})' in judge.prompts[0][1].content


def test_generate_fallback_can_block():
    judge = StrictFakeChat(replies=['{"label": "yes"}'])
    agent, config, _ = agent_for(LS, policy=Policy(take_at=0.5, fallbacks=[Generate(judge)]))
    out = ask(agent, config)
    assert RAN == []
    assert "the fallback model answered risky=yes" in tool_messages(out)["c3"].content


def test_goto_block_blocks_uncertain_calls():
    agent, config, _ = agent_for(LS, policy=Policy(take_at=0.5, fallbacks=[GotoNode("block")]))
    out = ask(agent, config)
    assert RAN == []
    rec = out["tool_decisions"]["c3"]
    assert rec["decided_by"] == "fallback_node" and rec["outcome"] == "blocked"
    assert "uncertain calls are blocked" in tool_messages(out)["c3"].content


# -- engine errors -------------------------------------------------------------------------


def broken():
    return ab.ScriptedReader(error=RuntimeError("reader is down"))


def test_engine_error_raises_by_default():
    agent, config, _ = agent_for(WEATHER, reader=broken())
    with pytest.raises(ReaderError):
        ask(agent, config)
    assert RAN == []


def test_engine_error_fail_open_runs_the_calls():
    agent, config, _ = agent_for(
        WEATHER, RM, reader=broken(), policy=Policy(on_error=FailOpen("no"))
    )
    out = ask(agent, config)
    assert sorted(RAN) == ["get_weather Paris", "shell rm -rf /home/me"]
    for rec in out["tool_decisions"].values():
        assert rec["decided_by"] == "fail_open" and rec["band"] == "error"
        assert "reader is down" in rec["error"]


def test_engine_error_fail_closed_blocks_the_calls():
    agent, config, _ = agent_for(
        WEATHER, RM, reader=broken(), policy=Policy(on_error=FailClosed("block"))
    )
    out = ask(agent, config)
    assert RAN == []
    for cid in ("c1", "c2"):
        msg = tool_messages(out)[cid]
        assert msg.status == "error" and "the gate fails closed" in msg.content
        assert out["tool_decisions"][cid]["decided_by"] == "fail_closed"


def test_engine_error_fail_closed_to_review_asks_a_human():
    agent, config, _ = agent_for(RM, reader=broken(), policy=Policy(on_error=FailClosed("review")))
    out = ask(agent, config)
    (action,) = interrupted(out)["action_requests"]
    assert "The risk check failed: ReaderError" in action["description"]
    out = agent.invoke(Command(resume={"decisions": [{"type": "reject"}]}), config)
    assert RAN == []
    rec = out["tool_decisions"]["c2"]
    assert rec["band"] == "error" and rec["decided_by"] == "human"


# -- records: state, stream, replay --------------------------------------------------------


def test_records_in_state_and_custom_stream():
    agent, config, _ = agent_for(WEATHER, RM)
    events, updates = [], []
    for mode, chunk in agent.stream(
        {"messages": [HumanMessage("go")]}, config, stream_mode=["custom", "updates"]
    ):
        (events if mode == "custom" else updates).append(chunk)
    streamed = [e["agentbranch.decision"] for e in events if "agentbranch.decision" in e]
    assert [r["tool_call"]["id"] for r in streamed] == ["c1", "c2"]
    state = agent.get_state(config).values["tool_decisions"]
    assert [r["outcome"] for r in streamed] == ["run", "blocked"]
    assert [state[r["tool_call"]["id"]] for r in streamed] == streamed
    # plain dicts, so they survive checkpoints
    assert all(type(r) is dict for r in state.values())


def test_records_accumulate_over_turns():
    RAN.clear()
    engine = ab.DecisionEngine(ab.ScriptedReader({"risky": risk}))
    model = Proposer(
        messages=iter(
            [
                AIMessage("", tool_calls=[WEATHER]),
                AIMessage("", tool_calls=[RM]),
                AIMessage("done"),
            ]
        )
    )
    agent = create_agent(
        model,
        tools=[get_weather, shell],
        middleware=[ToolGateMiddleware(engine, tools=[shell, get_weather])],
    )
    out = agent.invoke({"messages": [HumanMessage("go")]})
    assert set(out["tool_decisions"]) == {"c1", "c2"}


def test_gate_replays_from_a_cassette(tmp_path):
    cassette = tmp_path / "gate.jsonl"
    agent, config, _ = agent_for(
        WEATHER,
        RM,
        reader=cassette_reader(cassette, ab.ScriptedReader({"risky": risk}), mode="all"),
    )
    recorded = ask(agent, config)["tool_decisions"]
    agent, config, _ = agent_for(WEATHER, RM, reader=cassette_reader(cassette, mode="none"))
    replayed = ask(agent, config)["tool_decisions"]
    for cid in ("c1", "c2"):
        for key in ("label", "probabilities", "confidence", "outcome"):
            assert replayed[cid][key] == recorded[cid][key]
        assert replayed[cid]["reader"] == "replay:scripted"


# -- configuration -------------------------------------------------------------------------


def test_configuration_errors():
    engine = ab.DecisionEngine(ab.ScriptedReader())
    with pytest.raises(ConfigurationError, match="tools"):
        ToolGateMiddleware(engine, tools=[])
    with pytest.raises(ConfigurationError, match="yes/no"):
        ToolGateMiddleware(engine, tools=["x"], question=ab.choice("?", ["a", "b"]))
    with pytest.raises(ConfigurationError, match="block_on"):
        ToolGateMiddleware(engine, tools=["x"], block_on="maybe")
    with pytest.raises(ConfigurationError, match="GotoNode"):
        ToolGateMiddleware(
            engine, tools=["x"], policy=Policy(take_at=0.5, fallbacks=[GotoNode("human")])
        )
    with pytest.raises(ConfigurationError, match="FailClosed"):
        ToolGateMiddleware(engine, tools=["x"], policy=Policy(on_error=FailClosed("safe")))
    with pytest.raises(ConfigurationError, match="FailOpen"):
        ToolGateMiddleware(engine, tools=["x"], policy=Policy(on_error=FailOpen("maybe")))
    with pytest.raises(ConfigurationError, match="allowed_decisions"):
        ToolGateMiddleware(engine, tools=["x"], allowed_decisions=["approve", "ignore"])


def test_a_safe_question_blocks_on_no():
    safe = ab.yes_no("Is it safe to run this call?", yes="harmless", no="harmful")

    def script(state, q):
        return {"yes": 0.02, "no": 0.98} if "rm -rf" in state else {"yes": 0.98, "no": 0.02}

    agent, config, _ = agent_for(
        WEATHER,
        RM,
        reader=ab.ScriptedReader({"safe": script}),
        question=safe,
        question_id="safe",
        block_on="no",
    )
    out = ask(agent, config)
    assert RAN == ["get_weather Paris"]
    assert out["tool_decisions"]["c2"]["label"] == "no"
    assert "safe=no" in tool_messages(out)["c2"].content


def test_async_fallback_fail_closed_and_stream():
    judge = StrictFakeChat(replies=["no"])
    policy = Policy(take_at=0.5, fallbacks=[Generate(judge)], on_error=FailClosed("block"))
    agent, config, _ = agent_for(WEATHER, LS, policy=policy)

    async def stream(agent, config):
        events = []
        async for chunk in agent.astream(
            {"messages": [HumanMessage("go")]}, config, stream_mode="custom"
        ):
            events.append(chunk["agentbranch.decision"])
        return events

    events = asyncio.run(stream(agent, config))
    assert [(e["tool_call"]["id"], e["decided_by"], e["outcome"]) for e in events] == [
        ("c1", "engine", "run"),
        ("c3", "fallback", "run"),
    ]
    assert sorted(RAN) == ["get_weather Paris", "shell ls"]
    agent, config, _ = agent_for(RM, reader=broken(), policy=policy)
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}, config))
    assert RAN == [] and out["tool_decisions"]["c2"]["decided_by"] == "fail_closed"


def test_a_call_without_id_is_a_clear_error():
    agent, config, _ = agent_for({"name": "shell", "args": {"cmd": "ls"}, "id": None})
    with pytest.raises(ConfigurationError, match="no id"):
        ask(agent, config)


def test_gate_and_selector_together():
    from agentbranch.langchain import ToolSelectorMiddleware

    RAN.clear()
    bound = []

    class Both(Proposer):
        def bind_tools(self, tools, **kwargs):
            bound.append(sorted(t.name for t in tools))
            return self

    def script(state, q):
        if q.id == "tool":
            return {"shell": 0.97, "get_weather": 0.015, "calculator": 0.015}
        return risk(state, q)

    engine = ab.DecisionEngine(ab.ScriptedReader({"tool": script, "risky": script}))
    model = Both(messages=iter([AIMessage("", tool_calls=[RM]), AIMessage("done")]))
    agent = create_agent(
        model,
        tools=[get_weather, shell, calculator],
        middleware=[ToolSelectorMiddleware(engine), ToolGateMiddleware(engine, tools=[shell])],
    )
    out = agent.invoke({"messages": [HumanMessage("Tidy my home folder")]})
    assert bound == [["shell"], ["shell"]]  # both model calls bound the selected tool only
    assert RAN == [] and out["tool_decisions"]["c2"]["outcome"] == "blocked"
    assert out["tool_selection"]["selected"] == ["shell"]


def test_earned_gate_learns_from_its_generate_fallback():
    """While the gate's Earned threshold is learning, even confident calls go to the
    judge, and each answer becomes evidence."""
    earned = ab.Earned(precision=0.8, min_evidence=20, refresh_s=0)
    judge = StrictFakeChat(replies=['{"label": "no"}'])
    agent, config, _ = agent_for(
        WEATHER, policy=Policy(take_at=earned, fallbacks=[Generate(judge)])
    )
    out = ask(agent, config)
    rec = out["tool_decisions"]["c1"]
    assert (rec["decided_by"], rec["trust"], rec["take_at"]) == ("fallback", "learning", None)
    assert RAN == ["get_weather Paris"] and judge.calls == 1
    (state,) = earned.states().values()
    assert state.records == 1 and state.trust == "learning"


@pytest.mark.parametrize(
    "decision, label",
    [
        ({"type": "approve"}, "no"),
        ({"type": "reject"}, "yes"),
        ({"type": "edit", "edited_action": {"name": "shell", "args": {"cmd": "ls -l"}}}, None),
        ({"type": "respond", "message": "use the file browser"}, None),
    ],
)
def test_a_reviewers_approve_or_reject_is_earned_evidence(decision, label, tmp_path):
    """A reviewer who approves the proposed call says it is not risky, one who rejects
    it says it is; an edit or a response says neither, and labels nothing."""
    import json

    store = tmp_path / "evidence.jsonl"
    earned = ab.Earned(precision=0.8, min_evidence=20, refresh_s=0, store=store)
    judge = StrictFakeChat(replies=['{"label": "no"}'])
    policy = Policy(take_at=earned, review_below=0.2, fallbacks=[Generate(judge)])
    agent, config, _ = agent_for(LS, policy=policy)
    assert interrupted(ask(agent, config))  # a coin flip: a human decides
    out = agent.invoke(Command(resume={"decisions": [decision]}), config)
    assert out["tool_decisions"]["c3"]["decided_by"] == "human" and judge.calls == 0
    lines = [json.loads(x) for x in store.read_text().splitlines()] if store.exists() else []
    if label is None:
        assert lines == []
    else:
        (line,) = lines  # once, though the node ran again on resume
        assert (line["source"], line["teacher_label"], line["band"]) == ("review", label, "review")
