"""The real TransformersReader on a tiny random DiffusionGemma, end to end through the engine."""

import math

import pytest

import agentbranch as ab
from agentbranch.core.questions import to_spec
from agentbranch.core.reads import ReadRequest

QUESTIONS = {
    "team": ab.choice("Which team?", {"billing": "Invoices", "outage": "Down", "bug": "Defect"}),
    "urgent": ab.yes_no("Is this urgent?"),
    "anger": ab.score("How angry?", ["calm", "annoyed", "angry", "furious"]),
}
STATES = ["The site is down!", "Please resend my invoice for March, thanks.", "x"]


@pytest.fixture(scope="module")
def reader(tiny_model_dir):
    return ab.TransformersReader.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def engine(reader):
    return ab.DecisionEngine(reader)


def probs(decisions):
    return {q: d.probabilities for q, d in decisions.items()}


def assert_close(a, b, tol=1e-5):
    assert list(a) == list(b)
    for qid in a:
        assert a[qid].probs == pytest.approx(b[qid].probs, abs=tol)


def test_batched_reads_equal_single_reads(engine):
    batched = engine.decide_many(STATES, QUESTIONS)
    for state, many in zip(STATES, batched):
        single = engine.decide(state, QUESTIONS)
        for qid in QUESTIONS:
            assert many[qid].probs == pytest.approx(single[qid].probs, abs=1e-5)
            assert many[qid].label_mass == pytest.approx(single[qid].label_mass, abs=1e-5)


def test_decide_many_is_one_forward(reader, monkeypatch):
    calls = []
    original = reader.backend.read_tokens
    monkeypatch.setattr(
        reader.backend, "read_tokens", lambda reads: calls.append(len(reads)) or original(reads)
    )
    ab.DecisionEngine(reader).decide_many(STATES, QUESTIONS)
    assert calls == [len(STATES) * len(QUESTIONS)]


def test_repeated_reads_are_identical(engine):
    assert probs(engine.decide(STATES[0], QUESTIONS)) == probs(engine.decide(STATES[0], QUESTIONS))


def test_probabilities_and_uncertainty_follow_their_formulas(engine):
    for d in engine.decide(STATES[1], QUESTIONS).values():
        p = d.probs
        assert sum(p) == pytest.approx(1.0)
        h = -sum(x * math.log(x) for x in p if x > 0)
        assert d.entropy == pytest.approx(h)
        assert d.confidence == pytest.approx(1 - h / math.log(len(p)))
        top, second = sorted(p, reverse=True)[:2]
        assert d.margin == pytest.approx(top - second)
        assert 0 < d.label_mass <= 1
        assert d.reader == "transformers" and d.latency_s > 0


def test_probabilities_are_the_softmax_of_the_label_logprobs(reader):
    spec = to_spec("team", QUESTIONS["team"])
    (read,) = reader.plan([ReadRequest(STATES[0], (spec,))])[0]
    (slot,) = reader.read_tokens([read])[0]
    z = sum(math.exp(lp) for lp in slot.logprobs)
    expected = [math.exp(lp) / z for lp in slot.logprobs]
    d = ab.DecisionEngine(reader).decide(STATES[0], {"team": QUESTIONS["team"]})["team"]
    assert d.probs == pytest.approx(expected, abs=1e-9)
    assert d.label_mass == pytest.approx(z)


def test_joint_reads_give_one_answer_per_question(reader):
    joint = ab.DecisionEngine(reader, joint=True)
    d = joint.decide(STATES[0], QUESTIONS)
    assert list(d) == list(QUESTIONS)
    assert all(sum(x.probs) == pytest.approx(1.0) for x in d.values())
    many = joint.decide_many(STATES, QUESTIONS)
    for state, m in zip(STATES, many):
        assert_close(m, joint.decide(state, QUESTIONS))


def test_noise_draws_are_averaged_with_agreement(reader):
    d = ab.DecisionEngine(reader, draws=4).decide(STATES[0], QUESTIONS)
    assert all(0.0 <= x.agreement <= 1.0 for x in d.values())
    one = ab.DecisionEngine(reader).decide(STATES[0], QUESTIONS)
    assert probs(d) != probs(one)  # other noise tokens change the read


def test_many_options_are_chunked_on_the_real_reader(reader):
    options = [f"team number {i}" for i in range(40)]
    d = ab.DecisionEngine(reader).decide("x", {"t": ab.choice("Which?", options)})["t"]
    assert len(d.probabilities) == 40 and sum(d.probs) == pytest.approx(1.0)


async def test_async_path_matches(engine):
    a = await engine.adecide(STATES[0], QUESTIONS)
    assert_close(a, engine.decide(STATES[0], QUESTIONS), tol=1e-12)


@pytest.mark.parametrize(
    ("state", "questions", "error"),
    [
        ("x", {"t": ab.choice("?", ["a", "b"])}, None),
        ("x<turn|>", {"u": ab.yes_no("?")}, ab.SpecialTokenError),
        ("word " * 5000, {"u": ab.yes_no("?")}, ab.StateTooLongError),
        (
            "x",
            {"s": {"type": "score", "instructions": "?", "criteria": [str(i) for i in range(11)]}},
            ab.InvalidQuestionError,
        ),
        (
            "x",
            {"t": {"type": "choice", "instructions": "?", "criteria": {"a": None}}},
            ab.InvalidQuestionError,
        ),
    ],
)
def test_bad_input_raises_agentbranch_errors(engine, state, questions, error):
    if error is None:
        engine.decide(state, questions)
        return
    with pytest.raises(error) as info:
        engine.decide(state, questions)
    assert isinstance(info.value, ab.AgentBranchError)


def test_special_tokens_as_text_on_request(tiny_model_dir):
    reader = ab.TransformersReader.from_pretrained(tiny_model_dir, special_tokens="text")
    d = ab.DecisionEngine(reader).decide("ignore<turn|> this", {"u": ab.yes_no("?")})
    assert sum(d["u"].probs) == pytest.approx(1.0)


def test_length_bucketing_groups_similar_prompts_and_keeps_results(tiny_model_dir, engine):
    bucketed = ab.TransformersReader.from_pretrained(tiny_model_dir, bucket_padding=0.1)
    states = ["x", "a much longer ticket " * 12, "y", "another long ticket text " * 12]
    toks, _ = bucketed.plan(
        [ReadRequest(s, tuple(to_spec(k, v) for k, v in QUESTIONS.items())) for s in states]
    )
    groups = bucketed.backend._groups(toks)
    assert sorted(i for g in groups for i in g) == list(range(len(toks)))
    for g in groups:  # padding bounded within each forward
        lens = [len(toks[i].prompt_ids) for i in g]
        assert max(lens) * len(lens) <= 1.1 * sum(lens)
    assert len(groups) > 1
    one_forward = ab.TransformersReader.from_pretrained(tiny_model_dir, bucket_padding=None)
    assert len(one_forward.backend._groups(toks)) == 1
    for a, b in zip(
        ab.DecisionEngine(bucketed).decide_many(states, QUESTIONS),
        ab.DecisionEngine(one_forward).decide_many(states, QUESTIONS),
    ):
        assert_close(a, b)


def test_length_bucketing_is_on_by_default_on_cpu(tiny_model_dir):
    assert ab.TransformersReader.from_pretrained(tiny_model_dir).backend.bucket_padding == 0.25
    with pytest.raises(ab.ConfigurationError, match="bucket_padding"):
        ab.TransformersReader.from_pretrained(tiny_model_dir, bucket_padding="always")
