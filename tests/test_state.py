"""render_state on LangChain messages: tool calls, tool results and media are rendered,
never silently dropped (and media data is never dumped)."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import agentbranch as ab
from agentbranch.core.state import render_state

RM = {"name": "shell", "args": {"command": "rm -rf /"}, "id": "call_1"}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def test_tool_calls_are_rendered_with_name_and_arguments():
    text = render_state([HumanMessage("clean up the server"), AIMessage("", tool_calls=[RM])])
    assert text == 'human: clean up the server\nai: [tool call shell {"command": "rm -rf /"}]'
    with_text = render_state(AIMessage("On it.", tool_calls=[RM, {**RM, "id": "2", "args": {}}]))
    assert with_text == (
        'ai: On it.\n[tool call shell {"command": "rm -rf /"}]\n[tool call shell {}]'
    )


def test_invalid_and_provider_shaped_tool_calls_are_not_dropped():
    bad = AIMessage(
        "",
        invalid_tool_calls=[
            {"type": "invalid_tool_call", "name": "shell", "args": "{rm", "id": "3", "error": "x"}
        ],
    )
    assert render_state(bad) == "ai: [invalid tool call shell {rm]"
    anthropic = AIMessage(
        [
            {"type": "text", "text": "Deleting."},
            {"type": "tool_use", "name": "shell", "input": {"command": "rm -rf /"}, "id": "4"},
        ]
    )
    assert render_state(anthropic) == 'ai: Deleting.\n[tool call shell {"command": "rm -rf /"}]'


def test_tool_results_name_the_tool_and_its_failure():
    history = [
        SystemMessage("You are an operator."),
        AIMessage("", tool_calls=[RM]),
        ToolMessage("removed 3 files", tool_call_id="call_1", name="shell"),
        ToolMessage("Permission denied", tool_call_id="call_2", status="error"),
    ]
    assert render_state(history).splitlines() == [
        "system: You are an operator.",
        'ai: [tool call shell {"command": "rm -rf /"}]',
        "tool (shell): removed 3 files",
        "tool (call_2, error): Permission denied",
    ]


def test_media_becomes_a_placeholder_never_data():
    image_only = HumanMessage([{"type": "image", "base64": PNG, "mime_type": "image/png"}])
    assert render_state(image_only) == "human: [image image/png]"
    openai_style = HumanMessage(
        [
            {"type": "text", "text": "Is this the error?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}},
        ]
    )
    assert render_state(openai_style) == "human: Is this the error?\n[image]"
    pdf = HumanMessage(
        [{"type": "file", "base64": PNG, "mime_type": "application/pdf", "filename": "r.pdf"}]
    )
    assert render_state(pdf) == "human: [file r.pdf application/pdf]"
    audio = HumanMessage([{"type": "audio", "url": "https://example.com/a.wav"}])
    assert render_state(audio) == "human: [audio]"
    # A media block as (or inside) JSON state: the placeholder, not the base64 text.
    root = {"type": "image", "base64": PNG, "mime_type": "image/png"}
    assert render_state(root) == '"[image image/png]"'
    nested = render_state({"ticket": "see screenshot", "attachments": [root]})
    assert PNG not in nested
    assert json.loads(nested) == {"ticket": "see screenshot", "attachments": ["[image image/png]"]}
    # A dict that merely has a media-like type but no data stays data.
    assert json.loads(render_state({"type": "file", "path": "/tmp/x"})) == {
        "type": "file",
        "path": "/tmp/x",
    }


def test_messages_in_json_state_keep_tool_calls_and_results():
    state = {
        "messages": [
            AIMessage("", tool_calls=[RM]),
            ToolMessage("denied", tool_call_id="call_1", name="shell", status="error"),
        ],
        "tool_call": {"id": "call_1", "name": "shell", "args": {"command": "rm -rf /"}},
    }
    assert json.loads(render_state(state))["messages"] == [
        {
            "role": "ai",
            "content": "",
            "tool_calls": [{"name": "shell", "args": {"command": "rm -rf /"}}],
        },
        {"role": "tool", "content": "denied", "name": "shell", "status": "error"},
    ]


def test_a_gate_reading_the_history_sees_the_tool_call_it_gates():
    reader = ab.ScriptedReader({"risky": {"yes": 0.9, "no": 0.1}})
    engine = ab.DecisionEngine(reader)
    engine.decide(
        [HumanMessage("clean up the server"), AIMessage("", tool_calls=[RM])],
        {"risky": ab.yes_no("Is the pending tool call destructive?")},
    )
    assert "rm -rf /" in reader.calls[0][0].state
