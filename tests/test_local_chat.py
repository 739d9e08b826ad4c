"""Generation on the reader's own model (``LocalChatModel``), on transformers.

* A real language model (SmolLM2-135M-Instruct from the package index, converted once
  into the user cache by ``agentbranch.testing.smollm2``) answers a chat question with
  real text, sync and async, with token usage as LangChain reports it.
* ``LocalChatModel.on(TransformersReader)`` generates on the reader's own tiny DiffusionGemma
  (transformers' full denoising schedule), capped by ``max_tokens`` and ``steps``.
* Options are checked, the chat model records and replays through a cassette, and the
  ``Generate`` fallback on it records that its reply was parsed, not constrained.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError
from agentbranch.engine.readers.generation import (
    GenerationRequest,
    GenerationResult,
    Generator,
    check_request,
    cut_at_stop,
)
from agentbranch.integrations.local_chat import LocalChatModel, chat_messages
from agentbranch.replay import Cassette, ReplayMissError


@pytest.fixture(scope="module")
def smollm2_chat() -> LocalChatModel:
    from agentbranch.testing import smollm2

    return LocalChatModel.from_pretrained(smollm2(), max_tokens=24)


@pytest.fixture(scope="module")
def tiny_reader(tiny_model_dir):
    from agentbranch.engine.readers.transformers import TransformersReader

    return TransformersReader.from_pretrained(tiny_model_dir)


def test_smollm2_answers_with_real_text(smollm2_chat):
    reply = smollm2_chat.invoke("What is the capital of France?")
    assert "Paris" in reply.content
    usage = reply.usage_metadata
    assert usage["input_tokens"] > 10 and 0 < usage["output_tokens"] <= 24
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.response_metadata["model_name"].startswith("smollm2")

    async def both():
        return await asyncio.gather(
            smollm2_chat.ainvoke("What is the capital of France?"),
            smollm2_chat.ainvoke([HumanMessage("What is the capital of France?")]),
        )

    assert [r.content for r in asyncio.run(both())] == [reply.content] * 2
    # max_tokens per call, and a seeded sample repeats itself.
    short = smollm2_chat.invoke("Tell me a story.", max_tokens=3)
    assert short.usage_metadata["output_tokens"] == 3
    assert short.response_metadata["finish_reason"] == "length"
    a, b = (
        smollm2_chat.invoke("Tell me a story.", temperature=1.0, seed=7, max_tokens=8).content
        for _ in range(2)
    )
    assert a == b


def test_reader_chat_model_runs_the_diffusion_schedule(tiny_reader):
    model = ab.LocalChatModel.on(tiny_reader, max_tokens=20)
    reply = model.invoke("Hello there")
    assert isinstance(reply.content, str)
    assert 0 < reply.usage_metadata["output_tokens"] <= 20
    assert model.model_name == tiny_reader.model
    # A random-weight model says nothing sensible, but the same call gives the same
    # prompt; steps caps the schedule.
    assert (
        model.invoke("Hello there", steps=1).usage_metadata["input_tokens"]
        == (reply.usage_metadata["input_tokens"])
    )
    with pytest.raises(ConfigurationError, match="temperature"):
        model.invoke("Hello", temperature=0.5)
    with pytest.raises(ConfigurationError, match="seed"):
        model.invoke("Hello", seed=1)
    # Reads still work on the same model between generations.
    decision = ab.DecisionEngine(tiny_reader).decide("Refund me", {"ok": ab.yes_no("OK?")})
    assert decision["ok"].label in ("yes", "no")


def test_options_are_checked():
    ok = GenerationRequest(prompt_ids=(1, 2), max_tokens=4)
    check_request(ok, is_diffusion=False, max_model_len=16)
    bad = [
        (GenerationRequest(prompt_ids=(), max_tokens=4), "prompt"),
        (GenerationRequest(prompt_ids=(1,), max_tokens=0), "max_tokens"),
        (GenerationRequest(prompt_ids=(1,) * 16), "max_model_len"),
        (GenerationRequest(prompt_ids=(1,), temperature=-1.0), "temperature"),
        (GenerationRequest(prompt_ids=(1,), steps=2), "diffusion models only"),
        (GenerationRequest(prompt_ids=(1,), choices=()), "choices"),
    ]
    for request, match in bad:
        with pytest.raises(ConfigurationError, match=match):
            check_request(request, is_diffusion=False, max_model_len=16)
    with pytest.raises(ConfigurationError, match="unknown chat model option"):
        LocalChatModel.on(_Echo(), top_k=3)
    with pytest.raises(ConfigurationError, match="tool"):
        chat_messages([ToolMessage("x", tool_call_id="1")])
    assert chat_messages([SystemMessage("s"), HumanMessage("h"), AIMessage("a")]) == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "h"},
        {"role": "assistant", "content": "a"},
    ]
    assert cut_at_stop("yes. no.", [".", "no"]) == ("yes", True)
    assert cut_at_stop("yes", ["."]) == ("yes", False)


class _Echo(Generator):
    """A generator double for the layers above the generator (cassettes, Generate):
    it declares only ``render`` and ``generate``."""

    model_name = "echo"
    is_diffusion = False
    supports_choices = False

    def __init__(self, text: str = "billing", constrains: bool = False) -> None:
        self.text, self.calls, self.choices = text, 0, []
        self.supports_choices = constrains

    def render(self, messages, special_tokens=None):
        return [len(m["content"]) for m in messages]

    def generate(self, request):
        self.calls += 1
        self.choices.append(request.choices)
        constrained = "choice" if request.choices is not None else None
        return GenerationResult(self.text, len(request.prompt_ids), 1, "stop", constrained)


def test_a_generator_that_cannot_stream_streams_its_reply_in_one_piece():
    model = LocalChatModel.on(_Echo("Sorry about that."))
    chunks = list(model.stream("hi"))
    assert [c.content for c in chunks if c.content] == ["Sorry about that."]
    assert chunks[-1].response_metadata["finish_reason"] == "stop"

    async def astream():
        return [c async for c in model.astream("hi")]

    achunks = asyncio.run(astream())
    assert "".join(c.content for c in achunks) == "Sorry about that."
    assert model.generator.calls == 2


def test_on_refuses_what_is_neither_a_reader_nor_a_generator():
    with pytest.raises(ConfigurationError, match="takes a Reader or a Generator"):
        LocalChatModel.on(object())


def test_cassettes_record_and_replay_the_local_chat_model(tmp_path):
    path = tmp_path / "run.jsonl"
    live = _Echo("Sorry about that.")
    recording = Cassette(path, "new").chat_model(LocalChatModel.on(live, max_tokens=8))
    assert recording.invoke("Draft a reply").content == "Sorry about that."
    assert live.calls == 1

    offline = _Echo("never called")
    replay = Cassette(path, "none").chat_model(LocalChatModel.on(offline, max_tokens=8))
    reply = replay.invoke("Draft a reply")
    assert reply.content == "Sorry about that." and offline.calls == 0
    assert reply.usage_metadata["output_tokens"] == 1
    # Other options are another identity: a miss, never the old answer.
    other = Cassette(path, "none").chat_model(LocalChatModel.on(offline, max_tokens=9))
    with pytest.raises(ReplayMissError):
        other.invoke("Draft a reply")


def test_generate_fallback_records_whether_the_reply_was_constrained():
    from agentbranch.policy.resolving import Resolver

    questions = {"team": ab.choice("Which team?", ["billing", "bugs"])}
    unsure = ab.DecisionEngine(ab.ScriptedReader({"team": {"billing": 0.5, "bugs": 0.5}}))
    free = _Echo('{"label": "bugs"}')
    policy = ab.Policy(take_at=0.9, fallbacks=[ab.Generate(LocalChatModel.on(free))])
    record = Resolver(unsure, questions, policy).resolve("The app crashes")["team"]
    assert record["label"] == "bugs" and record["decided_by"] == "fallback"
    assert record["fallback"]["constrained"] is None and free.choices == [None]

    held = _Echo("billing", constrains=True)
    policy = ab.Policy(take_at=0.9, fallbacks=[ab.Generate(LocalChatModel.on(held))])
    record = Resolver(unsure, questions, policy).resolve("Charged twice")["team"]
    assert record["label"] == "billing"
    assert record["fallback"]["constrained"] == "choice"
    assert held.choices == [("billing", "bugs")]


def test_smollm2_choices_hold_the_reply_to_an_option(smollm2_chat):
    options = ["Paris", "London", "Berlin"]
    reply = smollm2_chat.invoke("What is the capital of France?", choices=options)
    assert reply.content == "Paris"
    assert reply.response_metadata["constrained"] == "choice"
    reply = smollm2_chat.invoke("What is the capital of Germany?", choices=options)
    assert reply.content == "Berlin"


def test_demo_generate_falls_back_to_the_local_model_then_a_person():
    from agentbranch.cli.demo import demo_report, run_demo

    tickets = [{"id": "T-1", "ticket": "Things are weird today."}]
    unsure = ab.DecisionEngine(ab.ScriptedReader())  # uniform: the team falls back
    model = LocalChatModel.on(_Echo("bug", constrains=True))
    (state,) = run_demo(unsure, tickets, progress=False, fallback_model=model)
    record = state["decisions"]["team"]
    assert (state["queue"], record["decided_by"]) == ("bug", "fallback")
    assert record["fallback"]["constrained"] == "choice"
    assert "(team: generated by echo)" in "\n".join(demo_report(tickets, [state], None))
    # A reply that names no team still reaches a person.
    lost = LocalChatModel.on(_Echo("no idea"))
    (state,) = run_demo(unsure, tickets, progress=False, fallback_model=lost)
    assert state["queue"] == "human_triage"
