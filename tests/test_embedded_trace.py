"""The embedded reader's traced embedding: made at the second forward, checked against
the model before it is used, the same reads as the eager model, and a reader that stays
eager (and is not pipelined) when the trace fails or would be wrong."""

from __future__ import annotations

import logging
import warnings
from types import SimpleNamespace

import pytest
import torch

import agentbranch as ab
from agentbranch.engine.readers.embedded import EmbeddedReader
from agentbranch.engine.readers.embedded.traced import eager_embedding, traced_embedding

QUESTIONS = {
    "team": ab.choice(
        "Which team should handle this ticket?",
        {"billing": "invoices, payments and refunds", "outage": "the service is down"},
    ),
    "urgent": ab.yes_no(
        "Does this need a reply within the hour?",
        yes="customers are blocked or losing money",
        no="it can wait for a normal reply",
    ),
}
STATES = [
    "I was charged twice for my plan",
    "The whole site returns 503 since this morning, nobody can log in",
    "ok",
    "Please send the invoice for March again, the PDF was empty " * 4,
]


@pytest.fixture(scope="module")
def eager() -> ab.DecisionEngine:
    return ab.DecisionEngine(EmbeddedReader(trace=False).load(), batching=False)


def answers(engine: ab.DecisionEngine, states: list[str]) -> list[dict]:
    return [
        {q: (d.label, d.probabilities) for q, d in ds.items()}
        for ds in engine.decide_many(states, QUESTIONS)
    ]


def same(got: list[dict], want: list[dict]) -> bool:
    return all(
        g[q][0] == w[q][0] and all(abs(g[q][1][o] - w[q][1][o]) < 1e-6 for o in w[q][1])
        for g, w in zip(got, want)
        for q in w
    ) and len(got) == len(want)


def test_the_trace_is_made_at_the_second_forward_and_reads_as_the_model_does(eager):
    reader = EmbeddedReader().load()
    engine = ab.DecisionEngine(reader, batching=False)
    first = answers(engine, STATES[:2])
    assert (reader._traced, reader.pipelined_batch) == (False, None)  # a one-off read
    assert first == answers(eager, STATES[:2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = answers(engine, STATES)  # the trace is made here, and silently
    assert not caught
    assert reader._traced and reader.pipelined_batch == EmbeddedReader.PIPELINED_BATCH
    assert same(second, answers(eager, STATES))
    # other counts and lengths than the trace was made on
    assert same(answers(engine, STATES[::-1] * 5), answers(eager, STATES[::-1] * 5))
    assert eager.reader._traced is False and eager.reader.pipelined_batch is None


def test_warmup_makes_the_trace():
    reader = EmbeddedReader()
    reader.warmup()
    assert reader._traced and reader.forward_calls == 2
    reader.warmup()  # nothing more to do
    assert reader.forward_calls == 2


def test_a_failing_trace_leaves_the_reader_eager(monkeypatch, eager, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no tracing here")

    monkeypatch.setattr(torch.jit, "trace", broken)
    reader = EmbeddedReader().load()
    engine = ab.DecisionEngine(reader, batching=False)
    with caplog.at_level(logging.DEBUG, logger="agentbranch"):
        for i in range(3):  # new states each round: the reader keeps recent ones' embeddings
            states = [f"{state} (round {i})" for state in STATES]
            assert same(answers(engine, states), answers(eager, states))
    assert reader._traced is False and reader.pipelined_batch is None
    assert "tracing the embedding failed (no tracing here)" in caplog.text


class Encoder(torch.nn.Module):
    """A toy encoder; ``branch`` makes its output depend on a Python test of the batch
    size, which a trace made on two texts bakes in."""

    def __init__(self, branch: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(31000, 8)
        self.branch = branch

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        hidden = self.embed(input_ids)
        if self.branch and input_ids.shape[0] == 2:
            hidden = hidden * -1.0
        return SimpleNamespace(last_hidden_state=hidden)


@pytest.fixture(scope="module")
def tokenizer():
    return EmbeddedReader().load()._tokenizer


def test_a_trace_that_would_read_otherwise_than_the_model_is_not_used(tokenizer, caplog):
    with caplog.at_level(logging.DEBUG, logger="agentbranch"):
        assert traced_embedding(Encoder(branch=True), tokenizer, "cpu") is None
    assert "the traced embedding differs from the model's" in caplog.text


def test_a_faithful_trace_embeds_as_the_model_does(tokenizer):
    model = Encoder(branch=False)
    traced = traced_embedding(model, tokenizer, "cpu")
    assert traced is not None
    batch = tokenizer(
        ["some text", "more", "and a third one here"], padding=True, return_tensors="pt"
    )
    with torch.inference_mode():
        want = eager_embedding(model)(batch)
        got = traced(batch)
    assert torch.allclose(got, want, atol=1e-6)
    assert torch.allclose(got.norm(dim=-1), torch.ones(3), atol=1e-5)  # L2-normalised
