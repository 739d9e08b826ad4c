"""Cold start: the time from a fresh interpreter to the first decision, phase by phase.

    python benchmarks/bench_cold_start.py [--reps 5] [--before REV] [--json out.json]

What a CLI user or a CI replay job pays on every run. Each repetition starts a FRESH
Python process per kind and times, inside it, ``import agentbranch``, building the
engine, the first ``decide`` and the second (``agentbranch_bench.cold_start``, which
``benchmarks/bench.py`` prints too). Kinds: the embedded CPU default
(``DecisionEngine.from_env({})``), the same with its first decision taken apart
(``import torch``, ``import transformers``, transformers' model classes, the tokenizer,
the weights, the first read), a tiny DiffusionGemma through ``TransformersReader``, a
replay cassette's reader.

``--before REV`` also exports ``src/`` of git revision ``REV`` (``git archive``, no
checkout touched) and runs both trees in fresh interpreters, alternating (before,
after, after, before, ...), so both see the same machine; it prints every phase for
both and the after/before ratio. The installed packages (torch, transformers ...) are
shared by both trees. Prints medians; nothing is asserted (machines are noisy).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's harness and library

from agentbranch_bench.cold_start import KINDS, export_src, measure, rows  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--before", metavar="REV", help="git revision to compare with")
    parser.add_argument(
        "--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="kinds of process"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    if args.json is not None and not args.json.parent.is_dir():
        parser.error(f"--json {args.json}: folder {args.json.parent} does not exist")

    def tick(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="agentbranch-before-") as tmp:
        trees: dict[str, Path | None] = {"after": ROOT / "src"}
        if args.before:
            try:
                trees = {"before": export_src(ROOT, args.before, Path(tmp)), **trees}
            except Exception as e:  # a revision git does not know
                parser.error(f"--before {args.before}: {getattr(e, 'stderr', b'') or e!r}")
        result = measure(trees, reps=args.reps, kinds=tuple(args.kinds), tick=tick)

    after = result["after"]
    print(f"cold start, medians of {args.reps} fresh processes (seconds)")
    if args.before:
        before = result["before"]
        print(f"{'process':<20}{'phase':<24}{'before':>9}{'after':>9}{'ratio':>8}")
        for (kind, phase, b), (_, _, a) in zip(rows(before), rows(after)):
            print(f"{kind:<20}{phase:<24}{b:9.3f}{a:9.3f}{a / b if b else float('nan'):8.2f}")
    else:
        print(f"{'process':<20}{'phase':<24}{'seconds':>9}")
        for kind, phase, seconds in rows(after):
            print(f"{kind:<20}{phase:<24}{seconds:9.3f}")
    for name, tree in result.items():
        m = next(iter(tree.values()))
        print(
            f"{name}: `import agentbranch` loads {m['modules']} modules; of the heavy ones: "
            f"{', '.join(m['heavy']) or 'none'}"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"reps": args.reps, "before_rev": args.before, "trees": result}, indent=2)
        )


if __name__ == "__main__":
    main()
