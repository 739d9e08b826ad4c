"""What a learned head could take in hindsight: the ceiling ``learning_path.py`` is
measured against.

For each public question of ``learning_path.py`` (the same streams, the same seeded
order), the head a learned version ships (``agentbranch.policy.earned.learn.head.fit_head``,
with its confidence map, on the state embeddings and the written question's option
scores as the learner fits it) is fitted on the stream's first ``n`` labels and reads the rest;
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import learning_path as lp  # noqa: E402

import agentbranch as ab  # noqa: E402
from agentbranch.core.questions import to_spec  # noqa: E402
from agentbranch.policy.earned.learn import eprocess  # noqa: E402
from agentbranch.policy.earned.learn.head import fit_head, head_inputs  # noqa: E402

TARGET, MIN_BAND = 0.9, 20


def hindsight_coverage(
    confidence: np.ndarray, right: np.ndarray, precision: float = TARGET
) -> float:
    """The largest share of the decisions a threshold takes with a band right at least
    ``precision`` of the time (bands of at least MIN_BAND decisions; 0 when none)."""
    order = np.argsort(-confidence, kind="stable")
    share_right = np.cumsum(right[order]) / np.arange(1, len(order) + 1)
    ok = np.where((share_right >= precision) & (np.arange(1, len(order) + 1) >= MIN_BAND))[0]
    return float((ok.max() + 1) / len(order)) if len(ok) else 0.0


def question_streams(
    engine: ab.DecisionEngine, wanted: set[str]
) -> Iterator[tuple[Any, Any, np.ndarray, np.ndarray]]:
    """Each public question of ``learning_path.py`` (those in ``wanted``, or all) in its
    stream 0 order: the task, its question spec, the true labels and the state
    embeddings."""
    sets = sorted({q.split(".")[0] for q in wanted}) if wanted else list(lp.SETS)
    for task, items in sorted(lp.questions(sets), key=lambda x: x[0].id):
        if wanted and task.id not in wanted:
            continue
        order = np.random.default_rng(1000).permutation(len(items))  # learning_path's stream 0
        stream = [items[i] for i in order]
        vectors = engine.reader.embed([t for t, _ in stream]).numpy().astype(np.float64)
        spec = to_spec(task.id, task.question)  # type: ignore[arg-type]
        yield task, spec, np.array([y for _, y in stream]), vectors


def reads_after(
    options: list[str], x: np.ndarray, labels: np.ndarray, n: int, written: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """The head fitted on the first ``n`` of inputs ``x`` reading the rest: whether each
    read is right, and its confidence; ``None``: nothing to tell apart yet."""
    head = fit_head(options, x[:n], list(labels[:n]), written=written)
    if head is None:
        return None
    p = np.exp(head.log_probs(x[n:], options))
    right = np.array(options)[p.argmax(1)] == labels[n:]
    return right, eprocess.confidences(head, x[n:], options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128])
    parser.add_argument("--questions", nargs="*", default=None)
    lp.add_cache_option(parser)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    engine = ab.DecisionEngine.from_env()
    memo = lp.EmbeddingMemo(engine.reader, args.cache)
    rows: dict[str, dict] = {}
    print(
        f"{'question':24} {'n':>4} "
        + " ".join(f"{f'{n} labels: acc / cov':>22}" for n in args.sizes)
    )
    for task, spec, labels, vectors in question_streams(engine, set(args.questions or ())):
        options = list(spec.options)
        # what the shipped head reads: the embeddings and the written question's scores
        x, weight = head_inputs(engine, task.id, task.question, vectors)
        row: dict[str, dict] = {}
        for n in args.sizes:
            read = reads_after(options, x, labels, n, weight) if len(x) >= n + MIN_BAND else None
            if read is None:
                continue
            right, conf = read
            row[str(n)] = {
                "accuracy": round(float(right.mean()), 3),
                "hindsight_coverage": round(hindsight_coverage(conf, right), 3),
            }
        rows[task.id] = {"n": len(x), "by_labels": row}
        cells = [
            f"{row[str(n)]['accuracy']:.2f} / {row[str(n)]['hindsight_coverage']:.2f}"
            if str(n) in row
            else "-"
            for n in args.sizes
        ]
        print(f"{task.id:24} {len(x):>4} " + " ".join(f"{c:>22}" for c in cells), flush=True)
    memo.save()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "learning_ceiling.json").write_text(
        json.dumps({"target_precision": TARGET, "min_band": MIN_BAND, "questions": rows}, indent=2)
        + "\n"
    )


if __name__ == "__main__":
    main()
