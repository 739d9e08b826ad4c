"""What a learned head gains by reading the question as written too: in hindsight, the
head a version ships fitted on a stream's first ``n`` labels with the written read's
option scores beside the state's embedding at several weights (0: the embedding alone).

For each public question of ``learning_path.py`` (the same streams, the same seeded
order), ``fit_head`` (with its confidence map) is fitted on the first ``n`` labels, its
input the state embeddings followed by ``weight`` times the embedded reader's option
scores of the question as written (``EmbeddedReader.written_scores``), and reads the
rest; printed per weight and ``n``, pooled over the questions (weighted by the
decisions read): the accuracy, and the share of the rest that the best threshold in
hindsight takes at a precision of at least 0.9 and at least 0.97 (bands of at least 20
decisions; a band right 97 % of the time is one a test shows in a few dozen labels). No
test, no error spent: what ``head.WRITTEN_WEIGHT`` was chosen on, not a figure of what
``Earned`` takes (that is ``learning_path.py``).

    pip install 'agentbranch[bench]'
    HF_HUB_OFFLINE=1 python benchmarks/learning_written.py
    HF_HUB_OFFLINE=1 python benchmarks/learning_written.py --weights 0 10 --sizes 32
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import learning_ceiling as lc  # noqa: E402
import learning_path as lp  # noqa: E402

import agentbranch as ab  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 1.0, 10.0, 30.0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--questions", nargs="*", default=None)
    lp.add_cache_option(parser)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    engine = ab.DecisionEngine.from_env()
    memo = lp.EmbeddingMemo(engine.reader, args.cache)
    rows: dict[str, dict] = {}
    for task, spec, labels, vectors in lc.question_streams(engine, set(args.questions or ())):
        options = list(spec.options)
        scores = engine.reader.written_scores(vectors, spec)
        row: dict[str, dict] = {}
        for weight in args.weights:
            if weight and scores is None:
                continue  # nothing to read the question by as written
            x = vectors if not weight else np.hstack([vectors, weight * scores])
            for n in args.sizes:
                if (
                    len(x) < n + lc.MIN_BAND
                    or (read := lc.reads_after(options, x, labels, n, weight)) is None
                ):
                    continue
                right, conf = read
                row[f"{weight:g}@{n}"] = {
                    "read": len(right),
                    "accuracy": round(float(right.mean()), 4),
                    "coverage_90": round(lc.hindsight_coverage(conf, right, 0.9), 4),
                    "coverage_97": round(lc.hindsight_coverage(conf, right, 0.97), 4),
                }
        rows[task.id] = row
        cells = "  ".join(
            f"{k}: {v['accuracy']:.2f}/{v['coverage_90']:.2f}/{v['coverage_97']:.2f}"
            for k, v in row.items()
        )
        print(f"{task.id:24} {cells}", flush=True)
    memo.save()
    pooled: dict[str, dict] = {}
    # the questions every weight read (one without written scores has no written head)
    common = [
        r
        for r in rows.values()
        if all(f"{w:g}@{n}" in r for w in args.weights for n in args.sizes if f"0@{n}" in r)
    ]
    print(
        f"\npooled over the {len(common)} questions every weight read (weighted by "
        "decisions read): accuracy / coverage at 0.9 / at 0.97"
    )
    for weight in args.weights:
        for n in args.sizes:
            k = f"{weight:g}@{n}"
            got = [r[k] for r in common if k in r]
            if not got:
                continue
            w = np.array([g["read"] for g in got], dtype=float)
            m = {
                f: round(float(np.dot(w, [g[f] for g in got]) / w.sum()), 4)
                for f in ("accuracy", "coverage_90", "coverage_97")
            }
            pooled[k] = {**m, "questions": len(got)}
            print(
                f"  weight {weight:>4g}, {n:>3} labels: {m['accuracy']:.3f} / "
                f"{m['coverage_90']:.3f} / {m['coverage_97']:.3f}  ({len(got)} questions)"
            )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "learning_written.json").write_text(
        json.dumps({"min_band": lc.MIN_BAND, "pooled": pooled, "questions": rows}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
