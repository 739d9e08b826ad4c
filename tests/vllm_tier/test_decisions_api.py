"""``RemoteReader(api="decisions")`` against vLLM 0.33's own ``/v1/decisions`` code.

* **Schema contract.** Every body our reader builds validates with 0.33's pydantic
  ``DecisionRequest`` (``extra="forbid"``), turns into the read questions we expect under
  0.33's ``make_read_question``, and answers built by 0.33's ``make_answer`` into a
  ``DecisionResponse`` parse back into the probabilities and label mass they carry.
* **The real endpoint, in process.** 0.33's ``OpenAIServingDecisions`` and its FastAPI
  router (with vLLM's exception handlers), over ``DiffusionGemmaCanvasStrategy`` with the
  stand-in engine and renderer of ``vllm_ref`` and the tiny DiffusionGemma tokenizer,
  exposed to the reader through ``httpx.ASGITransport``. For the same state and questions,
  the server's engine receives exactly the requests our local ``VLLMReader`` (canvas
  planner) sends for the questions *as the server words them* (choice values as JSON
  text, yes/no as the choice ``false``/``true``, score levels as options ``A``, ``B`` ...
  instead of ``0``-``9``, instructions first in the user turn), and
  over HTTP the reader returns the local reads' probabilities and label mass — single and
  joint reads, sync and async. The server's 4xx messages come through.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import math
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from _dgemma_reads import BARE, MIXED, WIDE, specs
from vllm_ref import FakeLLM, make_strategy

import agentbranch as ab
from agentbranch.core.reads import QuestionSpec, ReadRequest
from agentbranch.engine.readers.remote import (
    RemoteReader,
    RemoteRequestError,
    build_decisions_payload,
    parse_decisions_answers,
)
from agentbranch.engine.readers.vllm import VLLMReader

VOCAB = 512
MAX_LEN = 4096
SERVED = "diffusiongemma"
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


QUESTION_SETS = {
    "mixed": MIXED,
    "bare": {**BARE, "fine": ab.yes_no("Is it fine?", yes="All good", no="Something is wrong")},
    "wide": WIDE,
}
STATE = "Customer: the checkout page returns 500 since this morning. Ünïcode, refund me!"


@pytest.fixture(scope="module")
def d033(vllm033: Any) -> SimpleNamespace:
    """0.33's decisions modules (the package is on the path once ``vllm033`` loaded)."""
    names = ("protocol", "adapters", "serving", "api_router")
    return SimpleNamespace(
        **{n: importlib.import_module(f"vllm.entrypoints.openai.decisions.{n}") for n in names}
    )


# ------------------------------------------------------------------ schema contract


def contract_requests() -> list[tuple[ReadRequest, dict[str, Any]]]:
    out = []
    for qset in QUESTION_SETS.values():
        for instructions in (None, "You triage support tickets."):
            for joint in (False, True):
                read = ReadRequest(STATE, specs(qset), instructions=instructions, joint=joint)
                out.append((read, {}))
    mixed = specs(QUESTION_SETS["mixed"])
    # The engine reads one question several times (chunks, option orders): unique names.
    out.append((ReadRequest("s", (mixed[0], mixed[0], mixed[1])), {}))
    out.append((ReadRequest("s", mixed), {"cache_salt": "salt-1", "safety_identifier": "u1"}))
    return out


@pytest.mark.parametrize("case", range(len(contract_requests())))
def test_requests_validate_with_vllms_model_and_answers_parse(d033, case):
    read, extra = contract_requests()[case]
    body = build_decisions_payload(read, model=SERVED, extra=extra)
    request = d033.protocol.DecisionRequest.model_validate(body)
    assert request.joint is read.joint
    assert request.model == SERVED
    assert d033.adapters.input_text(request.input) == (
        f"{read.instructions}\n\n{read.state}" if read.instructions else read.state
    )
    for i, (q, wire) in enumerate(zip(read.questions, request.questions)):
        asked = d033.adapters.make_read_question(i, wire)
        assert asked.instructions == q.instructions
        names = [o.name for o in asked.options]
        descriptions = [o.description or None for o in asked.options]
        if q.type == "noul":
            assert names == ["false", "true"]  # exactly a predicate's options
            assert descriptions == [q.descriptions[1], q.descriptions[0]]
        elif q.type == "choice":
            assert names == [json.dumps(o, ensure_ascii=False) for o in q.options]
            assert descriptions == list(q.descriptions)
        else:
            assert names == list(q.options)
        assert list(asked.labels) == list(LABELS[: len(q.options)])
    # Answers as 0.33 builds them, in its response model.
    answers, expected = [], []
    for i, wire in enumerate(request.questions):
        n = len(d033.adapters.make_read_question(i, wire).options)
        weights = [math.exp(-0.3 * ((k * 7 + i) % n)) for k in range(n)]
        probs = [w / sum(weights) for w in weights]
        mass = 0.2 + 0.1 * (i % 5)
        answers.append(d033.adapters.make_answer(wire, probs, mass))
        expected.append((probs, mass))
    response = d033.protocol.DecisionResponse(
        model=SERVED,
        answers=answers,
        usage=d033.protocol.OpenAIDecisionUsage(
            input_tokens=10,
            input_tokens_details=d033.protocol.InputTokensDetails(),
            output_tokens=len(answers),
            output_tokens_details=d033.protocol.OutputTokensDetails(),
            total_tokens=10 + len(answers),
        ),
    ).model_dump()
    reads = parse_decisions_answers(read, json.loads(json.dumps(response)))
    for q, got, (probs, mass) in zip(read.questions, reads, expected):
        # Our logprobs follow our option order: (yes, no) = (true, false).
        want = probs[::-1] if q.type == "noul" else probs
        assert [math.exp(lp) for lp in got.logprobs] == pytest.approx(
            [p * mass for p in want], rel=1e-12
        )
        assert got.label_mass == pytest.approx(mass, rel=1e-12)


def test_a_predicate_answer_parses_too(d033):
    read = ReadRequest("s", specs({"ok": ab.yes_no("OK?")}))
    wire = d033.protocol.PredicateQuestion(type="predicate", instructions="OK?", name="ok")
    answer = d033.adapters.make_answer(wire, [0.3, 0.7], 0.5)
    (got,) = parse_decisions_answers(read, {"answers": [answer.model_dump()]})
    assert [math.exp(lp) for lp in got.logprobs] == pytest.approx([0.7, 0.3])
    assert got.label_mass == 1.0  # a predicate answer carries no confidence


# ------------------------------------------------------------ the endpoint, in process


class Server:
    """0.33's ``/v1/decisions`` app over the stand-in DiffusionGemma engine."""

    def __init__(self, d033: SimpleNamespace, ref: Any, tokenizer: Any, canvas: int) -> None:
        from fastapi import FastAPI
        from vllm.entrypoints.serve.exception_handling.register import init_exception_handler

        strategy, self.engine = make_strategy(
            ref, tokenizer, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=canvas
        )
        models = SimpleNamespace(
            lora_requests={},
            base_model_paths=[SimpleNamespace(name=SERVED)],
            is_base_model=lambda name: name == SERVED,
            model_name=lambda lora_request=None: SERVED,
        )
        app = FastAPI()
        init_exception_handler(app)
        d033.api_router.register_decisions_api_router(app)
        app.state.openai_serving_decisions = d033.serving.OpenAIServingDecisions(models, strategy)
        app.state.args = SimpleNamespace(log_error_stack=False)
        self.request_model = d033.protocol.DecisionRequest
        self.asgi = httpx.ASGITransport(app=app)
        self.bodies: list[dict[str, Any]] = []

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        response = await self.asgi.handle_async_request(request)
        content = await response.aread()
        return httpx.Response(response.status_code, headers=response.headers, content=content)

    def handle(self, request: httpx.Request) -> httpx.Response:
        # Sync callers run in the reader's threads: one event loop per call.
        return asyncio.run(self.handle_async(request))

    def reader(self, **kw: Any) -> RemoteReader:
        kw.setdefault("model", SERVED)
        return RemoteReader(
            "http://vllm.test",
            api="decisions",
            transport=httpx.MockTransport(self.handle),
            async_transport=httpx.MockTransport(self.handle_async),
            backoff_s=0.0,
            **kw,
        )


def as_vllm_words_it(read: ReadRequest) -> ReadRequest:
    """The request the server reads: choice values as JSON text, yes/no as the choice
    ``false``/``true``, score levels as lettered options, instructions first in the
    user turn."""
    questions = []
    for q in read.questions:
        if q.type == "noul":
            q = QuestionSpec(
                q.id, "choice", q.instructions, ("false", "true"), q.descriptions[::-1], ("A", "B")
            )
        elif q.type == "choice":
            q = dataclasses.replace(
                q, options=tuple(json.dumps(o, ensure_ascii=False) for o in q.options)
            )
        else:  # a score's levels are lettered options too, not 0-9
            q = dataclasses.replace(q, type="choice", labels=tuple(LABELS[: len(q.options)]))
        questions.append(q)
    state = f"{read.instructions}\n\n{read.state}" if read.instructions else read.state
    return ReadRequest(state, tuple(questions), joint=read.joint)


def local_reads(tokenizer: Any, read: ReadRequest, canvas: int) -> tuple[list, list]:
    llm = FakeLLM(tokenizer, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=canvas)
    reader = VLLMReader(llm)
    try:
        reads = reader.read([as_vllm_words_it(read)])[0]
    finally:
        reader.close()
    return reads, llm.calls[0]


def probs_of(logprobs: tuple[float, ...]) -> list[float]:
    weights = [math.exp(lp) for lp in logprobs]
    return [w / sum(weights) for w in weights]


@pytest.mark.parametrize("qset", sorted(QUESTION_SETS))
@pytest.mark.parametrize("joint", [False, True])
@pytest.mark.parametrize("instructions", [None, "You triage support tickets."])
@pytest.mark.parametrize("canvas", [32, 64])
def test_reads_over_http_equal_local_reads(
    d033, vllm033, dg_tokenizer, qset, joint, instructions, canvas
):
    read = ReadRequest(STATE, specs(QUESTION_SETS[qset]), instructions=instructions, joint=joint)
    server = Server(d033, vllm033, dg_tokenizer, canvas)
    with server.reader() as reader:
        remote = asyncio.run(reader.aread([read]))[0]
    assert not isinstance(remote, Exception), remote
    (body,) = server.bodies
    server.request_model.model_validate(body)
    assert body.get("joint", False) is joint
    ours, sent = local_reads(dg_tokenizer, read, canvas)
    # The server's engine got exactly what our local planner sends for those questions.
    assert len(sent) == len(server.engine.calls)
    for (our_ids, our_params), (their_ids, their_params) in zip(sent, server.engine.calls):
        assert our_ids == their_ids
        assert repr(our_params) == repr(their_params)
    if joint:
        assert len(server.engine.calls) < len(read.questions)  # shared canvases
    for q, got, local in zip(read.questions, remote, ours):
        want = probs_of(local.logprobs)
        if q.type == "noul":
            want = want[::-1]  # local read of (false, true); ours is (yes, no)
        assert probs_of(got.logprobs) == pytest.approx(want, abs=1e-12)
        assert got.label_mass == pytest.approx(local.label_mass, rel=1e-9)


def test_engine_decisions_sync_and_async_over_http(d033, vllm033, dg_tokenizer):
    questions = QUESTION_SETS["mixed"]
    server = Server(d033, vllm033, dg_tokenizer, 64)
    with server.reader() as reader:
        engine = ab.DecisionEngine(reader=reader, joint=True, instructions="Be strict.")
        sync = engine.decide(STATE, questions)
        async_ = asyncio.run(engine.adecide(STATE, questions))
    assert len(server.bodies) == 2 and server.bodies[0] == server.bodies[1]
    assert server.bodies[0]["joint"] is True
    read = ReadRequest(STATE, specs(questions), instructions="Be strict.", joint=True)
    ours, _ = local_reads(dg_tokenizer, read, 64)
    for decisions in (sync, async_):
        for (qid, question), local in zip(questions.items(), ours):
            want = probs_of(local.logprobs)
            options = list(decisions[qid].probabilities)
            if question.type == "noul":
                want = want[::-1]
            got = [decisions[qid].probabilities[o] for o in options]
            assert got == pytest.approx(want, abs=1e-9)
            assert decisions[qid].label_mass == pytest.approx(local.label_mass, rel=1e-9)
        assert decisions["team"].label == sync["team"].label


def test_our_yes_no_reads_exactly_like_a_predicate(d033, vllm033, dg_tokenizer):
    """vLLM turns a predicate into the choice [false, true]: the boolean choice we send
    instead gives the server's engine the same requests and the same probabilities, and
    its answer also carries the confidence (so the label mass)."""
    read = ReadRequest(
        STATE, specs({"a": ab.yes_no("Is it urgent?"), "b": ab.yes_no("Is it fine?")})
    )
    ours = build_decisions_payload(read, model=SERVED)
    predicate = {
        **ours,
        "questions": [
            {"type": "predicate", "name": q["name"], "instructions": q["instructions"]}
            for q in ours["questions"]
        ],
    }
    answers, calls = [], []
    for joint in (False, True):
        for body in (ours, predicate):
            server = Server(d033, vllm033, dg_tokenizer, 64)
            with httpx.Client(transport=httpx.MockTransport(server.handle)) as client:
                response = client.post(
                    "http://vllm.test/v1/decisions", json={**body, "joint": joint}
                )
            assert response.status_code == 200, response.text
            answers.append(response.json()["answers"])
            calls.append([(ids, repr(p)) for ids, p in server.engine.calls])
    for i in (0, 2):
        assert calls[i] == calls[i + 1]
        for choice, pred in zip(answers[i], answers[i + 1]):
            assert pred["type"] == "predicate" and "confidence" not in pred
            assert choice["probabilities"][1]["value"] is True
            assert choice["probabilities"][1]["probability"] == pytest.approx(
                pred["probability"], abs=1e-12
            )


def test_server_4xx_messages_come_through(d033, vllm033, dg_tokenizer):
    server = Server(d033, vllm033, dg_tokenizer, 64)
    wide = ReadRequest(STATE, specs({"pick": ab.choice("Which?", [f"o{i}" for i in range(27)])}))
    with pytest.raises(RemoteRequestError, match="at most 26 choices") as info:
        server.reader(max_options=30).read([wide])
    assert info.value.status_code == 400
    read = ReadRequest(STATE, specs(QUESTION_SETS["mixed"]), joint=True)
    with pytest.raises(RemoteRequestError, match="does not exist") as info:
        asyncio.run(server.reader(model="other").aread([read]))
    assert info.value.status_code == 404
    # The request model forbids fields it does not know (a systemone-only extra).
    with pytest.raises(RemoteRequestError, match="priority") as info:
        server.reader(extra_body={"priority": 1}).read([read])
    assert info.value.status_code == 400
    assert server.engine.calls == []
