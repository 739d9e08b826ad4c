"""A learned head that reads the question as written too: its input is the state's
embedding followed by the written read's option scores (``LinearHead.written``), on the
real embedded reader; the learner fits one where the written question has something to
be read by, and its weight is part of the version's identity."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentbranch as ab
from agentbranch.core.heads import LinearHead, with_head
from agentbranch.core.questions import as_compiled, to_spec
from agentbranch.core.reads import ReadRequest
from agentbranch.engine.readers.embedded.scoring import head_reads
from agentbranch.policy import Earned
from agentbranch.policy.earned import QuestionKey
from agentbranch.policy.earned.learn import head as lh
from agentbranch.policy.earned.learn.head import fit_head

QUESTION = ab.choice(
    "Which team should take this ticket?",
    {"billing": "Invoices, refunds and charges", "outage": "The service is down"},
)
#: A yes/no without descriptions or examples: nothing to read it by as written.
BARE = ab.yes_no("Is this a billing ticket?")
BILLING = [
    "I was charged twice for my subscription this month",
    "Please refund the invoice I paid by mistake",
    "My card was billed after I cancelled",
    "The invoice shows the wrong amount",
]
OUTAGE = [
    "The website does not load at all since this morning",
    "Our dashboard returns a 503 error for every page",
    "The API is down and nothing responds",
    "Login fails for everyone in the office",
]


@pytest.fixture(scope="module")
def engine() -> ab.DecisionEngine:
    from agentbranch.engine.readers.embedded import EmbeddedReader

    return ab.DecisionEngine(EmbeddedReader())


def _labelled(
    n: int, options: tuple[str, str] = ("billing", "outage")
) -> tuple[list[str], list[str]]:
    texts, labels = [], []
    for i in range(n):
        pool, label = (BILLING, options[0]) if i % 2 == 0 else (OUTAGE, options[1])
        texts.append(f"{pool[i // 2 % len(pool)]} (ticket {i})")
        labels.append(label)
    return texts, labels


def test_written_scores_are_the_similarity_scores_of_the_written_read(engine):
    spec = to_spec("team", QUESTION)
    texts = ["The site is down", "I want my money back"]
    scores = engine.reader.written_scores(engine.reader.embed(texts).numpy(), spec)
    reads = engine.reader.read([ReadRequest(t, (spec,)) for t in texts])
    assert scores.shape == (2, 2)
    for row, (read,) in zip(scores, reads):
        assert row.tolist() == pytest.approx(read.extras["similarities"], abs=1e-6)
    # a question with nothing to read it by as written has no scores
    bare = to_spec("t", BARE)
    assert engine.reader.written_scores(engine.reader.embed(texts).numpy(), bare) is None


def test_a_written_head_reads_the_embedding_and_the_written_scores(engine):
    texts, labels = _labelled(24)
    spec = to_spec("team", QUESTION)
    x = engine.reader.embed(texts).numpy()
    z = engine.reader.written_scores(x, spec)
    head = fit_head(["billing", "outage"], np.hstack([x, 10.0 * z]), labels, written=10.0)
    assert head.written == 10.0 and head.dim == x.shape[1] + 2 and head.embedding_dim == x.shape[1]
    version = with_head(QUESTION, head)
    new = ["The service is down again", "A charge I do not recognise"]
    got = engine.decide_many(new, {"team": version})
    xn = engine.reader.embed(new).numpy()
    want = np.exp(
        head.log_probs(
            np.hstack([xn, 10.0 * engine.reader.written_scores(xn, spec)]), ["billing", "outage"]
        )
    )
    for d, p in zip(got, want):
        assert [d["team"].probabilities[o] for o in ("billing", "outage")] == pytest.approx(
            p.tolist(), abs=1e-5
        )
    # without the written scores it cannot read: the question is read as written instead
    assert head_reads(to_spec("team", version), engine.reader.embed(new)) is None
    # the weight is part of the head: another weight is another version, another key
    other = LinearHead(head.options, head.classes, head.weights, head.bias, head.temperature, 5.0)
    assert other.digest != head.digest
    assert Earned().key(
        QuestionKey("team", with_head(QUESTION, other), "embedded", "m")
    ) != Earned().key(QuestionKey("team", version, "embedded", "m"))
    back = LinearHead.from_dict(json.loads(json.dumps(head.to_dict())))
    assert back == head and back.written == 10.0


@pytest.mark.parametrize("weight", [-1.0, math.nan, math.inf, True, "10"])
def test_a_written_weight_must_be_a_finite_number_at_least_0(weight):
    with pytest.raises(ValueError, match="written weight"):
        LinearHead(["a", "b"], ["a", "b"], np.zeros((2, 5)), np.zeros(2), 1.0, weight)


def test_a_written_head_needs_room_for_the_scores():
    with pytest.raises(ValueError, match="option scores"):
        LinearHead(["a", "b"], ["a", "b"], np.zeros((2, 2)), np.zeros(2), 1.0, 10.0)
    # a head on the embedding alone keeps the digest it had before written heads
    plain = LinearHead(["a", "b"], ["a", "b"], np.ones((2, 3)), np.zeros(2))
    assert (
        plain.written == 0.0
        and plain.digest
        == LinearHead.from_dict({k: v for k, v in plain.to_dict().items() if k != "written"}).digest
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=2, max_size=2))
def test_written_scores_that_are_not_finite_read_uniform(scores):
    """Numbers that mean nothing never make a confident read."""
    head = LinearHead(["a", "b"], ["a", "b"], np.ones((2, 5)) * [[1], [-1]], np.zeros(2), 1.0, 10.0)
    spec = to_spec("t", with_head(ab.choice("Which?", {"a": "first", "b": "second"}), head))
    import torch

    (read,) = head_reads(spec, torch.zeros((1, 3)), np.array([scores]))
    probs = np.exp(read.logprobs)
    if not np.isfinite(scores).all():
        assert probs.tolist() == pytest.approx([0.5, 0.5])
    assert np.isfinite(probs).all() and probs.sum() == pytest.approx(1.0)


def _learner_head(engine, question, monkeypatch, weight: float | None = None, options=None):
    if weight is not None:
        monkeypatch.setattr(lh, "WRITTEN_WEIGHT", weight)
    earned = Earned(precision=0.8, learn=True)
    earned.learner.bind(engine)
    key = QuestionKey("team", question, "embedded", engine.reader.model)
    q = earned.learner._question(key)
    texts, labels = _labelled(32, *([options] if options else []))
    rung = earned.learner._version(q, 1, list(zip(range(32), texts, labels)))
    return as_compiled(rung.model).head


def test_the_learner_fits_a_head_that_reads_the_written_question(engine, monkeypatch):
    head = _learner_head(engine, QUESTION, monkeypatch)
    assert head is not None and head.written == lh.WRITTEN_WEIGHT > 0
    # nothing to read as written: the embedding alone
    assert _learner_head(engine, BARE, monkeypatch, options=("yes", "no")).written == 0.0
    # switched off
    assert _learner_head(engine, QUESTION, monkeypatch, weight=0.0).written == 0.0
