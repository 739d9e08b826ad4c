"""How many labels per option a learned version's fit needs: the head fitted on a bounded
sample of the labels against the head fitted on all of them.

``Earned(learn=True)`` fits version ``j`` on the first ``32 * 2**(j-1)`` labels; over a
month that is unbounded. This measures what a bound costs on the public streams of
``learning.py`` (the same questions, embeddings and shipped head,
``agentbranch.policy.earned.learn.head.fit_head``): per question and seeded order, the head is
fitted on the first ``K`` labels (every refit point that leaves at least ``TEST`` states
to test on) three ways — all ``K``; the newest ``N`` per option; a reservoir of ``N`` per
option (the ``N`` labels with the smallest hash priority, what the library keeps:
``agentbranch.policy.earned.learn.loop``) — and its accuracy is measured on the states after
the first ``K``. Printed: the pooled accuracy of each way at each ``N``, the mean paired
difference to the unbounded fit with its standard error, and the share of fits where
the bound bit (some option had more than ``N`` labels).

    HF_HUB_OFFLINE=1 python benchmarks/learning_bound.py [--cache reads.pkl] [--streams 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import learning as lb  # noqa: E402
import learning_readers as lr  # noqa: E402

from agentbranch.policy.earned.learn import head as lh  # noqa: E402
from agentbranch.policy.earned.learn import ladder as ld  # noqa: E402
from agentbranch.policy.earned.learn.loop import priority  # noqa: E402

TEST = 50  #: states after the fit at least, to measure its accuracy on
BOUNDS = (16, 32, 64, 128, 256)


def _accuracy(q: lr.Question, train: np.ndarray, test: np.ndarray) -> float:
    options = list(q.spec.options)
    head = lh.fit_head(options, q.emb[train], [options[k] for k in q.label[train]])
    if head is None:
        return float("nan")
    z = q.emb[test] @ np.asarray(head.weights, dtype=float).T + np.asarray(head.bias, dtype=float)
    said = np.array(head.classes)[z.argmax(1)]
    return float((said == np.array(options)[q.label[test]]).mean())


def _bounded(q: lr.Question, train: np.ndarray, n: int, how: str) -> tuple[np.ndarray, bool]:
    keep, bit = [], False
    for k in np.unique(q.label[train]):
        rows = train[q.label[train] == k]
        if len(rows) > n:
            bit = True
            if how == "newest":
                rows = rows[-n:]
            else:
                pr = np.array([priority(f"state:{q.texts[i]}") for i in rows], dtype=np.uint64)
                rows = rows[np.argsort(pr, kind="stable")[:n]]
        keep.extend(rows.tolist())
    return np.array(sorted(keep)), bit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path)
    parser.add_argument("--streams", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "learning_bound.json")
    args = parser.parse_args()
    start = time.perf_counter()
    questions = lr.load_or_read(lb.SETS, args.cache)
    rows: list[dict] = []
    for qi, (qid, q) in enumerate(sorted(questions.items())):
        n = len(q.texts)
        for s in range(args.streams):
            order = np.random.default_rng(1000 * qi + s).permutation(n)
            j = 1
            while (k := ld.refit_at(j)) <= n - TEST:
                train, test = order[:k], order[k:]
                row = {"question": qid, "stream": s, "k": k, "all": _accuracy(q, train, test)}
                for b in BOUNDS:
                    for how in ("newest", "reservoir"):
                        kept, bit = _bounded(q, train, b, how)
                        row[f"{how}{b}"] = _accuracy(q, kept, test) if bit else row["all"]
                        row[f"bit{b}"] = bit
                rows.append(row)
                j += 1
        print(f"{qid}: {n} states ({time.perf_counter() - start:.0f}s)", flush=True)
    summary: dict = {}
    ok = [r for r in rows if not np.isnan(r["all"])]
    print(f"\n{len(ok)} fits on {len(questions)} questions x {args.streams} orders")
    print(f"unbounded: mean accuracy {np.mean([r['all'] for r in ok]):.4f}")
    for b in BOUNDS:
        bit = [r for r in ok if r[f"bit{b}"]]
        for how in ("newest", "reservoir"):
            d = np.array([r[f"{how}{b}"] - r["all"] for r in bit]) if bit else np.zeros(1)
            se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
            summary[f"{how}{b}"] = {
                "fits_bound_bit": len(bit),
                "mean_accuracy_where_bit": float(np.mean([r[f"{how}{b}"] for r in bit]))
                if bit
                else None,
                "unbounded_where_bit": float(np.mean([r["all"] for r in bit])) if bit else None,
                "mean_difference": float(d.mean()),
                "standard_error": float(se),
            }
            print(
                f"N={b:>4} per option, {how:9}: bound bit in {len(bit):>4} of {len(ok)} fits; "
                f"accuracy there {summary[f'{how}{b}']['mean_accuracy_where_bit'] or 0:.4f} vs "
                f"unbounded {summary[f'{how}{b}']['unbounded_where_bit'] or 0:.4f} "
                f"(paired difference {d.mean():+.4f} ± {se:.4f})"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "fits": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
