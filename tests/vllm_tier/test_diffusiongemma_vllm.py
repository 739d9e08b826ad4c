"""DiffusionGemma end to end on vLLM's own model class: ``VLLMReader``'s diffusion path
over a real ``vllm.LLM`` serving a tiny random DiffusionGemma (built at test time).

On CPU the tier's shim (``diffusion_shim/``) runs model runner V2's Triton kernels in
Triton's interpreter; on a GPU machine the same tests run on real Triton
(``scripts/vllm_gpu.sh``), with the real checkpoint when ``AGENTBRANCH_DGEMMA_CHECKPOINT``
points at one (the transformers parity tests then skip: they need the tiny weights).

* Parity with transformers: on the same weights every label log probability of
  ``VLLMReader`` equals ``TransformersReader``'s within 1e-5 — single, joint, chunked
  joint, several draws, prompts of different lengths in one batch, and constrained reads
  (against transformers' logprobs renormalised over the label ids).
* Parity with vLLM: vLLM's own ``DiffusionGemmaCanvasStrategy`` (0.32's single reads,
  0.33's single and joint reads) run in process on the same ``LLM`` gives the same
  labels, probabilities and label mass as our reader.
* The rest of the library on top: ``variant(max_steps=4)`` behind ``MoreDraws``,
  ``decide_many``, a LangGraph decide node and router that take and fall back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from typing import Any

import pytest
from _dgemma_reads import BARE, MIXED, TOL, max_logprob_gap
from _dgemma_reads import make_read as read_of
from typing_extensions import TypedDict
from vllm_ref import make_strategy, run_strategy

import agentbranch as ab
from agentbranch.core.reads import ReadRequest, SlotLogprobs
from agentbranch.engine.readers.vllm import VLLMReader, engine_requests
from agentbranch.langgraph import DecisionRecords

QUESTION_SETS = {
    "mixed": MIXED,
    "bare": BARE,
    "wide": {
        "route": ab.choice("Route it.", {f"tool_{i}": f"Tool {i}" for i in range(26)}),
        "scale": ab.score("Rate it.", [f"level {i}" for i in range(10)]),
    },
}
#: Twelve questions: more than one 32-token canvas holds, so a joint read is chunked.
MANY = {f"q{i}": ab.yes_no(f"Is statement {i} true?") for i in range(12)}
STATES = [
    "Refund me!",
    "Customer: the checkout page returns 500 since this morning. Refund me!",
    '{"ticket": 42, "body": "Ünïcode and\\nnewlines", "tags": ["a", "b"]}',
    "Log excerpt:\n" + "\n".join(f"line {i}: worker {i % 3} restarted" for i in range(12)),
]


def make_read(state: str, qset: str | dict, **kw: Any) -> ReadRequest:
    """A read of ``state`` asking the question set ``qset`` names (or ``qset`` itself)."""
    return read_of(state, QUESTION_SETS[qset] if isinstance(qset, str) else qset, **kw)


# ----------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def checkpoint(dgemma_llm: tuple[Any, Any]) -> Any:
    return dgemma_llm[1]


@pytest.fixture(scope="module")
def reader(dgemma_llm: tuple[Any, Any]) -> Any:
    r = VLLMReader(dgemma_llm[0])
    yield r
    r.close()


@pytest.fixture(scope="module")
def hf_reader(checkpoint: Any) -> Any:
    from dgemma import real_checkpoint

    if real_checkpoint():
        pytest.skip("transformers parity runs on the tiny weights only")
    return ab.TransformersReader.from_pretrained(checkpoint, threads=1)


@pytest.fixture(scope="module")
def parity_log() -> Any:
    """Collects the measured gaps; printed at the end of the module (docs/benchmarks.md)."""
    gaps: dict[str, float] = {}
    yield gaps
    if gaps:
        lines = [f"  {name}: {gap:.2e}" for name, gap in sorted(gaps.items())]
        print("\nVLLMReader vs TransformersReader, max |Δ logprob|:\n" + "\n".join(lines))


# ------------------------------------------------------------------- the engine itself


def test_runs_on_vllms_diffusiongemma(dgemma_llm, reader):
    """The reader drives vLLM's own model class, through model runner V2 and Triton."""
    from vllm.triton_utils import HAS_TRITON

    llm = dgemma_llm[0]
    config = llm.llm_engine.vllm_config
    assert config.model_config.architecture == "DiffusionGemmaForBlockDiffusion"
    assert config.use_v2_model_runner and HAS_TRITON
    assert reader.mode == "diffusion" and reader.served_canvas == 32
    d = ab.DecisionEngine(reader).decide(STATES[1], QUESTION_SETS["mixed"])
    for decision in d.values():
        assert decision.reader == "vllm"
        assert sum(decision.probabilities.values()) == pytest.approx(1.0)
        assert 0.0 < decision.label_mass <= 1.0


# ------------------------------------------------------------- parity: transformers


@pytest.mark.parametrize("qset", sorted(QUESTION_SETS))
@pytest.mark.parametrize("joint", [False, True])
def test_reads_equal_transformers(reader, hf_reader, parity_log, qset, joint):
    reads = [make_read(s, qset, joint=joint) for s in STATES]
    gap = max_logprob_gap(reader.read(reads), hf_reader.read(reads))
    parity_log[f"{'joint' if joint else 'single'} {qset}"] = gap
    assert gap <= TOL


def test_chunked_joint_reads_equal_transformers(reader, hf_reader, parity_log):
    read = make_read(STATES[1], MANY, joint=True)
    token_reads, _ = reader.plan([read])
    assert len(token_reads) > 1  # twelve questions do not fit one 32-token canvas
    gap = max_logprob_gap(reader.read([read]), hf_reader.read([read]))
    parity_log["joint, chunked (12 questions)"] = gap
    assert gap <= TOL


def test_split_label_sets_read_the_same(reader):
    """Label ids above vLLM's cap per request go out as several requests with the same
    prompt and canvas; on the real engine they read exactly what one request reads."""
    read = make_read(STATES[1], "wide", joint=True)
    token_reads = reader.plan([read])[0]
    assert len(engine_requests(token_reads, mode="diffusion", max_ids=7)) > len(token_reads)
    whole = reader.read([read])
    split_reader = reader.variant()
    split_reader.max_logprob_ids = 7
    assert max_logprob_gap(split_reader.read([read]), whole) <= TOL


def test_noise_draws_equal_transformers(reader, hf_reader, parity_log):
    reads = [make_read(s, "mixed", draws=4) for s in STATES[:2]]
    ours = reader.read(reads)
    gap = max_logprob_gap(ours, hf_reader.read(reads))
    parity_log["4 draws"] = gap
    assert gap <= TOL
    assert {r.extras.get("draws") for req in ours for r in req} == {4}
    # Each draw reads its own noise token: the averaged read is not draw 0's.
    single = reader.read([dataclasses.replace(reads[0], draws=1)])[0]
    assert any(
        abs(a - b) > 1e-4 for r, s in zip(ours[0], single) for a, b in zip(r.logprobs, s.logprobs)
    )


def test_batch_of_prompt_lengths_equals_single_reads(reader, hf_reader):
    """One batch of prompts of different lengths (vLLM batches them in its scheduler)
    reads what each prompt reads alone, and what transformers reads."""
    reads = [make_read(s, "mixed", joint=j) for s in STATES for j in (False, True)]
    lengths = {len(t.prompt_ids) for t in reader.plan(reads)[0]}
    assert len(lengths) >= 4
    batched = reader.read(reads)
    alone = [reader.read([r])[0] for r in reads]
    assert max_logprob_gap(batched, alone) <= TOL
    assert max_logprob_gap(batched, hf_reader.read(reads)) <= TOL


@pytest.mark.parametrize("joint", [False, True])
def test_constrained_reads_equal_renormalised_transformers(reader, hf_reader, parity_log, joint):
    """``diffusion_constrained``: vLLM unembeds only the label ids, so the logprobs are
    normalised over them: transformers' full-vocabulary logprobs minus their logsumexp
    over the same ids (all the request's ids, as vLLM normalises per request)."""
    import torch

    constrained = reader.variant(constrained=True)
    read = make_read(STATES[1], "mixed", joint=joint)
    ours = constrained.read([read])[0]
    token_reads, plans = hf_reader.plan([read])
    full = hf_reader.backend.canvas_logprobs(token_reads)
    expected = []
    for token_read, lp in zip(token_reads, full):
        ids = sorted({i for slot in token_read.slots for group in slot.label_ids for i in group})
        norm = torch.logsumexp(lp[:, ids], dim=-1)
        slots = []
        for slot in token_read.slots:
            row = lp[slot.position] - norm[slot.position]
            logprobs = tuple(max(float(row[i]) for i in group) for group in slot.label_ids)
            ids_here = {i for group in slot.label_ids for i in group}
            mass = sum(math.exp(float(row[i])) for i in ids_here)
            # vLLM's argmax is over the allowed ids: on a joint canvas it may be another
            # question's label.
            argmax = max(ids, key=lambda i: float(row[i]))
            slots.append(SlotLogprobs(logprobs, mass, argmax in ids_here))
        expected.append(slots)
    theirs = hf_reader.assemble(plans, expected)[0]
    gap = max_logprob_gap([ours], [theirs])
    parity_log[f"constrained {'joint' if joint else 'single'}"] = gap
    assert gap <= TOL
    if not joint:  # one slot per request: its labels hold all the probability
        assert all(r.label_mass == pytest.approx(1.0, abs=1e-5) for r in ours)


# ------------------------------------------------------------------ parity: vLLM's own


def _real_strategy(ref: Any, llm: Any, tokenizer: Any) -> tuple[Any, Any]:
    """vLLM's ``DiffusionGemmaCanvasStrategy`` with the stand-in context, whose engine
    client runs every request on the real ``LLM`` (the reader's worker is idle)."""
    from vllm.inputs import TokensPrompt

    config = llm.llm_engine.vllm_config
    strategy, engine = make_strategy(
        ref,
        tokenizer,
        vocab_size=config.model_config.get_vocab_size(),
        max_model_len=config.model_config.max_model_len,
        canvas_length=config.diffusion_config.canvas_length,
    )

    async def generate(engine_input: Any, params: Any, request_id: str, **_: Any):
        ids = list(engine_input["prompt_token_ids"])
        engine.calls.append((ids, params))
        prompt = TokensPrompt(prompt_token_ids=ids)
        yield llm.generate([prompt], [params], use_tqdm=False)[0]

    engine.generate = generate
    return strategy, engine


@pytest.mark.parametrize("version", ["0.32", "0.33"])
@pytest.mark.parametrize("qset", ["mixed", "wide"])
def test_single_reads_equal_vllms_strategy(request, version, qset, dgemma_llm, reader):
    ref = request.getfixturevalue("vllm032" if version == "0.32" else "vllm033")
    llm = dgemma_llm[0]
    read = make_read(STATES[1], qset)
    strategy, engine = _real_strategy(ref, llm, llm.get_tokenizer())
    theirs = run_strategy(strategy, ref, read)
    ours = reader.read([read])[0]
    assert len(engine.calls) == len(read.questions)
    assert_same_as_vllm(read, ours, theirs)


@pytest.mark.parametrize("qset", ["mixed", "wide", "many"])
def test_joint_reads_equal_vllms_strategy(vllm033, qset, dgemma_llm, reader):
    llm = dgemma_llm[0]
    read = make_read(STATES[1], MANY if qset == "many" else qset, joint=True)
    strategy, engine = _real_strategy(vllm033, llm, llm.get_tokenizer())
    theirs = run_strategy(strategy, vllm033, read)
    ours = reader.read([read])[0]
    assert len(engine.calls) == len(reader.plan([read])[0])
    assert_same_as_vllm(read, ours, theirs)


def assert_same_as_vllm(read: ReadRequest, ours: list, theirs: list) -> None:
    """Same labels, probabilities and label mass as vLLM's strategy computed."""
    assert len(ours) == len(theirs) == len(read.questions)
    for spec, our, their in zip(read.questions, ours, theirs):
        weights = [math.exp(lp) for lp in our.logprobs]
        probs = [w / sum(weights) for w in weights]
        assert probs == pytest.approx(their.probs, abs=TOL)
        assert our.label_mass == pytest.approx(their.label_mass, rel=TOL)
        best = max(range(len(probs)), key=probs.__getitem__)
        assert best == max(range(len(their.probs)), key=their.probs.__getitem__), spec.id


# ------------------------------------------------------------- the library on top


class GraphState(TypedDict, total=False):
    text: str
    decisions: DecisionRecords
    out: str


def test_more_steps_variant_behind_more_draws(reader):
    """``MoreDraws`` re-reads through ``reader.variant(max_steps=4)`` (four denoising steps
    on the same LLM, non-slot positions pinned) when the one-step read is not confident;
    taken if it now clears ``take_at``, else the generation fallback answers."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from agentbranch.policy import Generate, MoreDraws, Policy, Resolver

    urgent = {"urgent": QUESTION_SETS["mixed"]["urgent"]}
    effort = ab.DecisionEngine(reader.variant(max_steps=4))
    assert effort.reader.max_steps == 4 and reader.max_steps == 1
    engine = ab.DecisionEngine(reader)
    first = engine.decide(STATES[1], urgent)["urgent"]
    stepped = effort.decide(STATES[1], urgent)["urgent"]
    assert sum(stepped.probabilities.values()) == pytest.approx(1.0)
    assert 0.0 < stepped.label_mass <= 1.0
    chat = FakeListChatModel(responses=['{"label": "no"}'])
    take_at = min(1.0, first.confidence + 1e-6)  # the one-step read falls back
    policy = Policy(take_at=take_at, fallbacks=[MoreDraws(draws=1, engine=effort), Generate(chat)])
    runs = reader.reads_run
    record = Resolver(engine, urgent, policy).resolve(STATES[1])["urgent"]
    assert reader.reads_run == runs + 2  # the one-step read, then the 4-step re-read
    assert record["band"] == "fallback"
    if record.get("fallback", {}).get("kind") == "more_draws":
        assert record["confidence"] >= take_at and record["decided_by"] == "engine"
    else:  # the 4-step read stayed below take_at: the chat model answered
        assert (record["decided_by"], record["label"]) == ("fallback", "no")


def test_decide_many_across_prompt_lengths(reader, hf_reader):
    engine = ab.DecisionEngine(reader)
    many = engine.decide_many(STATES, QUESTION_SETS["mixed"])
    hf = ab.DecisionEngine(hf_reader).decide_many(STATES, QUESTION_SETS["mixed"])
    for ours, theirs, state in zip(many, hf, STATES):
        alone = engine.decide(state, QUESTION_SETS["mixed"])
        for qid in QUESTION_SETS["mixed"]:
            assert ours[qid].label == alone[qid].label == theirs[qid].label
            for option, p in ours[qid].probabilities.items():
                assert p == pytest.approx(alone[qid].probabilities[option], abs=TOL)
                assert p == pytest.approx(theirs[qid].probabilities[option], abs=TOL)


def test_async_decisions_share_the_engine(reader):
    engine = ab.DecisionEngine(reader)

    async def main() -> list[Any]:
        return await asyncio.gather(*(engine.adecide(s, QUESTION_SETS["bare"]) for s in STATES))

    together = asyncio.run(main())
    for state, got in zip(STATES, together):
        alone = engine.decide(state, QUESTION_SETS["bare"])
        for qid in got:
            assert got[qid].probabilities == pytest.approx(alone[qid].probabilities, abs=TOL)


def test_graph_decide_node_and_router_take_and_fall_back(reader):
    """A LangGraph decide node and a router over vLLM's DiffusionGemma: confident
    answers are taken, uncertain ones go to the generation fallback."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langgraph.graph import END, START, StateGraph

    from agentbranch.langgraph import decide_node, route
    from agentbranch.policy import Generate, Policy

    team = QUESTION_SETS["mixed"]["team"]
    engine = ab.DecisionEngine(reader)
    measured = engine.decide(STATES[1], {"team": team})["team"]
    other = next(o for o in ("billing", "bugs") if o != measured.label)

    def graph(policy: Any, as_router: bool) -> Any:
        g = StateGraph(GraphState)
        for name in ("billing", "bugs"):
            g.add_node(name, lambda state, name=name: {"out": name})
            g.add_edge(name, END)
        if as_router:
            edge = route(engine, "team", team, policy=policy, state_key="text")
            g.add_conditional_edges(START, edge, edge.path_map)
        else:
            node = decide_node(engine, {"team": team}, state_key="text", policy=policy)
            g.add_node("decide", node)
            g.add_edge(START, "decide")
            edge = node.router("team")
            g.add_conditional_edges("decide", edge, edge.path_map)
        return g.compile()

    for as_router in (False, True):
        chat = FakeListChatModel(responses=[f'{{"label": "{other}"}}'])
        take = Policy(take_at=measured.confidence * 0.5, fallbacks=[Generate(chat)])
        state = graph(take, as_router).invoke({"text": STATES[1]})
        assert state["out"] == measured.label
        fall = Policy(take_at=min(1.0, measured.confidence + 1e-6), fallbacks=[Generate(chat)])
        state = graph(fall, as_router).invoke({"text": STATES[1]})
        assert state["out"] == other
        if not as_router:
            record = state["decisions"]["team"]
            assert (record["band"], record["decided_by"]) == ("fallback", "fallback")
            assert record["engine_label"] == measured.label
            assert record["reader"] == "vllm"


def test_chat_model_generates_with_the_full_schedule_on_the_same_llm(reader):
    """The reader's chat model generates on the very ``LLM`` that reads (vLLM's own
    denoising schedule; ``steps`` caps it), alongside reads in the same worker."""
    from agentbranch.core.errors import ConfigurationError

    model = ab.LocalChatModel.on(reader, max_tokens=32)
    assert model.generator.reader.llm is reader.llm and not model.supports_choices
    before = reader.generations_run
    reply = model.invoke("Hello there")
    assert isinstance(reply.content, str)
    assert 0 < reply.usage_metadata["output_tokens"] <= 32
    assert reply.response_metadata["constrained"] is None
    capped = model.invoke("Hello there", steps=2)
    assert capped.usage_metadata["input_tokens"] == reply.usage_metadata["input_tokens"]

    engine = ab.DecisionEngine(reader)

    async def both() -> list[Any]:
        return await asyncio.gather(
            engine.adecide(STATES[0], QUESTION_SETS["bare"]), model.ainvoke("Hi")
        )

    decisions, generated = asyncio.run(both())
    assert decisions["pick"].label in ("alpha", "beta", "gamma")
    assert generated.usage_metadata["output_tokens"] > 0
    assert reader.generations_run == before + 3
    with pytest.raises(ConfigurationError, match="temperature"):
        model.invoke("Hello", temperature=0.5)
