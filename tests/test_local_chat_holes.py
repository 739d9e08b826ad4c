"""``LocalChatModel`` against hostile input and careless consumers (issue 64).

* A lone surrogate in a message is the read's clear ``InvalidStateError`` (invoke,
  stream, ainvoke, astream), never the tokenizer's ``TypeError``; a decision on such a
  state or question is a clear error too.
* A stream hands out exactly what ``invoke`` returns, whatever the stop strings: the
  start of a stop string is held back until the text shows whether it follows
  (``StreamText`` by hypothesis, a tiny random causal model by hypothesis, SmolLM2).
* A stream left unread does not hold the model: its generation stops once a piece has
  waited ``stream_idle_s`` for the consumer (sync and async), and a dropped stream is
  closed by its garbage collection.
"""

from __future__ import annotations

import asyncio
import gc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage, SystemMessage

import agentbranch as ab
from agentbranch.core.errors import (
    ConfigurationError,
    InvalidQuestionError,
    InvalidStateError,
    ReaderTimeoutError,
)
from agentbranch.engine.readers.generation import cut_at_stop
from agentbranch.engine.readers.streaming import StreamText
from agentbranch.engine.readers.transformers_generation import TransformersGenerator
from agentbranch.integrations.local_chat import LocalChatModel

QUESTION = "What is the capital of France?"
LONE = "\ud800"


@pytest.fixture(scope="module")
def smol() -> LocalChatModel:
    return ab.LocalChatModel(model=str(ab.smollm2()), max_tokens=24)


@pytest.fixture(scope="module")
def tiny_causal() -> LocalChatModel:
    """A tiny random causal model (one layer) on SmolLM2's tokenizer: real transformers
    generation and streaming, varied text, milliseconds a token."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(ab.smollm2())
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
        tie_word_embeddings=True,
        initializer_range=0.3,  # large enough that greedy text varies (and repeats)
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config).eval()
    generator = TransformersGenerator(model, tokenizer, threads=1, model_name="tiny-causal")
    return LocalChatModel.on(generator, max_tokens=24)


def _stream_text(model: LocalChatModel, prompt: str, **kw) -> str:
    return "".join(str(c.content) for c in model.stream(prompt, **kw))


# -- a lone surrogate ----------------------------------------------------------------


def test_a_lone_surrogate_in_a_message_is_the_reads_clear_error(smol):
    calls = {
        "invoke": lambda m: smol.invoke(m),
        "stream": lambda m: list(smol.stream(m)),
        "ainvoke": lambda m: asyncio.run(smol.ainvoke(m)),
        "astream": lambda m: asyncio.run(_collect(smol.astream(m))),
    }
    for name, call in calls.items():
        for messages in (f"Hi {LONE} there", [SystemMessage(LONE + "x"), HumanMessage("Hi")]):
            with pytest.raises(InvalidStateError, match="unpaired surrogate") as caught:
                call(messages)
            assert "errors='replace'" in str(caught.value), name
    with pytest.raises(InvalidStateError, match=r"message 1 .*index 3"):
        smol.invoke([HumanMessage("Hi"), HumanMessage(f"abc{LONE}")])
    # in the options that reach the tokenizer too
    for option in ("stop", "choices"):
        with pytest.raises(ConfigurationError, match="unpaired surrogate"):
            smol.invoke("Hi", **{option: [f"a{LONE}"]})
    # the decision path: the state and the question, as clear errors
    engine = ab.DecisionEngine(ab.ScriptedReader())
    with pytest.raises(InvalidStateError, match="unpaired surrogate"):
        engine.decide(f"ticket {LONE}", {"ok": ab.yes_no("OK?")})
    with pytest.raises(InvalidQuestionError, match="unpaired surrogate"):
        engine.decide("ticket", {"ok": ab.yes_no(f"OK {LONE}?")})


async def _collect(stream):
    return [c async for c in stream]


# -- a stream equals its invoke, whatever the stop strings ----------------------------


def _as_streamed(text: str, cuts: list[int], stops: list[str]) -> tuple[str, str]:
    """What a stream hands out of ``text`` revealed at ``cuts``, and what the
    generation keeps (it ends at the first reveal that holds a stop string)."""
    points = sorted({c for c in cuts if 0 < c < len(text)} | {len(text)})
    stream = StreamText(stops)
    out, kept = "", None
    for p in points:
        out += stream.update(text[:p])
        if stream.stopped:
            kept = cut_at_stop(text[:p], stops)[0]
            break
    if kept is None:
        kept = text  # no stop string ever appeared
    return out + stream.finish(kept), kept


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet="abT h", max_size=16),
    cuts=st.lists(st.integers(0, 16), max_size=16),
    stops=st.lists(st.text(alphabet="abT h", min_size=1, max_size=6), max_size=3),
)
def test_stream_text_hands_out_exactly_what_the_generation_keeps(text, cuts, stops):
    streamed, kept = _as_streamed(text, cuts, stops)
    assert streamed == kept


def test_stream_text_holds_the_start_of_a_stop_string_while_the_text_is_shorter():
    stream = StreamText(["The hi"])
    assert [stream.update(t) for t in ("T", "Th", "The", "The ")] == ["", "", "", ""]
    assert stream.update("The h") == ""
    assert stream.update("The ha") == "The ha"  # decided: not the stop string


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    prompt=st.sampled_from(["Hello there", "Tell me a story.", "Why?"]),
    picks=st.lists(st.tuples(st.integers(0, 200), st.integers(1, 12)), min_size=1, max_size=3),
    noise=st.lists(st.text(alphabet="aeiou t", min_size=1, max_size=4), max_size=1),
)
def test_a_stream_yields_exactly_what_invoke_returns_for_any_stop_strings(
    tiny_causal, prompt, picks, noise
):
    full = tiny_causal.invoke(prompt).content
    assert len(full) > 20  # varied text to cut stop strings from
    # stop strings taken from the reply (its start, its middle, repeats) and made up
    stops = [full[a % len(full) :][:n] for a, n in picks] + noise
    stops = [s for s in stops if s]
    reply = tiny_causal.invoke(prompt, stop=stops).content
    assert _stream_text(tiny_causal, prompt, stop=stops) == reply
    assert not any(s in reply for s in stops)


def test_smollm2_streams_nothing_of_a_stop_string_that_begins_the_reply(smol):
    reply = smol.invoke(QUESTION).content
    assert reply.startswith("The capital of")
    for stop in ("The capital of", "The c", reply[:3]):
        chunks = [c.content for c in smol.stream(QUESTION, stop=[stop])]
        assert "".join(chunks) == smol.invoke(QUESTION, stop=[stop]).content == ""
    near = "The hi"  # starts as the reply does, then differs: all of the reply comes
    assert _stream_text(smol, QUESTION, stop=[near]) == smol.invoke(QUESTION, stop=[near]).content


# -- a stream left unread -------------------------------------------------------------


def _impatient(
    model: LocalChatModel, idle_s: float
) -> tuple[LocalChatModel, TransformersGenerator]:
    """``model``'s weights and lock behind a generator whose streams may go unread
    ``idle_s`` seconds."""
    g = model.generator
    quick = TransformersGenerator(
        g.model, g.tokenizer, lock=g._lock, threads=g.threads, stream_idle_s=idle_s
    )
    return LocalChatModel.on(quick, max_tokens=200), quick


def test_a_stream_left_unread_frees_the_model_for_the_next_call(smol):
    chat, generator = _impatient(smol, 0.5)
    stream = chat.stream("Tell me a long story about a dragon.")
    first = next(c for c in stream if c.content)
    assert first.content and generator._lock.locked()
    # The stream is kept but not read: an invoke behind it gets the model once the
    # unread generation stops (at its next token after 0.5 s), not after 200 tokens.
    reply = chat.invoke(QUESTION, max_tokens=8)
    assert reply.usage_metadata["output_tokens"] <= 8
    rest = []
    with pytest.raises(ReaderTimeoutError, match="unread"):
        rest.extend(c.content for c in stream)
    assert len(rest) < 150  # the abandoned generation stopped early


def test_an_async_stream_left_unread_frees_the_model_too(smol):
    chat, generator = _impatient(smol, 0.5)

    async def run():
        stream = chat.astream("Tell me a long story about a dragon.")
        async for c in stream:
            if c.content:
                break
        # (``break`` out of ``async for`` leaves the stream open: it is kept, unread)
        reply = await chat.ainvoke(QUESTION, max_tokens=8)
        rest = []
        with pytest.raises(ReaderTimeoutError):
            async for c in stream:
                rest.append(c.content)
        return reply, rest

    reply, rest = asyncio.run(run())
    assert reply.usage_metadata["output_tokens"] <= 8 and len(rest) < 150


def test_a_dropped_stream_ends_its_generation(smol):
    chat, generator = smol, smol.generator
    stream = chat.stream("Tell me a long story about a dragon.", max_tokens=200)
    assert next(c for c in stream if c.content).content
    assert generator._lock.locked()
    del stream
    gc.collect()  # closing the dropped stream stops the generation at its next token
    assert generator._lock.acquire(timeout=60)
    generator._lock.release()
