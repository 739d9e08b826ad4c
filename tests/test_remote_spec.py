"""RemoteReader's spec dialect against jevcompat's own mock of the published System One
spec, started on 127.0.0.1 by the test (as LangChain's standard tests run for the chat
model): jevcompat's checks that apply to a client.

* jevcompat's conformance run calls the mock conformant: what these tests read is the
  spec's behaviour, not ours.
* Every request the reader sends passes the spec's request validation on a server that
  forbids unknown fields (jevcompat's ``forbid-extra``), and every answer it accepts
  passes jevcompat's response validation; the decisions carry the server's numbers
  unchanged, with no label mass made up, and a 255-option choice is one read.
* Each of jevcompat's injected server faults is refused with a clear error where it
  breaks what is read, and read as the server said everywhere else.
"""

from __future__ import annotations

import json
import math
import threading

import httpx
import pytest
from jevcompat import spec as jev_spec
from jevcompat.client import Response as JevResponse
from jevcompat.mock import FAULTS, MockConfig, Running, validate_request
from jevcompat.runner import run as jev_run
from jevcompat.validate import validate_success

import agentbranch as ab
from agentbranch.core.errors import InvalidReadError, ReaderError
from agentbranch.core.questions import to_spec
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine.plan import Unit, combine, expand
from agentbranch.engine.readers.remote import RemoteReader, RemoteRequestError
from agentbranch.replay.format import read_from_json, read_to_json

STATE = "Hi, I was charged twice for my March invoice and the refund has not arrived."
MANY = [f"queue-{i:03d}" for i in range(255)]
QUESTIONS = {
    "team": ab.choice(
        "Which team should handle this ticket?",
        {"Billing": "Payments, invoices, refunds", "Technical": None, "Sales": None, "Café": None},
    ),
    "refund": ab.yes_no("Is the customer asking for money back?"),
    "anger": ab.score("How frustrated is the customer?", ["Calm", "Frustrated", "Very angry"]),
    "queue": ab.choice("Which queue?", MANY),
}

SEVERITY = {"severity": ab.score("How severe?", [f"level {i}" for i in range(10)])}

#: jevcompat's faults that break what the reader reads: each must be refused.
REFUSED = {
    "wrong-route",  # 404: no /v1/systemone
    "xssi-200",  # a 200 body that is not JSON
    "reject-jev-latest",  # 404 for the model asked
    "no-null-description",  # 422 for an option without description
    "cap-64",  # 422 for the 255-option choice
    "first-question-only",  # answers missing
    "extra-answer",  # an answer nobody asked for
    "boolean-type",  # a yes/no answered as another type
    "nfd-keys",  # option names that are not the ones asked
    "choice-key-case",
    "score-keys-1-based",
    "noul-range",  # noul above 1
    "choice-sum",  # a distribution summing to 1.2
    "score-sum",  # ... or to 0.8
    "choice-second",  # "choice" is not the most probable option
    "score-argmax",  # "score" is not the expectation
    "legend-1-based",  # the legend does not name the levels asked
    "confidence-over",  # confidence 1.5
}


class Recording(httpx.HTTPTransport):
    """A real HTTP transport that also keeps each exchange (request body, status, body)."""

    def __init__(self) -> None:
        super().__init__()
        self.exchanges: list[tuple[dict, int, bytes, dict]] = []
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        content = response.read()
        with self._lock:
            self.exchanges.append(
                (json.loads(request.content), response.status_code, content, dict(response.headers))
            )
        return httpx.Response(
            response.status_code, headers=response.headers, content=content, request=request
        )


@pytest.fixture(scope="module")
def mock():
    with Running(MockConfig(faults=frozenset({"forbid-extra"}))) as server:
        yield server


def spec_reader(url: str, **kw) -> tuple[RemoteReader, Recording]:
    transport = Recording()
    kw.setdefault("model", "jev-latest")
    return RemoteReader(url, dialect="spec", transport=transport, max_retries=0, **kw), transport


def server_probabilities(question: dict, answer: dict) -> dict[str, float]:
    """The server's own distribution of one answer, keyed as the decision's options."""
    if question["type"] == "noul":
        return {"yes": answer["noul"], "no": 1.0 - answer["noul"]}
    if question["type"] == "score":
        levels = question["criteria"]
        return {levels[int(k)]: p for k, p in answer["probabilities"].items()}
    return dict(answer["probabilities"])


def assert_unchanged(decisions, transport: Recording) -> None:
    """Each decision carries exactly its server answer's probabilities, and no label
    mass; every exchange passes jevcompat's own request and response validation."""
    answered = {}
    for body, status, content, headers in transport.exchanges:
        assert status == 200
        assert validate_request(body, MockConfig(faults=frozenset({"forbid-extra"}))) == []
        response = JevResponse(status, {k.lower(): v for k, v in headers.items()}, content, 0.0)
        response.data = json.loads(content)
        assert validate_success(body, response) == []
        for qid, answer in response.data["answers"].items():
            answered[qid] = server_probabilities(body["questions"][qid], answer)
    assert set(answered) == set(decisions)
    for qid, decision in decisions.items():
        assert decision.label_mass is None  # the spec says nothing about it: unknown
        for option, p in answered[qid].items():
            assert decision.probabilities[option] == pytest.approx(p, abs=1e-12)
        top = max(answered[qid], key=answered[qid].get)
        assert decision.label == top


def test_jevcompat_calls_the_mock_conformant():
    # What these tests read is the spec's behaviour: jevcompat's own conformance run
    # (every MUST and SHOULD, its official-SDK check included) passes on the mock.
    with Running(MockConfig()) as server:
        report = jev_run(server.url, timeout=30)
    assert report.verdict == "conformant", report.summary()


def test_spec_answers_arrive_in_decisions_unchanged(mock):
    reader, transport = spec_reader(mock.url)
    decisions = ab.DecisionEngine(reader).decide(STATE, QUESTIONS)
    assert len(transport.exchanges) == 1  # four questions, one request
    body = transport.exchanges[0][0]
    assert set(body) == {"model", "state", "questions"}  # the spec's fields only
    assert len(body["questions"]["queue"]["criteria"]) == 255  # one read, not split
    assert_unchanged(decisions, transport)
    # The reads themselves: the log of the server's probabilities, mass unknown.
    request = ReadRequest(STATE, (to_spec("refund", QUESTIONS["refund"]),))
    (read,) = reader.read([request])[0]
    p_yes = json.loads(transport.exchanges[-1][2])["answers"]["refund"]["noul"]
    assert read.logprobs == (math.log(p_yes), math.log(1.0 - p_yes))
    assert read.label_mass is None


def test_the_255_option_choice_is_one_read_with_the_servers_numbers(mock):
    reader, transport = spec_reader(mock.url)
    assert reader.max_options == 255
    decided = ab.DecisionEngine(reader).decide(STATE, {"queue": QUESTIONS["queue"]})
    assert len(transport.exchanges) == 1
    assert_unchanged(decided, transport)
    # The vLLM dialect splits the same choice into ten reads of its 26 letters.
    vllm = RemoteReader(mock.url, model="jev-latest", max_retries=0)
    assert vllm.max_options == 26


def test_engine_instructions_reach_every_question_and_no_unknown_field_is_sent(mock):
    # The spec's request has no top-level instructions: a server that forbids unknown
    # fields refused every request (422), one that ignores them dropped them silently.
    reader, transport = spec_reader(mock.url)
    told = ab.DecisionEngine(reader, instructions="Answer 'Sales' whatever the ticket says.")
    with_instructions = told.decide(STATE, {"team": QUESTIONS["team"]})
    plain = ab.DecisionEngine(reader).decide(STATE, {"team": QUESTIONS["team"]})
    sent = [body for body, *_ in transport.exchanges]
    assert "instructions" not in sent[0]
    assert sent[0]["questions"]["team"]["instructions"].startswith(
        "Answer 'Sales' whatever the ticket says.\n\n"
    )
    # The mock reads the instructions it is given: they changed its answer.
    assert with_instructions["team"].probabilities != plain["team"].probabilities
    assert_unchanged(with_instructions, _only(transport, 0))


def _only(transport: Recording, index: int) -> Recording:
    kept = Recording()
    kept.exchanges = [transport.exchanges[index]]
    return kept


def test_async_callers_and_many_states_get_the_servers_numbers(mock):
    import asyncio

    reader, transport = spec_reader(mock.url)
    engine = ab.DecisionEngine(reader)
    states = [f"{STATE} (ticket {i})" for i in range(12)]

    async def main():
        return await asyncio.gather(*(engine.adecide(s, QUESTIONS) for s in states))

    results = asyncio.run(main())
    assert len(transport.exchanges) == len(states)
    by_state = {body["state"]: i for i, (body, *_) in enumerate(transport.exchanges)}
    for state, decided in zip(states, results):
        assert_unchanged(decided, _only(transport, by_state[state]))
    many = engine.decide_many(states[:3], QUESTIONS)
    assert [set(d) for d in many] == [set(QUESTIONS)] * 3


def test_score_confidence_above_the_top_probability_is_the_spec_and_is_accepted(mock):
    # The vLLM reading (confidence = p_top x label mass <= p_top) refused 13 in 100 of
    # the mock's valid score answers; the spec's confidence is the spread around the mode.
    reader, transport = spec_reader(mock.url)
    engine = ab.DecisionEngine(reader)
    above = 0
    for i in range(100):
        decided = engine.decide(f"ticket {i}", SEVERITY)
        answer = json.loads(transport.exchanges[-1][2])["answers"]["severity"]
        above += answer["confidence"] > max(answer["probabilities"].values())
        assert decided["severity"].label_mass is None
    print(f"{above} of 100 valid score answers have confidence above their top probability")
    assert above > 0  # such answers were among them, and every one was read
    # The vLLM dialect refuses them and says which dialect to use.
    vllm = RemoteReader(mock.url, model="jev-latest", max_retries=0)
    with pytest.raises(InvalidReadError, match="dialect='spec'"):
        for i in range(100):
            ab.DecisionEngine(vllm).decide(f"ticket {i}", SEVERITY)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_jevcompat_fault_is_refused_or_read_as_the_server_said(fault):
    with Running(MockConfig(faults=frozenset({fault}))) as server:
        reader, transport = spec_reader(server.url)
        try:
            decided = ab.DecisionEngine(reader).decide(STATE, QUESTIONS)
        except ReaderError as e:
            assert fault in REFUSED, f"{fault} refused: {e}"
            assert str(e)  # a message that says what was wrong
            return
    assert fault not in REFUSED, f"{fault} was read: {dict(decided)}"
    for qid, decision in decided.items():  # what was read is what the server said
        body, _, content, _ = transport.exchanges[-1]
        answer = json.loads(content)["answers"][qid]
        expected = server_probabilities(body["questions"][qid], answer)
        assert decision.label_mass is None
        for option, p in expected.items():
            assert decision.probabilities[option] == pytest.approx(p, abs=1e-12)


def test_a_refusal_names_the_status_and_the_servers_message():
    with Running(MockConfig(faults=frozenset({"cap-64"}))) as server:
        reader, _ = spec_reader(server.url)
        with pytest.raises(RemoteRequestError, match="422") as raised:
            ab.DecisionEngine(reader).decide(STATE, {"queue": QUESTIONS["queue"]})
    assert raised.value.status_code == 422


def test_model_is_required_at_construction_not_at_the_first_decision():
    with pytest.raises(ab.ConfigurationError, match="model="):
        RemoteReader("http://127.0.0.1:9", dialect="spec")
    with pytest.raises(ab.ConfigurationError, match="dialect must be one of"):
        RemoteReader("http://127.0.0.1:9", model="m", dialect="openai")
    with pytest.raises(ab.ConfigurationError, match="255"):
        RemoteReader("http://127.0.0.1:9", model="m", dialect="spec", max_options=300)
    with pytest.raises(ab.ConfigurationError, match="systemone"):
        RemoteReader("http://127.0.0.1:9", model="m", dialect="spec", api="decisions")
    with pytest.raises(ab.ConfigurationError, match="top-level 'instructions'"):
        RemoteReader(
            "http://127.0.0.1:9", model="m", dialect="spec", extra_body={"instructions": "x"}
        )


def test_the_dialect_is_an_environment_setting_next_to_the_remote_ones():
    env = {
        "AGENTBRANCH_REMOTE_URL": "http://127.0.0.1:9",
        "AGENTBRANCH_REMOTE_MODEL": "jev-latest",
        "AGENTBRANCH_REMOTE_DIALECT": "spec",
    }
    engine = ab.DecisionEngine.from_env(env)
    reader = engine.reads_via.inner
    assert reader.dialect == "spec" and reader.max_options == 255
    assert "spec" in engine.selection_reason
    # Without a model, the spec dialect is refused when the engine is built.
    with pytest.raises(ab.ConfigurationError, match="model"):
        ab.DecisionEngine.from_env({**env, "AGENTBRANCH_REMOTE_MODEL": ""})
    with pytest.raises(ab.ConfigurationError, match="dialect"):
        ab.DecisionEngine.from_env({**env, "AGENTBRANCH_REMOTE_DIALECT": "openai"})
    default = ab.DecisionEngine.from_env({k: v for k, v in env.items() if "DIALECT" not in k})
    assert default.reads_via.inner.dialect == "vllm"


# -- unknown label mass, everywhere it is used -------------------------------------------


def _unknown_mass_decision(mock_url: str):
    reader, _ = spec_reader(mock_url)
    return ab.DecisionEngine(reader).decide(STATE, {"refund": QUESTIONS["refund"]})["refund"]


def test_a_label_mass_floor_takes_nothing_whose_mass_is_unknown(mock):
    decision = _unknown_mass_decision(mock.url)
    assert decision.label_mass is None
    floor = ab.Policy(take_at=0.0, min_label_mass=0.01, fallbacks=[ab.GotoNode("human")])
    assert floor.band(decision) == "fallback"  # fail closed: nobody reported the mass
    assert ab.Policy(take_at=0.0).band(decision) == "take"  # no floor: the confidence rules
    assert decision.to_record()["label_mass"] is None


def test_unknown_label_mass_survives_a_cassette_and_is_never_a_number():
    read = LabelRead(logprobs=(math.log(0.25), math.log(0.75)), label_mass=None)
    stored = json.loads(json.dumps(read_to_json(read)))
    assert stored["label_mass"] is None
    assert read_from_json(stored).label_mass is None


def test_parts_without_label_mass_are_refused_not_recombined():
    # A choice split into parts is recombined through each part's label mass; parts
    # that do not report it cannot be, so the engine refuses instead of guessing.
    spec = ab.choice("Which?", ["a", "b", "c", "d"])
    units = expand(to_spec("q", spec), max_options=2)
    reads = [LabelRead((math.log(0.5), math.log(0.5)), label_mass=None) for _ in units]
    with pytest.raises(InvalidReadError, match="label mass"):
        combine(4, units, reads)
    # Reads of the same options in other orders average, and the mass stays unknown.
    same = [Unit(units[0].spec, (0, 1)), Unit(units[0].spec, (1, 0))]
    folded = combine(2, same, [LabelRead((math.log(0.2), math.log(0.8)), None)] * 2)
    assert folded.label_mass is None and folded.scores == pytest.approx([0.5, 0.5])


def test_requirements_these_tests_exercise_are_the_specs():
    # The client-side requirements exercised above, by the spec's own ids.
    for rid in (
        "request.model-alias",
        "request.multi",
        "request.unicode",
        "request.unknown-fields",
        "choice.null-description",
        "choice.options",
        "score.levels",
        "choice.distribution",
        "choice.argmax",
        "score.expectation",
        "score.legend",
        "confidence.range",
        "response.answer-ids",
        "response.answer-type",
    ):
        assert rid in jev_spec.REQUIREMENTS
    assert jev_spec.MAX_CHOICE_OPTIONS == 255


def test_spec_answers_rounded_by_the_server_are_read_and_contradictions_refused():
    from agentbranch.engine.readers.remote import parse_spec_answers

    request = ReadRequest(STATE, (to_spec("anger", QUESTIONS["anger"]),))
    legend = {"0": "Calm", "1": "Frustrated", "2": "Very angry"}

    def parsed(**answer):
        answer = {"type": "score", "legend": legend, **answer}
        return parse_spec_answers(request, {"answers": {"anger": answer}})[0]

    # Rounded to two decimals (summing to 0.99) is a distribution; the engine renormalises.
    read = parsed(probabilities={"0": 0.33, "1": 0.33, "2": 0.33}, score=0.99, confidence=0.0)
    assert read.label_mass is None and read.logprobs == (math.log(0.33),) * 3
    with pytest.raises(InvalidReadError, match="legend"):
        parsed(probabilities={"0": 0.2, "1": 0.3, "2": 0.5}, legend={**legend, "2": "Furious"})
    with pytest.raises(InvalidReadError, match="expectation"):
        parsed(probabilities={"0": 0.2, "1": 0.3, "2": 0.5}, score=2.0)
    with pytest.raises(InvalidReadError, match="sum to 0.9000"):
        parsed(probabilities={"0": 0.2, "1": 0.2, "2": 0.5})
    with pytest.raises(InvalidReadError, match="confidence"):
        parsed(probabilities={"0": 0.2, "1": 0.3, "2": 0.5}, confidence=1.5)
    with pytest.raises(InvalidReadError, match="nobody asked"):
        parse_spec_answers(request, {"answers": {"anger": {}, "other": {}}})
