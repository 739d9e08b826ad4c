"""What a learned head could take in hindsight: the ceiling ``learning_path.py`` is
measured against.

For each public question of ``learning_path.py`` (the same streams, the same seeded
order), the head a learned version ships (``agentbranch.policy.earned.learn.head.fit_head``,
with its confidence map) is fitted on the stream's first ``n`` labels and reads the rest;
printed per ``n``: its accuracy on the rest, and the share of the rest that the best
threshold *in hindsight* takes at a precision of at least 0.9 (the highest-coverage
band, of at least 20 decisions, whose share right is >= 0.9). No test, no error
spent: an upper bound on what any valid test could open with that head, not a figure
of what ``Earned`` takes.

The state embeddings come from ``learning_path.py``'s cache (run it once first), or are
computed by the embedded reader.

    pip install 'agentbranch[bench]'
    HF_HUB_OFFLINE=1 python benchmarks/learning_ceiling.py
    HF_HUB_OFFLINE=1 python benchmarks/learning_ceiling.py --sizes 32 64 --questions bbc.is_tech
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import learning_path as lp  # noqa: E402

import agentbranch as ab  # noqa: E402
from agentbranch.core.questions import to_spec  # noqa: E402
from agentbranch.policy.earned.learn import eprocess  # noqa: E402
from agentbranch.policy.earned.learn.head import fit_head  # noqa: E402

TARGET, MIN_BAND = 0.9, 20


def hindsight_coverage(confidence: np.ndarray, right: np.ndarray) -> float:
    """The largest share of the decisions a threshold takes with a band right >= TARGET
    (bands of at least MIN_BAND decisions; 0 when none)."""
    order = np.argsort(-confidence, kind="stable")
    share_right = np.cumsum(right[order]) / np.arange(1, len(order) + 1)
    ok = np.where((share_right >= TARGET) & (np.arange(1, len(order) + 1) >= MIN_BAND))[0]
    return float((ok.max() + 1) / len(order)) if len(ok) else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--questions", nargs="*", default=None)
    lp.add_cache_option(parser)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    engine = ab.DecisionEngine.from_env()
    memo = lp.EmbeddingMemo(engine.reader, args.cache)
    wanted = set(args.questions or ())
    sets = sorted({q.split(".")[0] for q in wanted}) if wanted else list(lp.SETS)
    rows: dict[str, dict] = {}
    print(f"{'question':24} {'n':>4} " + " ".join(f"{f'{n} labels: acc / cov':>22}" for n in args.sizes))
    for task, items in sorted(lp.questions(sets), key=lambda x: x[0].id):
        if wanted and task.id not in wanted:
            continue
        order = np.random.default_rng(1000).permutation(len(items))  # learning_path's stream 0
        stream = [items[i] for i in order]
        texts = [t for t, _ in stream]
        labels = np.array([y for _, y in stream])
        vectors = engine.reader.embed(texts).numpy()
        options = list(to_spec(task.id, task.question).options)  # type: ignore[arg-type]
        row: dict[str, dict] = {}
        for n in args.sizes:
            if len(stream) < n + MIN_BAND:
                continue
            head = fit_head(options, vectors[:n], list(labels[:n]))
            if head is None:
                continue
            rest = vectors[n:]
            p = np.exp(head.log_probs(rest.astype(np.float64), options))
            right = np.array(options)[p.argmax(1)] == labels[n:]
            conf = eprocess.confidences(head, rest, options)
            row[str(n)] = {
                "accuracy": round(float(right.mean()), 3),
                "hindsight_coverage": round(hindsight_coverage(conf, right), 3),
            }
        rows[task.id] = {"n": len(stream), "by_labels": row}
        cells = [
            f"{row[str(n)]['accuracy']:.2f} / {row[str(n)]['hindsight_coverage']:.2f}"
            if str(n) in row
            else "-"
            for n in args.sizes
        ]
        print(f"{task.id:24} {len(stream):>4} " + " ".join(f"{c:>22}" for c in cells), flush=True)
    memo.save()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "learning_ceiling.json").write_text(
        json.dumps({"target_precision": TARGET, "min_band": MIN_BAND, "questions": rows}, indent=2)
        + "\n"
    )


if __name__ == "__main__":
    main()
