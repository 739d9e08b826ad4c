"""Length-aware batching in the embedded reader: texts of similar length share a
forward (across the whole read), answers come back in the caller's order, and they are
the answers of each text read alone, unpadded (eagerly and through the trace, with
examples, and for a choice of 26 options), directly and through the coalescer."""

from __future__ import annotations

import string

import pytest
import torch
from agentbranch_bench.mixed_texts import long_texts, mixed_texts
from hypothesis import given
from hypothesis import strategies as st

import agentbranch as ab
from agentbranch.core.reads import ReadRequest
from agentbranch.engine.readers.embedded import EmbeddedReader
from agentbranch.engine.readers.embedded.batches import forward_cost, length_batches

TOPICS = (
    "billing refunds invoices payments login passwords outage downtime latency "
    "exports imports search mobile desktop email calendar reports dashboards api "
    "webhooks security privacy pricing contracts onboarding training hardware"
).split()
QUESTIONS = {
    "team": ab.choice(
        "Which team should handle this?",
        {"billing": "invoices, payments and refunds", "outage": "the service is down"},
        examples={
            "billing": ["I was charged twice", "Where is my invoice?", "Refund please"],
            "outage": ["Nothing loads", "The site is down", "Error 503 everywhere"],
        },
    ),
    "urgent": ab.yes_no(
        "Does this need a reply within the hour?",
        yes="customers are blocked or losing money",
        no="it can wait for a normal reply",
    ),
    "topic": ab.choice(
        "What is it about?",
        {f"topic_{c}": f"a message about {w}" for c, w in zip(string.ascii_lowercase, TOPICS)},
    ),
}
# Mixed lengths: short, median, and two past the 256 tokens a text is cut at.
STATES = [*mixed_texts(16), *long_texts(2), "ok", "Refund please"]


@given(st.lists(st.integers(1, 300), max_size=60), st.integers(1, 70), st.integers(1, 5000))
def test_length_batches_cover_every_text_once_within_the_limits(lengths, count, tokens):
    batches = length_batches(lengths, count, tokens)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)  # across batches too: similar lengths share a forward
    for b in batches:
        assert len(b) <= count
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= tokens


def _cost(lengths: list[int], batches: list[list[int]]) -> float:
    return sum(forward_cost(len(b), max(lengths[i] for i in b)) for b in batches)


def _cheapest(sizes: list[int], count: int, tokens: int) -> float:
    """The least cost of any cut of sorted ``sizes`` into contiguous batches, by
    trying every cut."""
    n = len(sizes)
    best = float("inf")
    for mask in range(1 << max(0, n - 1)):
        cuts = [0] + [k + 1 for k in range(n - 1) if mask >> k & 1] + [n]
        parts = [sizes[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
        if any(len(p) > count or (len(p) > 1 and len(p) * p[-1] > tokens) for p in parts):
            continue
        best = min(best, sum(forward_cost(len(p), p[-1]) for p in parts))
    return best


@given(
    st.lists(st.integers(1, 300), min_size=1, max_size=9), st.integers(1, 10), st.integers(1, 3000)
)
def test_length_batches_cut_where_the_forwards_cost_least(lengths, count, tokens):
    cost = _cost(lengths, length_batches(lengths, count, tokens))
    assert cost == pytest.approx(_cheapest(sorted(lengths), count, tokens))


def test_one_long_text_is_not_the_width_of_fifteen_short_ones():
    # Filling the batch up to its token limit (16 x 256 = 4096) padded the short ones.
    lengths = [36] * 15 + [256]
    assert sorted(map(len, length_batches(lengths, 64, 4096))) == [1, 15]


@pytest.fixture(scope="module")
def alone() -> ab.DecisionEngine:
    """Every text read alone and eagerly: no padding at all, in the caller's order."""
    return ab.DecisionEngine(EmbeddedReader(trace=False, batch_size=1).load(), batching=False)


def answers(engine: ab.DecisionEngine, states: list[str]) -> list[dict]:
    return [
        {q: (d.label, d.probabilities) for q, d in ds.items()}
        for ds in engine.decide_many(states, QUESTIONS)
    ]


def assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for q in w:
            assert g[q][0] == w[q][0]
            assert g[q][1] == pytest.approx(w[q][1], abs=1e-5)


@pytest.mark.parametrize("trace", [False, True])
@pytest.mark.parametrize("batching", [False, True])
def test_mixed_lengths_read_as_each_text_alone(alone, trace, batching):
    reader = EmbeddedReader(trace=trace, batch_size=8, batch_tokens=512).load()
    engine = ab.DecisionEngine(reader, batching=batching)
    engine.decide("warm-up", QUESTIONS)  # the first forward; the second makes the trace
    want = answers(alone, STATES)
    assert_same(answers(engine, STATES), want)
    assert reader.pipelined_batch == (16 if trace else None)  # the trace is in use
    # The same states in another order: the answers follow them.
    assert_same(answers(engine, STATES[::-1]), want[::-1])


def test_a_read_pads_its_forwards_little_across_the_whole_read():
    """One long state among short ones no longer makes each short one cost its length:
    the padded tokens of every forward stay close to the real ones."""
    reader = EmbeddedReader(trace=False, batch_size=64).load()
    shapes: list[tuple[int, int]] = []
    real: list[int] = []
    embedding = reader._current_embedding()

    def spy(batch):
        shapes.append(tuple(batch["input_ids"].shape))
        real.append(int(batch["attention_mask"].sum()))
        return embedding(batch)

    reader._embedding = spy
    # States long and short interleaved, more of them than one batch of 64.
    states = [s for pair in zip(mixed_texts(100), long_texts(100)) for s in pair]
    reader.read([ReadRequest(state=s, questions=()) for s in states])
    padded = sum(n * width for n, width in shapes)
    assert padded <= 1.2 * sum(real), shapes  # one batch of 64 after another: 1.7


def test_a_batch_is_what_the_tokenizer_pads_under_its_keys_in_its_order():
    # The traced embedding runs only on the keys (in the order) it was traced with;
    # anything else would fall back to the eager model unnoticed.
    from transformers import AutoTokenizer

    from agentbranch.engine.readers.embedded.batches import padded
    from agentbranch.engine.readers.embedded.reader import default_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()), local_files_only=True)
    texts = ["a much longer text than the others, with many words", "ok", "hello there"]
    rows = [2, 0, 1]
    got = padded(tokenizer(texts), rows, tokenizer)
    want = tokenizer([texts[i] for i in rows], padding=True, return_tensors="pt")
    assert tuple(got) == tuple(want)
    for key in want:
        assert torch.equal(got[key], want[key])
