"""RemoteReader against a fake /v1/systemone or /v1/decisions server
(httpx.MockTransport): the wire payload, the mapping of answers into reads and
decisions, concurrency, retries, errors.

The same reader is tested against vLLM's real server in tests/vllm_tier."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from _hostile_inputs import Pairs, dump
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentbranch as ab
from agentbranch.core.errors import (
    ConfigurationError,
    InvalidReadError,
    ReaderError,
    ReaderTimeoutError,
)
from agentbranch.core.reads import QuestionSpec, ReadRequest
from agentbranch.engine.readers.remote import (
    RemoteReader,
    RemoteRequestError,
    RemoteUnavailableError,
    build_decisions_payload,
    build_payload,
    parse_answers,
    parse_decisions_answers,
)

URL = "http://vllm.test:8000"


def _softmax_like(n: int, top: int) -> list[float]:
    weights = [1.0 + (5.0 if i == top else i * 0.1) for i in range(n)]
    z = sum(weights)
    return [w / z for w in weights]


def fake_answer(spec: dict, mass: float = 0.5) -> tuple[dict, dict]:
    """A vLLM-shaped answer and diagnostics for one wire question: the last option
    wins (choice/score), yes wins (noul)."""
    kind = spec["type"]
    if kind == "noul":
        probs = [0.8, 0.2]
        answer = {
            "type": "noul",
            "noul": probs[0],
            "probabilities": {"yes": probs[0], "no": probs[1]},
            "confidence": max(probs) * mass,
        }
    elif kind == "choice":
        names = list(spec["criteria"])
        probs = _softmax_like(len(names), len(names) - 1)
        answer = {
            "type": "choice",
            "choice": names[-1],
            "probabilities": dict(zip(names, probs)),
            "confidence": max(probs) * mass,
        }
    else:
        levels = spec["criteria"]
        probs = _softmax_like(len(levels), len(levels) - 1)
        answer = {
            "type": "score",
            "score": sum(i * p for i, p in enumerate(probs)),
            "legend": {str(i): name for i, name in enumerate(levels)},
            "probabilities": {str(i): p for i, p in enumerate(probs)},
            "confidence": max(probs) * mass,
        }
    return answer, {"label_mass": mass, "argmax_is_label": mass > 0.4}


def fake_response(body: dict, *, diagnostics: bool = True, mass: float = 0.5) -> dict:
    answers, diags = {}, {}
    for qid, spec in body["questions"].items():
        answers[qid], diags[qid] = fake_answer(spec, mass)
    out = {
        "id": "decision-1",
        "object": "structured_decision",
        "model": body.get("model", "tiny-model"),
        "answers": answers,
        "usage": {"input_tokens": 10, "output_tokens": len(answers)},
    }
    if diagnostics:
        out["diagnostics"] = diags
    return out


class FakeServer:
    """Records requests; answers like vLLM, or with scripted failures first."""

    def __init__(self, failures: list | None = None, **response_kw) -> None:
        self.bodies: list[dict] = []
        self.headers: list[httpx.Headers] = []
        self.failures = list(failures or [])
        self.response_kw = response_kw
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            body = json.loads(request.content)
            self.bodies.append(body)
            self.headers.append(request.headers)
            failure = self.failures.pop(0) if self.failures else None
        if isinstance(failure, Exception):
            raise failure
        if isinstance(failure, httpx.Response):
            return failure
        assert request.url.path == "/v1/systemone"
        return httpx.Response(200, json=fake_response(body, **self.response_kw))

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        return self(request)


def reader_for(server: FakeServer, **kw) -> RemoteReader:
    kw.setdefault("backoff_s", 0.0)
    return RemoteReader(
        URL,
        transport=httpx.MockTransport(server),
        async_transport=httpx.MockTransport(server.handle_async),
        **kw,
    )


QUESTIONS = {
    "team": ab.choice("Which team?", {"billing": "Invoices", "bugs": None, "sales": "Deals"}),
    "urgent": ab.yes_no("Is it urgent?", yes="Needs an answer within the hour"),
    "severity": ab.score("How severe?", ["low", "medium", "high"]),
}


def spec(qid: str, kind: str, options, descriptions=None, instructions="Q?") -> QuestionSpec:
    labels = {"choice": "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "noul": ("yes", "no"), "score": "0123456789"}
    return QuestionSpec(
        id=qid,
        type=kind,
        instructions=instructions,
        options=tuple(options),
        descriptions=tuple(descriptions or [None] * len(options)),
        labels=tuple(labels[kind][: len(options)]),
    )


CHOICE = spec("c", "choice", ["a", "b"])
NOUL = spec("n", "noul", ["yes", "no"])
ONE = ReadRequest(state="s", questions=(CHOICE,))


# ----------------------------------------------------------------------------- wire


def test_payload_matches_system_one_shape():
    request = ReadRequest(
        state="The app is down",
        questions=(
            spec("team", "choice", ["billing", "bugs"], ["Invoices", None]),
            spec("urgent", "noul", ["yes", "no"], ["Within the hour", None]),
            spec("plain", "noul", ["yes", "no"]),
            spec("severity", "score", ["low", "high"], instructions=""),
        ),
        instructions="You triage tickets.",
    )
    body = build_payload(request, model="m", extra={"cache_salt": "s"})
    assert body == {
        "model": "m",
        "state": "The app is down",
        "instructions": "You triage tickets.",
        "cache_salt": "s",
        "questions": {
            "team": {
                "type": "choice",
                "instructions": "Q?",
                "criteria": {"billing": "Invoices", "bugs": None},
            },
            "urgent": {
                "type": "noul",
                "instructions": "Q?",
                "criteria": {"true": "Within the hour"},
            },
            "plain": {"type": "noul", "instructions": "Q?"},
            "severity": {"type": "score", "instructions": "", "criteria": ["low", "high"]},
        },
    }
    # No model and no instructions: the keys are left out (the server's defaults).
    bare = build_payload(ReadRequest(state="s", questions=request.questions[:1]))
    assert set(bare) == {"state", "questions"}


def test_repeated_question_reads_get_unique_wire_ids():
    # The engine reads a choice in several option orders under the same id.
    a = spec("team", "choice", ["x", "y"])
    b = spec("team", "choice", ["y", "x"])
    request = ReadRequest(state="s", questions=(a, b, spec("team~1", "noul", ["yes", "no"])))
    body = build_payload(request)
    assert list(body["questions"]) == ["team", "team~1", "team~1~"]
    reads = parse_answers(request, fake_response(body))
    # Each read maps back to its own options: the last option wins in both orders.
    assert reads[0].logprobs[1] > reads[0].logprobs[0]
    assert reads[1].logprobs[1] > reads[1].logprobs[0]


def test_answers_become_full_vocabulary_logprobs():
    request = ReadRequest(
        state="s",
        questions=(
            spec("c", "choice", ["a", "b", "c"]),
            spec("n", "noul", ["yes", "no"]),
            spec("s", "score", ["lo", "mid", "hi"]),
        ),
    )
    response = fake_response(build_payload(request), mass=0.25)
    reads = parse_answers(request, response)
    for q, read in zip(request.questions, reads):
        answer = response["answers"][q.id]
        probs = (
            [answer["probabilities"][o] for o in q.options]
            if q.type != "score"
            else [answer["probabilities"][str(i)] for i in range(len(q.options))]
        )
        assert read.label_mass == pytest.approx(0.25)
        assert [math.exp(lp) for lp in read.logprobs] == pytest.approx([p * 0.25 for p in probs])
        assert read.argmax_is_label is False
        assert read.agreement == 1.0


def test_label_mass_from_confidence_when_no_diagnostics():
    request = ONE
    response = fake_response(build_payload(request), diagnostics=False, mass=0.3)
    (read,) = parse_answers(request, response)
    assert read.label_mass == pytest.approx(0.3)
    assert read.argmax_is_label is True
    # Neither diagnostics nor confidence: mass 1, logprobs are log(p).
    del response["answers"]["c"]["confidence"]
    (read,) = parse_answers(request, response)
    assert read.label_mass == 1.0
    assert sum(math.exp(lp) for lp in read.logprobs) == pytest.approx(1.0)


def test_a_null_confidence_or_label_mass_is_invalid_not_unknown():
    # Found by hypothesis: {"confidence": null} was read as no confidence, i.e. label
    # mass 1, the most trusting value. A field that is there must be a number.
    request = ONE
    response = fake_response(build_payload(request), diagnostics=False, mass=0.3)
    response["answers"]["c"]["confidence"] = None
    with pytest.raises(InvalidReadError, match="confidence None"):
        parse_answers(request, response)
    response = fake_response(build_payload(request), diagnostics=True, mass=0.3)
    response["diagnostics"]["c"]["label_mass"] = None
    with pytest.raises(InvalidReadError, match="label_mass None"):
        parse_answers(request, response)


def test_noul_answer_with_only_p_yes():
    request = ReadRequest(state="s", questions=(spec("n", "noul", ["yes", "no"]),))
    (read,) = parse_answers(request, {"answers": {"n": {"noul": 0.9}}})
    assert [math.exp(lp) for lp in read.logprobs] == pytest.approx([0.9, 0.1])


def test_malformed_responses_are_reader_errors():
    request = ONE
    with pytest.raises(ReaderError, match="no 'answers'"):
        parse_answers(request, {"choices": []})
    with pytest.raises(ReaderError, match="no answer for question 'c'"):
        parse_answers(request, {"answers": {}})
    with pytest.raises(ReaderError, match="lacks the label probabilities"):
        parse_answers(request, {"answers": {"c": {"choice": "a"}}})


# Server numbers around every edge of the rules: plain floats in [0, 1] are the usual
# answer; everything else must be typed and bounded exactly (some of these pass).
ODD = [math.nan, math.inf, -math.inf, -0.0, 0, 1, 5e-324, -1e-7, 1 + 1e-7, 1 + 1e-5, -0.9, 1.7]
ODD += ["0.5", True, False, None]
#: argmax_is_label: a JSON boolean, nothing else ("false" is not false, nor true).
ODD_FLAGS = [True, False, "false", "true", 0, 1, None]
#: Factors that scale a normalised answer down: the label mass its numbers imply.
MASS_SCALE = [1.0, 0.5, 0.0015, 0.001, 1e-5, 2e-6, 1e-6, 1e-9, 1e-300, 0.0]
FUZZED = ReadRequest(
    state="s",
    questions=(
        spec("team", "choice", ["billing", "bugs", "sales"]),
        spec("urgent", "noul", ["yes", "no"]),
        spec("severity", "score", ["low", "medium", "high"]),
    ),
)
WIRE_KEYS = {
    "team": ["billing", "bugs", "sales"],
    "urgent": ["yes", "no"],
    "severity": ["0", "1", "2"],
}


def _rarely(draw) -> bool:
    return draw(st.integers(0, 11)) == 11  # hypothesis shrinks towards the common case


def _number(draw, good: float) -> object:
    """``good`` mostly, else an odd value."""
    return draw(st.sampled_from(ODD)) if _rarely(draw) else good


@st.composite
def server_answer(draw, key: str) -> tuple[dict, dict, tuple | None]:
    """An answer and diagnostics for one wire question, and a key its probabilities
    repeat (``None`` mostly): mostly valid, else with an odd number, a missing or extra
    option, a sum over 1, a bad confidence, label mass or argmax flag, or probabilities
    scaled down (the label mass they imply, down to none at all)."""
    repeat = None
    if key == "urgent" and draw(st.booleans()):
        probs = [draw(st.floats(0, 1))]
        answer: dict = {"noul": _number(draw, probs[0])}
    else:
        keys = WIRE_KEYS[key][:-1] if _rarely(draw) else WIRE_KEYS[key]
        keys = keys + ["zz"] if _rarely(draw) else keys
        probs = [draw(st.floats(0, 1)) for _ in keys]
        if sum(probs) > 0 and not _rarely(draw):  # servers normalise
            probs = [p / sum(probs) for p in probs]
        if draw(st.booleans()):  # ... but may say the labels got only part of the mass
            scale = draw(st.sampled_from(MASS_SCALE) | st.floats(0, 1))
            probs = [p * scale for p in probs]
        answer = {"probabilities": {k: _number(draw, p) for k, p in zip(keys, probs)}}
        if _rarely(draw):  # the same option twice: the first or the last value?
            repeat = (draw(st.sampled_from(keys)), draw(st.floats(0, 1)))
    if draw(st.booleans()):  # vLLM's confidence: p_top × label mass
        top = max(probs) / (sum(probs) if sum(probs) > 1e-6 and "noul" not in answer else 1)
        answer["confidence"] = _number(draw, top * draw(st.floats(0, 1)))
    diag: dict = {}
    if draw(st.booleans()):
        diag["label_mass"] = _number(draw, draw(st.floats(0, 1)))
    if draw(st.booleans()):
        diag["argmax_is_label"] = draw(st.sampled_from(ODD_FLAGS))
    return answer, diag, repeat


def _expected_read(key: str, answer: dict, diag: dict) -> tuple[list[float], float, bool] | None:
    """The read the rules allow (the docstrings of remote.answers and remote.parse),
    written out independently of the reader: ``(logprobs, label_mass, argmax_is_label)``,
    or ``None`` when the answer must be an error."""

    def number(p):  # a probability, clamped within rounding, or None
        if isinstance(p, bool) or not isinstance(p, int | float) or not math.isfinite(p):
            return None
        return min(1.0, max(0.0, float(p))) if -1e-6 <= p <= 1 + 1e-6 else None

    if "noul" in answer:
        p = number(answer["noul"])
        if p is None:
            return None
        probs = [p, 1.0 - p]
    else:
        given_ = answer["probabilities"]
        if set(given_) != set(WIRE_KEYS[key]):
            return None
        probs = [number(given_[k]) for k in WIRE_KEYS[key]]
        if None in probs:
            return None
    total = math.fsum(probs)
    if total > 1 + 1e-3 or total <= 1e-6:  # more than all the mass, or none at all
        return None
    implied = 1.0 if total >= 1 - 1e-3 else total
    shares = probs if implied == 1.0 else [p / total for p in probs]
    mass = implied
    if "confidence" in answer:
        confidence = number(answer["confidence"])
        if confidence is None or confidence / max(shares) > 1 + 1e-6:
            return None
        if "label_mass" not in diag:
            mass = min(mass, confidence / max(shares))
    if "label_mass" in diag:
        reported = number(diag["label_mass"])
        if reported is None:
            return None
        mass = min(mass, reported)
    flag = diag.get("argmax_is_label", True)
    if not isinstance(flag, bool):
        return None
    scale = math.log(mass) if mass > 0 else 0.0
    logprobs = [math.log(p) + scale if p > 0 else -math.inf for p in shares]
    return logprobs, mass, flag


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_answer_is_validated_on_the_async_path(data):
    """Through ``aread`` (the path tuned for client CPU): an answer with a NaN, an
    infinity, a number outside [0, 1], a non-number, a missing, extra or repeated option,
    a sum over 1 or of (almost) nothing, a bad confidence, label mass or argmax flag is
    an ``InvalidReadError`` (and the engine raises, never decides); any other answer gives
    exactly the read the rules say, its label mass never above the one its numbers
    imply."""
    drawn = {key: data.draw(server_answer(key), label=key) for key in WIRE_KEYS}
    answers = Pairs()
    for key, (answer, _, repeat) in drawn.items():
        if repeat is not None:
            answer = {**answer, "probabilities": Pairs([*answer["probabilities"].items(), repeat])}
        answers.append((key, answer))
    content = dump(
        {"answers": answers, "diagnostics": {key: diag for key, (_, diag, _) in drawn.items()}}
    ).encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=content))
    reader = RemoteReader(URL, async_transport=transport)
    expected = {
        key: None if repeat is not None else _expected_read(key, answer, diag)
        for key, (answer, diag, repeat) in drawn.items()
    }
    try:
        (reads,) = asyncio.run(reader.aread([FUZZED]))
        if any(e is None for e in expected.values()):
            assert isinstance(reads, InvalidReadError), f"an invalid answer was read: {reads}"
            with pytest.raises(ReaderError):
                asyncio.run(ab.DecisionEngine(reader, batching=False).adecide("s", QUESTIONS))
            return
        assert isinstance(reads, list), reads
        for q, read in zip(FUZZED.questions, reads):
            want, mass, flag = expected[q.id]
            assert len(read.logprobs) == len(want)
            for got, lp in zip(read.logprobs, want):
                assert got == lp or math.isclose(got, lp, rel_tol=1e-12), (q.id, read, want)
                assert not math.isnan(got) and got <= 0
            assert read.label_mass == pytest.approx(mass, rel=1e-12, abs=0)
            assert read.argmax_is_label is flag
    finally:
        reader.close()


# --------------------------------------------------------------------- decisions


def test_engine_decisions_match_server_answers_sync_and_async():
    server = FakeServer()
    with reader_for(server, model="tiny-model") as reader:
        engine = ab.DecisionEngine(reader=reader, instructions="Triage.")
        sync = engine.decide("Checkout fails for everyone", QUESTIONS)
        async_ = asyncio.run(engine.adecide("Checkout fails for everyone", QUESTIONS))
    for decisions in (sync, async_):
        assert decisions["team"].label == "sales"
        assert decisions["urgent"].label == "yes"
        assert decisions["severity"].label == "high"
        assert decisions["urgent"].probabilities["yes"] == pytest.approx(0.8)
        assert decisions["team"].label_mass == pytest.approx(0.5)
    body = server.bodies[0]
    assert body["model"] == "tiny-model"
    assert body["instructions"] == "Triage."
    assert body["state"] == "Checkout fails for everyone"
    assert body["questions"]["urgent"]["criteria"] == {"true": "Needs an answer within the hour"}
    assert server.bodies[0] == server.bodies[1]


def test_model_name_learned_from_response():
    reader = reader_for(FakeServer())
    assert reader.model == "unknown"
    reader.read([ONE])
    assert reader.model == "tiny-model"


def test_api_key_headers_and_full_url():
    server = FakeServer()
    reader = RemoteReader(
        URL + "/v1/systemone/",
        api_key="sekret",
        headers={"x-team": "agents"},
        transport=httpx.MockTransport(server),
        async_transport=httpx.MockTransport(server.handle_async),
    )
    reader.read([ONE])
    asyncio.run(reader.aread([ONE]))
    for headers in server.headers:  # sync and async alike
        assert headers["authorization"] == "Bearer sekret"
        assert headers["x-team"] == "agents"
        assert headers["content-type"] == "application/json"


def test_one_http_request_per_read_request_sent_concurrently():
    barrier = asyncio.Event()
    arrived = []

    async def handler(request: httpx.Request) -> httpx.Response:
        arrived.append(json.loads(request.content)["state"])
        if len(arrived) == 3:
            barrier.set()
        # Every request of the batch must be in flight before any is answered.
        await asyncio.wait_for(barrier.wait(), 5)
        return httpx.Response(200, json=fake_response(json.loads(request.content)))

    reader = RemoteReader(URL, async_transport=httpx.MockTransport(handler))
    requests = [
        ReadRequest(state=f"s{i}", questions=(spec("c", "choice", ["a", "b"]), NOUL))
        for i in range(3)
    ]
    reads = asyncio.run(reader.aread(requests))
    assert sorted(arrived) == ["s0", "s1", "s2"]
    assert [len(r) for r in reads] == [2, 2, 2]


def test_sync_batch_is_concurrent_too():
    gate = threading.Barrier(3, timeout=5)

    def handler(request: httpx.Request) -> httpx.Response:
        gate.wait()  # deadlocks (BrokenBarrierError) unless all three are in flight
        return httpx.Response(200, json=fake_response(json.loads(request.content)))

    reader = RemoteReader(URL, transport=httpx.MockTransport(handler))
    requests = [ReadRequest(state=f"s{i}", questions=(CHOICE,)) for i in range(3)]
    assert len(reader.read(requests)) == 3
    reader.close()


def test_empty_request_sends_nothing():
    server = FakeServer()
    reader = reader_for(server)
    assert reader.read([ReadRequest(state="s", questions=())]) == [[]]
    assert server.bodies == []


# ------------------------------------------------------------------ retries/errors


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_transient_statuses_are_retried(status):
    server = FakeServer(failures=[httpx.Response(status, json={"error": {"message": "busy"}})] * 2)
    reader = reader_for(server, max_retries=2)
    reads = reader.read([ONE])
    assert len(reads[0]) == 1
    assert len(server.bodies) == 3


def test_connect_errors_are_retried_sync_and_async():
    for use_async in (False, True):
        server = FakeServer(failures=[httpx.ConnectError("refused")])
        reader = reader_for(server, max_retries=1)
        request = ONE
        reads = asyncio.run(reader.aread([request])) if use_async else reader.read([request])
        assert len(reads[0]) == 1
        assert len(server.bodies) == 2


def test_retries_are_bounded():
    server = FakeServer(failures=[httpx.Response(503, text="warming up")] * 10)
    reader = reader_for(server, max_retries=2)
    with pytest.raises(RemoteUnavailableError, match="after 3 attempts.*HTTP 503: warming up"):
        reader.read([ONE])
    assert len(server.bodies) == 3
    server = FakeServer(failures=[httpx.ConnectError("refused")] * 10)
    with pytest.raises(RemoteUnavailableError, match="refused"):
        asyncio.run(reader_for(server, max_retries=1).aread([ONE]))
    assert len(server.bodies) == 2


def test_backoff_grows_per_attempt_sync_and_async():
    """``max_retries + 1`` attempts in all, waiting ``_delay(0)``, ``_delay(1)`` ...
    between them."""
    for use_async in (False, True):
        for retries in (0, 1, 3):
            server = FakeServer(failures=[httpx.Response(503, text="busy")] * 10)
            reader = reader_for(server, max_retries=retries)
            waits: list[int] = []
            reader._delay = lambda attempt, response, w=waits: w.append(attempt) or 0.0
            with pytest.raises(RemoteUnavailableError, match=f"after {retries + 1} attempts"):
                if use_async:
                    asyncio.run(reader.aread([ONE]))
                else:
                    reader.read([ONE])
            assert len(server.bodies) == retries + 1
            assert waits == list(range(retries))


def test_retry_after_is_honoured_but_capped():
    reader = reader_for(FakeServer(), backoff_s=0.01, max_backoff_s=0.5)
    response = httpx.Response(429, headers={"retry-after": "30"})
    assert reader._delay(0, response) == 0.5
    assert reader._delay(0, httpx.Response(429, headers={"retry-after": "0.2"})) == 0.2
    assert 0.005 <= reader._delay(0, None) <= 0.01


def test_4xx_names_the_server_message_and_is_not_retried():
    message = "question 'team': at most 26 options for this model"
    server = FakeServer(
        failures=[
            httpx.Response(
                400, json={"error": {"message": message, "type": "BadRequestError", "code": 400}}
            )
        ]
    )
    reader = reader_for(server, max_retries=3)
    with pytest.raises(RemoteRequestError, match="HTTP 400: question 'team'") as info:
        reader.read([ONE])
    assert info.value.status_code == 400
    assert info.value.server_message == message
    assert isinstance(info.value, ab.AgentBranchError)
    assert len(server.bodies) == 1


def test_404_model_hint():
    server = FakeServer(
        failures=[httpx.Response(404, json={"error": {"message": "The model `x` does not exist."}})]
    )
    with pytest.raises(RemoteRequestError, match="does not exist.*served model name"):
        reader_for(server, model="x").read([ONE])


def test_500_is_a_reader_error_without_retry():
    server = FakeServer(failures=[httpx.Response(500, json={"error": {"message": "engine died"}})])
    with pytest.raises(ReaderError, match="HTTP 500: engine died") as info:
        reader_for(server).read([ONE])
    assert not isinstance(info.value, RemoteRequestError)
    assert len(server.bodies) == 1


def test_read_timeout_is_reader_timeout_error():
    server = FakeServer(failures=[httpx.ReadTimeout("slow")])
    with pytest.raises(ReaderTimeoutError, match="timeout"):
        reader_for(server).read([ONE])
    assert len(server.bodies) == 1


def test_engine_wraps_nothing_extra_around_remote_errors():
    server = FakeServer(failures=[httpx.Response(400, json={"error": {"message": "bad"}})])
    engine = ab.DecisionEngine(reader=reader_for(server))
    with pytest.raises(RemoteRequestError, match="bad"):
        engine.decide("s", {"u": ab.yes_no("Urgent?")})


def test_too_many_options_for_one_read_is_a_configuration_error():
    reader = reader_for(FakeServer(), max_options=2)
    with pytest.raises(ConfigurationError, match="max_options"):
        reader.read([ReadRequest(state="s", questions=(spec("c", "choice", ["a", "b", "c"]),))])


def test_engine_splits_large_choices_for_the_server_limit():
    server = FakeServer()
    reader = reader_for(server, max_options=4)
    options = [f"o{i}" for i in range(10)]
    decision = ab.DecisionEngine(reader=reader).decide("s", {"pick": ab.choice("Which?", options)})
    sent = server.bodies[0]["questions"]
    assert all(len(q["criteria"]) <= 4 for q in sent.values())
    assert sorted(o for q in sent.values() for o in q["criteria"]) == sorted(options)
    assert decision["pick"].label in options


def test_closed_reader_refuses_reads_and_close_is_idempotent():
    reader = reader_for(FakeServer())
    reader.close()
    reader.close()
    with pytest.raises(ReaderError, match="closed"):
        reader.read([ONE])


def test_bad_configuration():
    with pytest.raises(ConfigurationError, match="http"):
        RemoteReader("localhost:8000")
    with pytest.raises(ConfigurationError):
        RemoteReader(URL, max_retries=-1)


def test_aclose():
    reader = reader_for(FakeServer())

    async def run() -> None:
        await reader.aread([ONE])
        await reader.aclose()

    asyncio.run(run())
    with pytest.raises(ReaderError, match="closed"):
        asyncio.run(reader.aread([ONE]))


# ------------------------------------------------------------ /v1/decisions (0.33)


def fake_decision_answer(question: dict, mass: float = 0.5) -> dict:
    """An answer as vLLM 0.33's ``make_answer`` builds it: the last choice/level wins."""
    if question["type"] == "predicate":
        return {"type": "predicate", "name": question.get("name"), "probability": 0.7}
    items = question["choices"] if question["type"] == "choice" else question["levels"]
    probs = _softmax_like(len(items), len(items) - 1)
    answer = {"type": question["type"], "name": question.get("name")}
    if question["type"] == "choice":
        answer["choice"] = items[-1]["value"]
        answer["probabilities"] = [
            {"value": c["value"], "probability": p} for c, p in zip(items, probs)
        ]
    else:
        answer["score"] = sum(i * p for i, p in enumerate(probs))
        answer["probabilities"] = [
            {"value": i, "label": lv["label"], "probability": p}
            for i, (lv, p) in enumerate(zip(items, probs))
        ]
    answer["confidence"] = max(probs) * mass
    return answer


def fake_decision_response(body: dict, mass: float = 0.5) -> dict:
    n = len(body["questions"])
    return {
        "model": body["model"],
        "answers": [fake_decision_answer(q, mass) for q in body["questions"]],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": n,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 10 + n,
        },
    }


class FakeDecisionsServer(FakeServer):
    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self.lock:
            body = json.loads(request.content)
            self.bodies.append(body)
            self.headers.append(request.headers)
            failure = self.failures.pop(0) if self.failures else None
        if isinstance(failure, Exception):
            raise failure
        if isinstance(failure, httpx.Response):
            return failure
        assert request.url.path == "/v1/decisions"
        return httpx.Response(200, json=fake_decision_response(body, **self.response_kw))


def decisions_reader(server: FakeServer, **kw) -> RemoteReader:
    kw.setdefault("model", "dg")
    return reader_for(server, api="decisions", **kw)


MIXED = ReadRequest(
    state="The app is down",
    questions=(
        spec("team", "choice", ["billing", "bugs"], ["Invoices", None]),
        spec("urgent", "noul", ["yes", "no"], ["Within the hour", None]),
        spec("plain", "noul", ["yes", "no"]),
        spec("severity", "score", ["low", "high"], instructions=""),
    ),
)


def test_decisions_payload_shape():
    body = build_decisions_payload(MIXED, model="dg", extra={"cache_salt": "s"})
    assert body == {
        "model": "dg",
        "input": "The app is down",
        "cache_salt": "s",
        "questions": [
            {
                "type": "choice",
                "name": "team",
                "instructions": "Q?",
                "choices": [{"value": "billing", "description": "Invoices"}, {"value": "bugs"}],
            },
            # yes/no: vLLM's predicate is read as the choice [false, true]; sent as that
            # choice it keeps the descriptions and answers with a confidence.
            {
                "type": "choice",
                "name": "urgent",
                "instructions": "Q?",
                "choices": [{"value": False}, {"value": True, "description": "Within the hour"}],
            },
            {
                "type": "choice",
                "name": "plain",
                "instructions": "Q?",
                "choices": [{"value": False}, {"value": True}],
            },
            {
                "type": "score",
                "name": "severity",
                "instructions": "",
                "levels": [{"label": "low"}, {"label": "high"}],
            },
        ],
    }
    # joint is sent only when asked; instructions become a first user message.
    joint = dataclasses.replace(MIXED, joint=True, instructions="You triage tickets.")
    body = build_decisions_payload(joint, model="dg")
    assert body["joint"] is True
    assert body["input"] == [
        {"role": "user", "content": "You triage tickets."},
        {"role": "user", "content": "The app is down"},
    ]
    with pytest.raises(ConfigurationError, match="model"):
        build_decisions_payload(MIXED)
    # Repeated reads of one question get unique names, as on /v1/systemone.
    twice = ReadRequest(state="s", questions=(CHOICE, CHOICE))
    assert [q["name"] for q in build_decisions_payload(twice, model="m")["questions"]] == [
        "c",
        "c~1",
    ]


def test_decisions_answers_become_full_vocabulary_logprobs():
    response = fake_decision_response(build_decisions_payload(MIXED, model="dg"), mass=0.25)
    reads = parse_decisions_answers(MIXED, response)
    expected = []
    for answer in response["answers"]:
        by_value = {
            (type(e["value"]), e["value"]): e["probability"] for e in answer["probabilities"]
        }
        expected.append(by_value)
    choice, urgent, plain, severity = reads
    assert [math.exp(lp) for lp in choice.logprobs] == pytest.approx(
        [expected[0][(str, "billing")] * 0.25, expected[0][(str, "bugs")] * 0.25]
    )
    # yes/no: logprobs in (yes, no) order = (true, false); true (the last value) wins.
    assert [math.exp(lp) for lp in urgent.logprobs] == pytest.approx(
        [expected[1][(bool, True)] * 0.25, expected[1][(bool, False)] * 0.25]
    )
    assert urgent.logprobs[0] > urgent.logprobs[1]
    assert plain.logprobs == urgent.logprobs
    assert [math.exp(lp) for lp in severity.logprobs] == pytest.approx(
        [expected[3][(int, 0)] * 0.25, expected[3][(int, 1)] * 0.25]
    )
    for read in reads:
        assert read.label_mass == pytest.approx(0.25)
        assert read.argmax_is_label is True
        assert read.extras["answer"]["confidence"] > 0


def test_decisions_predicate_answer_has_no_label_mass():
    request = ReadRequest(state="s", questions=(NOUL,))
    answer = {"type": "predicate", "name": "n", "probability": 0.9}
    (read,) = parse_decisions_answers(request, {"model": "m", "answers": [answer]})
    assert [math.exp(lp) for lp in read.logprobs] == pytest.approx([0.9, 0.1])
    assert read.label_mass == 1.0


def test_malformed_decisions_responses_are_reader_errors():
    with pytest.raises(ReaderError, match="no 'answers' list"):
        parse_decisions_answers(ONE, {"answers": {"c": {}}})
    with pytest.raises(ReaderError, match="0 answers for 1 questions"):
        parse_decisions_answers(ONE, {"answers": []})
    with pytest.raises(ReaderError, match="answer for question 'c'"):
        parse_decisions_answers(ONE, {"answers": [{"type": "choice", "name": "other"}]})
    with pytest.raises(ReaderError, match="lacks the label probabilities"):
        bad = {"type": "choice", "name": "c", "probabilities": [{"value": "a", "probability": 1}]}
        parse_decisions_answers(ONE, {"answers": [bad]})


def test_decisions_engine_sync_and_async_joint():
    server = FakeDecisionsServer()
    with decisions_reader(server) as reader:
        assert reader.url == URL + "/v1/decisions"
        engine = ab.DecisionEngine(reader=reader, instructions="Triage.", joint=True)
        sync = engine.decide("Checkout fails for everyone", QUESTIONS)
        async_ = asyncio.run(engine.adecide("Checkout fails for everyone", QUESTIONS))
    for decisions in (sync, async_):
        assert decisions["team"].label == "sales"
        assert decisions["urgent"].label == "yes"
        assert decisions["severity"].label == "high"
        assert decisions["team"].label_mass == pytest.approx(0.5)
        assert decisions["urgent"].label_mass == pytest.approx(0.5)
        answer = fake_decision_answer(
            {"type": "choice", "choices": [{"value": False}, {"value": True}]}
        )
        assert decisions["urgent"].probabilities["yes"] == pytest.approx(
            answer["probabilities"][1]["probability"]
        )
    body = server.bodies[0]
    assert body["model"] == "dg" and body["joint"] is True
    assert body["input"][0] == {"role": "user", "content": "Triage."}
    assert [q["name"] for q in body["questions"]] == list(QUESTIONS)
    assert server.bodies[0] == server.bodies[1]
    # Without joint=True the flag is left out (the server's default, False).
    server = FakeDecisionsServer()
    ab.DecisionEngine(reader=decisions_reader(server)).decide("s", QUESTIONS)
    assert "joint" not in server.bodies[0]


def test_decisions_4xx_carries_the_server_message():
    message = "joint: this model reads each question on its own; joint reads need DiffusionGemma"
    error = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    for use_async in (False, True):
        server = FakeDecisionsServer(failures=[httpx.Response(400, json=error)])
        reader = decisions_reader(server, max_retries=3)
        request = dataclasses.replace(MIXED, joint=True)
        with pytest.raises(RemoteRequestError, match="HTTP 400: joint: this model") as info:
            if use_async:
                asyncio.run(reader.aread([request]))
            else:
                reader.read([request])
        assert info.value.status_code == 400 and info.value.server_message == message
        assert len(server.bodies) == 1
    # Transient statuses are retried on this API too.
    server = FakeDecisionsServer(failures=[httpx.Response(503, text="loading")])
    assert len(decisions_reader(server, max_retries=1).read([MIXED])[0]) == 4
    assert len(server.bodies) == 2


def test_decisions_batches_are_concurrent_sync_and_async():
    arrived = []
    barrier = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        arrived.append(body["input"])
        if len(arrived) == 3:
            barrier.set()
        await asyncio.wait_for(barrier.wait(), 5)
        return httpx.Response(200, json=fake_decision_response(body))

    reader = RemoteReader(
        URL, api="decisions", model="dg", async_transport=httpx.MockTransport(handler)
    )
    requests = [ReadRequest(state=f"s{i}", questions=(CHOICE, NOUL), joint=True) for i in range(3)]
    reads = asyncio.run(reader.aread(requests))
    assert sorted(arrived) == ["s0", "s1", "s2"]
    assert [len(r) for r in reads] == [2, 2, 2]

    gate = threading.Barrier(3, timeout=5)

    def sync_handler(request: httpx.Request) -> httpx.Response:
        gate.wait()  # BrokenBarrierError unless all three are in flight
        return httpx.Response(200, json=fake_decision_response(json.loads(request.content)))

    reader = RemoteReader(
        URL, api="decisions", model="dg", transport=httpx.MockTransport(sync_handler)
    )
    assert [len(r) for r in reader.read(requests)] == [2, 2, 2]
    reader.close()


def test_decisions_configuration():
    with pytest.raises(ConfigurationError, match="api must be one of"):
        RemoteReader(URL, api="chat")
    with pytest.raises(ConfigurationError, match="needs model"):
        RemoteReader(URL, api="decisions")
    with pytest.raises(ConfigurationError, match="not api='decisions'"):
        RemoteReader(URL + "/v1/systemone", api="decisions", model="m")
    reader = RemoteReader(URL + "/v1/decisions/", api="decisions", model="m")
    assert reader.url == URL + "/v1/decisions"
    assert "api='decisions'" in repr(reader)


# -- one in-flight limit, one client per loop ----------------------------------------


class CountingServer(FakeServer):
    """Counts requests in flight at once (async and sync)."""

    def __init__(self):
        super().__init__()
        self.now = 0
        self.peak = 0

    def _enter(self):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def _leave(self):
        with self.lock:
            self.now -= 1

    async def handle_async(self, request):
        self._enter()
        try:
            await asyncio.sleep(0.01)
            return self(request)
        finally:
            self._leave()

    def handle_sync(self, request):
        self._enter()
        try:
            threading.Event().wait(0.01)
            return self(request)
        finally:
            self._leave()


def test_max_connections_is_one_limit_for_every_call_thread_and_loop():
    server = CountingServer()
    reader = RemoteReader(
        URL,
        max_connections=3,
        transport=httpx.MockTransport(server.handle_sync),
        async_transport=httpx.MockTransport(server.handle_async),
    )
    engine = ab.DecisionEngine(reader, batching=False)
    states = [f"ticket {i}" for i in range(8)]

    async def many_calls():
        # eight separate aread calls (not one batch): the limit must hold across them
        return await asyncio.gather(*(engine.adecide(s, QUESTIONS) for s in states))

    def in_a_thread():
        return [engine.decide(s, QUESTIONS) for s in states[:4]]

    with ThreadPoolExecutor(4) as pool:
        sync = [pool.submit(in_a_thread) for _ in range(3)]
        out = asyncio.run(many_calls())
        assert all(len(f.result()) == 4 for f in sync)
    assert len(out) == 8
    assert 1 <= server.peak <= 3
    reader.close()


def test_one_async_client_per_loop_closed_when_the_loop_ends():
    server = FakeServer()
    reader = reader_for(server)
    engine = ab.DecisionEngine(reader, batching=False)
    clients = []

    async def run():
        await engine.adecide("a", QUESTIONS)
        await engine.adecide("b", QUESTIONS)
        loop = asyncio.get_running_loop()
        clients.append(reader._connection._aclients[loop][0])
        assert len([c for c, _ in reader._connection._aclients.values()]) >= 1

    asyncio.run(run())
    asyncio.run(run())
    first, second = clients
    assert first is not second  # a new loop, a new client ...
    assert first.is_closed and second.is_closed  # ... and each closed with its loop
    reader.close()


def test_gate_hands_slots_over_and_survives_cancellation():
    from agentbranch.engine.readers.remote.gate import Gate

    gate = Gate(1)

    async def main():
        await gate.aacquire()
        waiter = asyncio.create_task(gate.aacquire())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        gate.release()
        await asyncio.wait_for(gate.aacquire(), 5)  # the slot is free again
        gate.release()

    asyncio.run(main())
    assert gate._used == 0


def test_gate_wakes_a_task_on_its_own_loop_and_from_another_thread():
    from agentbranch.engine.readers.remote.gate import Gate

    gate = Gate(1)

    async def waiting() -> asyncio.Task:
        task = asyncio.create_task(gate.aacquire())
        await asyncio.sleep(0)
        assert not task.done()  # the one slot is taken
        return task

    async def main():
        await gate.aacquire()
        # released on the waiter's own loop (woken directly): the slot passes on
        waiter = await waiting()
        gate.release()
        await asyncio.wait_for(waiter, 5)
        # handed a slot, then cancelled before it ran: it gives the slot back
        waiter = await waiting()
        gate.release()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert gate._used == 0
        await gate.aacquire()
        # released by another thread: woken through its loop's thread-safe call
        waiter = await waiting()
        await asyncio.to_thread(gate.release)
        await asyncio.wait_for(waiter, 5)
        gate.release()

    asyncio.run(main())
    assert gate._used == 0


def test_the_engine_coalescer_sends_remote_reads_at_once():
    reader = reader_for(FakeServer(), max_connections=7)
    via = ab.DecisionEngine(reader).reads_via
    assert via.max_wait_s == 0.0 and via.concurrency == 7
    assert via.inner is reader


def test_an_async_transport_alone_is_refused_on_the_sync_path_instead_of_bypassed():
    # The engine's coalescer reads through the sync path, for async callers too: without
    # this check the read would silently go to the URL, not to the transport given.
    server = FakeServer()
    reader = RemoteReader(URL, async_transport=httpx.MockTransport(server.handle_async))
    with pytest.raises(ab.ConfigurationError, match="transport= as well"):
        asyncio.run(ab.DecisionEngine(reader).adecide("s", QUESTIONS))
    with pytest.raises(ab.ConfigurationError, match="batching=False"):
        reader.read([ONE])
    # Without the coalescer, async callers use the async transport.
    decided = asyncio.run(ab.DecisionEngine(reader, batching=False).adecide("s", QUESTIONS))
    assert set(decided) == set(QUESTIONS)
    assert server.bodies  # the fake server answered


# -- issue 22: strict answers, label mass, statuses, URLs and secrets ------------------

YES_NO = {"urgent": ab.yes_no("Is it urgent?")}
SCORE = {"severity": ab.score("How severe?", ["low", "medium", "high"])}


def _answering(content: bytes | str, status: int = 200, **kw):
    """A server that answers every request with ``content`` (JSON text as written)."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = content.encode() if isinstance(content, str) else content
        return httpx.Response(status, content=body, **kw)

    return httpx.MockTransport(handle), seen


def _decide(content, questions=YES_NO, **reader_kw):
    transport, _ = _answering(content)
    reader = RemoteReader(URL, transport=transport, backoff_s=0.0, **reader_kw)
    return ab.DecisionEngine(reader).decide("s", questions)


@pytest.mark.parametrize("p_yes", [0.001, 0.3])
def test_a_remote_answer_carries_the_label_mass_its_numbers_imply(p_yes):
    # Issue 22: {"yes": 0.001, "no": 0} read "yes" at confidence 1.0 with label mass 1.0,
    # although the server gave 99.9% of the probability elsewhere.
    answer = {"answers": {"urgent": {"probabilities": {"yes": p_yes, "no": 0}}}}
    decision = _decide(json.dumps(answer))["urgent"]
    assert decision.label == "yes"
    assert decision.label_mass == pytest.approx(p_yes)
    # ... so a policy's label-mass floor above it never takes it, as for a local read.
    policy = ab.Policy(take_at=0.6, min_label_mass=0.5, fallbacks=[ab.GotoNode("human")])
    assert policy.band(decision) == "fallback"
    # A reported mass or a confidence never raises it above what the numbers imply.
    answer["answers"]["urgent"]["confidence"] = p_yes
    answer["diagnostics"] = {"urgent": {"label_mass": 1.0}}
    assert _decide(json.dumps(answer))["urgent"].label_mass == pytest.approx(p_yes)
    # /v1/decisions: probabilities summing to less than 1 imply the same.
    entries = [{"value": False, "probability": 0.0}, {"value": True, "probability": p_yes}]
    decided = _decide(
        json.dumps({"answers": [{"type": "choice", "probabilities": entries}]}),
        api="decisions",
        model="dg",
    )["urgent"]
    assert decided.label == "yes" and decided.label_mass == pytest.approx(p_yes)


@pytest.mark.parametrize("p_yes", [1e-300, 5e-7, 0.0])
def test_a_remote_answer_with_no_label_mass_is_an_error_not_a_decision(p_yes):
    # {"yes": 1e-300, "no": 0} read "yes" at confidence 1.0: nothing became certainty.
    answer = {"answers": {"urgent": {"probabilities": {"yes": p_yes, "no": 0}}}}
    with pytest.raises(InvalidReadError, match="no probability"):
        _decide(json.dumps(answer))
    entries = [{"value": False, "probability": 0.0}, {"value": True, "probability": p_yes}]
    with pytest.raises(InvalidReadError, match="no probability"):
        _decide(
            json.dumps({"answers": [{"type": "choice", "probabilities": entries}]}),
            api="decisions",
            model="dg",
        )


@pytest.mark.parametrize("level", [0.2, 1.9, True, "1", 1.0])
def test_a_score_level_is_a_json_integer_not_truncated(level):
    # int() read 0.2 as level 0, 1.9 and true as level 1.
    entries = [
        {"value": level, "probability": 0.7},
        {"value": 0, "probability": 0.1},
        {"value": 2, "probability": 0.2},
    ]
    body = {"answers": [{"type": "score", "probabilities": entries}]}
    with pytest.raises(InvalidReadError):
        _decide(json.dumps(body), SCORE, api="decisions", model="dg")
    entries[0]["value"] = 1  # the same answer with an integer level is read
    assert _decide(json.dumps(body), SCORE, api="decisions", model="dg")["severity"].label == (
        "medium"
    )


@pytest.mark.parametrize("flag", ["false", "true", 0, 1, None])
def test_argmax_is_label_is_a_json_boolean(flag):
    # bool("false") is True: the string read as "the argmax is a label".
    body = {
        "answers": {"urgent": {"noul": 0.9}},
        "diagnostics": {"urgent": {"label_mass": 0.9, "argmax_is_label": flag}},
    }
    with pytest.raises(InvalidReadError, match="argmax_is_label"):
        _decide(json.dumps(body))
    body["diagnostics"]["urgent"]["argmax_is_label"] = False
    assert _decide(json.dumps(body))["urgent"].argmax_is_label is False


@pytest.mark.parametrize(
    "content",
    [
        '{"answers": {"urgent": {"probabilities": {"yes": 0.9, "no": 0.1, "yes": 0.0}}}}',
        '{"answers": {"urgent": {"noul": 0.9, "noul": 0.1}}}',
        '{"answers": {"urgent": {"noul": 0.9}, "urgent": {"noul": 0.1}}}',
        '{"answers": {"urgent": {"noul": 0.9}}, "answers": {"urgent": {"noul": 0.1}}}',
    ],
)
def test_a_repeated_json_key_is_refused(content):
    # json.loads keeps the last value: a repeated key silently flipped the answer.
    with pytest.raises(InvalidReadError, match="appears twice"):
        _decide(content)


def test_values_of_other_types_are_refused_on_decisions_too():
    # a yes/no answered as the string "false" (not the boolean) is no answer for it
    entries = [{"value": "false", "probability": 0.1}, {"value": True, "probability": 0.9}]
    with pytest.raises(InvalidReadError, match="lacks the label probabilities"):
        _decide(
            json.dumps({"answers": [{"type": "choice", "probabilities": entries}]}),
            api="decisions",
            model="dg",
        )
    entries[0]["value"] = False
    entries.append({"value": False, "probability": 0.0})
    with pytest.raises(InvalidReadError, match="twice"):
        _decide(
            json.dumps({"answers": [{"type": "choice", "probabilities": entries}]}),
            api="decisions",
            model="dg",
        )


def test_noul_and_probabilities_must_agree():
    body = {"answers": {"urgent": {"noul": 0.1, "probabilities": {"yes": 0.9, "no": 0.1}}}}
    with pytest.raises(InvalidReadError, match="noul 0.1"):
        _decide(json.dumps(body))


@pytest.mark.parametrize("status", [300, 301, 302, 303, 307, 308])
def test_a_redirect_is_an_error_and_its_body_never_the_answer(status):
    # A 307 whose body looked like an answer was read as the answer.
    valid = json.dumps({"answers": {"urgent": {"noul": 0.9}}})
    location = "http://other:secret@elsewhere.test/v1/systemone?token=T0k"
    transport, seen = _answering(valid, status, headers={"location": location})
    reader = RemoteReader(URL, transport=transport, max_retries=3, backoff_s=0.0)
    with pytest.raises(RemoteRequestError, match=f"HTTP {status}") as info:
        ab.DecisionEngine(reader).decide("s", YES_NO)
    assert info.value.status_code == status
    assert len(seen) == 1  # not followed, not retried
    text = str(info.value)
    assert "elsewhere.test" in text and "secret" not in text and "T0k" not in text


@pytest.mark.parametrize("status", [100, 199])
def test_an_unexpected_status_is_a_reader_error(status):
    transport, _ = _answering(json.dumps({"answers": {"urgent": {"noul": 0.9}}}), status)
    with pytest.raises(ReaderError, match=f"HTTP {status}"):
        ab.DecisionEngine(RemoteReader(URL, transport=transport)).decide("s", YES_NO)


def test_json_nested_too_deeply_is_a_reader_error():
    deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(ReaderError, match="nested too deeply"):
        _decide(deep)
    transport, _ = _answering(deep, 400)  # an error body too
    with pytest.raises(RemoteRequestError, match="HTTP 400"):
        ab.DecisionEngine(RemoteReader(URL, transport=transport)).decide("s", YES_NO)


def test_a_huge_answer_is_refused_without_reading_it_all():
    # A wrong server (or a proxy's error page) streaming without end: the reader stops at
    # MAX_ANSWER_BYTES instead of holding the whole body in memory.
    from agentbranch.engine.readers.remote import transport

    sent = []

    def endless():
        for _ in range(transport.MAX_ANSWER_BYTES // 65536 * 4):
            sent.append(1)
            yield b" " * 65536

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=endless())

    reader = RemoteReader(URL, transport=httpx.MockTransport(handle), backoff_s=0.0)
    with pytest.raises(ReaderError, match="answered more than 16 MiB"):
        ab.DecisionEngine(reader).decide("s", YES_NO)
    assert len(sent) <= transport.MAX_ANSWER_BYTES // 65536 + 2  # it stopped reading

    async def ahandle(request: httpx.Request) -> httpx.Response:
        async def aendless():
            for chunk in endless():
                yield chunk

        return httpx.Response(200, content=aendless())

    areader = RemoteReader(URL, async_transport=httpx.MockTransport(ahandle), backoff_s=0.0)
    with pytest.raises(ReaderError, match="answered more than 16 MiB"):
        asyncio.run(ab.DecisionEngine(areader, batching=False).adecide("s", YES_NO))


def test_a_compressed_answer_is_read_decoded():
    import gzip

    answer = {"answers": {"urgent": {"probabilities": {"yes": 0.8, "no": 0.2}}}}
    transport, _ = _answering(
        gzip.compress(json.dumps(answer).encode()), headers={"Content-Encoding": "gzip"}
    )
    reader = RemoteReader(URL, transport=transport)
    decision = ab.DecisionEngine(reader).decide("s", YES_NO)["urgent"]
    assert decision.label == "yes" and decision.probabilities["yes"] == pytest.approx(0.8)


@pytest.mark.parametrize("api", ["systemone", "decisions"])
def test_the_api_path_joins_the_base_path_and_the_query_is_kept(api):
    # The path was appended after the query string: ...?token=T/v1/systemone.
    server = FakeDecisionsServer() if api == "decisions" else FakeServer()
    seen: list[httpx.URL] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        # the fake servers answer at /v1/...: strip the prefix once it was checked
        request.url = request.url.copy_with(path=request.url.path.removeprefix("/prefix"))
        return server(request)

    for base in (
        "http://vllm.test:8000/prefix?token=T0k&x=1",
        "http://vllm.test:8000/prefix/?token=T0k&x=1",
        f"http://vllm.test:8000/prefix/v1/{api}?token=T0k&x=1",
    ):
        reader = RemoteReader(
            base, api=api, model="dg", transport=httpx.MockTransport(handle), backoff_s=0.0
        )
        assert reader.url == f"http://vllm.test:8000/prefix/v1/{api}?token=***&x=***"
        assert ab.DecisionEngine(reader).decide("s", QUESTIONS)["team"].label == "sales"
        sent = seen[-1]
        assert sent.path == f"/prefix/v1/{api}"
        assert dict(sent.params) == {"token": "T0k", "x": "1"}
        assert sent.raw_path == f"/prefix/v1/{api}?token=T0k&x=1".encode()


SECRET_URLS = [
    # a short password and a short token: a redaction for long secrets only misses them
    ("http://agent:pw@vllm.test:8000/?token=T0k", ["pw", "T0k"]),
    ("http://agent:a-much-longer-password@vllm.test:8000?token=T0k&sig=s1g", ["T0k", "s1g"]),
    ("http://tok3n@vllm.test:8000/?api-key=k%2By", ["tok3n", "k%2By", "k+y"]),
]


def _echo_everything(status: int):
    """A server (or proxy) whose error echoes the request line and its credentials."""

    def handle(request: httpx.Request) -> httpx.Response:
        echoed = f"{request.url.raw_path.decode()} {request.headers.get('authorization')}"
        return httpx.Response(status, json={"error": {"message": f"bad request: {echoed}"}})

    return handle


@pytest.mark.parametrize("base, secrets", SECRET_URLS)
@pytest.mark.parametrize("status", [400, 401, 500, 503])
def test_no_url_credential_in_errors_repr_or_records(base, secrets, status):
    from agentbranch.policy import FailClosed, Policy, Resolver

    reader = RemoteReader(
        base, transport=httpx.MockTransport(_echo_everything(status)), max_retries=1
    )
    reader.backoff_s = 0.0
    shown = repr(reader) + reader.url
    with pytest.raises(ReaderError) as err:
        ab.DecisionEngine(reader).decide("s", YES_NO)
    text = str(err.value) + repr(err.value) + str(getattr(err.value, "server_message", ""))
    rec = Resolver(ab.DecisionEngine(reader), YES_NO, Policy(on_error=FailClosed("safe"))).resolve(
        "s"
    )["urgent"]
    for secret in secrets:
        assert secret not in shown and secret not in text and secret not in json.dumps(rec)
    assert "***" in text and "vllm.test" in text


def test_invalid_base_urls_do_not_echo_credentials():
    for bad in ("http://u:pw@/?token=T0k", "ftp://u:pw@host/?token=T0k", "u:pw@host?token=T0k"):
        with pytest.raises(ConfigurationError) as err:
            RemoteReader(bad)
        assert "pw" not in str(err.value) and "T0k" not in str(err.value), err.value


@pytest.mark.parametrize("use_async", [False, True])
def test_httpx_log_lines_never_carry_the_url_credentials(caplog, use_async):
    """httpx logs every request at INFO on the "httpx" logger with the request's URL;
    the reader's URL prints its query values masked, and no logging state changes."""
    import logging

    httpx_logger = logging.getLogger("httpx")
    before = (httpx_logger.level, list(httpx_logger.handlers), list(httpx_logger.filters))
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"answers": {"urgent": {"noul": 0.9}}})

    reader = RemoteReader(
        "http://agent:pw@vllm.test:8000/?token=T0k",
        transport=httpx.MockTransport(handle),
        async_transport=httpx.MockTransport(handle),
    )
    engine = ab.DecisionEngine(reader, batching=False)
    with caplog.at_level(logging.INFO, logger="httpx"):
        if use_async:
            asyncio.run(engine.adecide("s", YES_NO))
        else:
            engine.decide("s", YES_NO)
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert lines and all("HTTP Request: POST" in line for line in lines)
    assert all("T0k" not in line and "pw" not in line for line in lines), lines
    assert "token=***" in lines[0]
    assert seen[0].url.params["token"] == "T0k"  # the server still gets it
    assert "T0k" not in repr(seen[0])
    httpx_logger = logging.getLogger("httpx")
    assert (httpx_logger.level, httpx_logger.handlers, httpx_logger.filters) == before
    reader.close()


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://user:password@host/?token=T", "http://***@host/?token=***"),
        ("http://u:p@h:80/x?a=1&b&c=#frag=z", "http://***@h:80/x?a=***&***&c=#frag=***"),
        ("http://TOKEN@h/p", "http://***@h/p"),  # a token as the user name
        ("http://u:p@ss@h/x", "http://***@h/x"),  # an unescaped "@" in the password
        ("http://h/p?e=a@b.c", "http://h/p?e=***"),  # an "@" in the query is not userinfo
        ("agent:KEY@vllm:8000", "***@vllm:8000"),  # no scheme
        ("http://h:8000/v1/systemone", "http://h:8000/v1/systemone"),
    ],
)
def test_redact_url(url, shown):
    from agentbranch.core.redact import redact_url, url_secrets

    assert redact_url(url) == shown
    if url.startswith("http://u:p@h:80"):
        # for free text: every secret, as written and percent-decoded
        assert url_secrets(url) == {"u", "p", "1", "b", "z"}
    assert url_secrets("http://h/?k=a%2Bb+c") == {"a%2Bb+c", "a+b+c", "a+b c"}
