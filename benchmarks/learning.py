"""Learning from the teacher: coverage and take precision over time, learning off and on.

The questions of ``earned_trust.py`` (``embedded_calibration.tasks_for``, one draw of
hand-written examples) are asked of each public set's held-out part
(``public_sets.py``), which becomes a stream of decisions (``STREAMS`` seeded orders per
question: 10, because a question's held-out part has only 178-700 states and the
calibration error after its 200th label is measured on what is left of them; on 3
streams that is 50-100 decisions for some questions, where a perfectly calibrated read
itself shows about 0.05), read by the embedded default. Each stream is run through
``Earned(precision=0.9, level=0.95)`` as the policy feeds it: a decision below the
threshold in force goes to a teacher that knows the true label (the ``Generate``
fallback), a taken one is audited at ``RATE``. Every label is also training data:

* **off**: today's engine, labels only move the threshold;
* **head** (what ``Earned(learn=True)`` ships for the embedded reader): the learned
  reader versions of ``agentbranch.policy.earned.learn`` (refits at 32, 64, 128 ... labels;
  each version is the question read by a logistic head fitted on the embeddings of the
  labelled states, ``agentbranch.policy.earned.learn.head``, through the reader's own head
  read), under the version ladder (``agentbranch.policy.earned.learn.ladder``): a version
  decides only once it has earned a threshold of its own on labels gathered after its
  fit, read by it;
* **examples**: the same ladder, each version the question with the labelled states as
  ``examples=`` (at most ``PER_OPTION`` per option, hand-written ones first).

Printed per question (pooled over its streams): decisions, accuracy of the written
question, coverage and take precision of each variant, coverage in the stream's last
half, the version in force at the end, and the ECE of the confidence the decisions
carried (the probability reported: the deciding version's measured map while it is in
force, ``agentbranch.policy.earned.learn.probability``, else the probability the read gave its
label; ``BINS`` equal-width bins) on decisions after 200 labels, with their number; then the three numbers the issue judges by: pooled coverage with
learning on over off, pooled take precision, and the worst question's take precision
(questions with >= 20 takes).

    pip install 'agentbranch[bench]'
    HF_HUB_OFFLINE=1 python benchmarks/learning.py [--streams 10] [--variants off examples head]

About 2 minutes of embedding on 2 shared cores, then the streams.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import _learn_streams as ls  # noqa: E402
import embedded_calibration as ec  # noqa: E402
import learning_readers as lr  # noqa: E402
import public_sets as ps  # noqa: E402

from agentbranch.policy.earned import Earned  # noqa: E402
from agentbranch.policy.earned.learn import ladder as ld  # noqa: E402

TARGET, LEVEL, RATE = 0.9, 0.95, 0.2
STREAMS = 10
SETS = {**ec.FIT_SETS, "snips": ps.snips}
#: ECE is measured on decisions made after this many labels.
ECE_AFTER = 200
BASE_SHARE = ld.BASE_SHARE
FIRST = ld.FIRST_REFIT


def run_stream(q: lr.Question, order: np.ndarray, draw: np.ndarray, learner) -> ls.LadderRun:
    """One stream through the ladder (``learner=None``: learning off, one version at the
    full level)."""
    y = q.label[order]

    def read(r: lr.Reads) -> ls.Read:
        return ls.Read(r.conf[order], r.pred[order] == y, r.top[order])

    def fit(j: int, train: np.ndarray) -> ls.Read:
        return read(learner.fit(q, order[train], y[train]))

    return ls.run_ladder(
        Earned(precision=TARGET, level=LEVEL),
        read(q.base),
        draw,
        RATE,
        fit if learner is not None else None,
        first=FIRST,
        base_share=BASE_SHARE,
    )


#: ECE bins: equal width over [0, 1].
BINS = 10


def ece(top: np.ndarray, right: np.ndarray, bins: int = BINS) -> float | None:
    """Expected calibration error of the probability each decision gave its label
    (``top``) against whether the label was right: ``bins`` equal-width bins over
    [0, 1], each weighted by its share of the decisions."""
    if len(top) == 0:
        return None
    idx = np.minimum((top * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        m = idx == b
        if m.any():
            total += m.sum() / len(top) * abs(top[m].mean() - right[m].mean())
    return total


def ece_floor(top: np.ndarray, draws: int = 200, seed: int = 0) -> float | None:
    """The mean ECE a perfectly calibrated read with these ``top`` probabilities
    would show on this few decisions (its right/wrong drawn with probability
    ``top``): the noise the measured ECE sits on."""
    if len(top) == 0:
        return None
    rng = np.random.default_rng(seed)
    return float(np.mean([ece(top, rng.random(len(top)) < top) for _ in range(draws)]))


def question_result(q: lr.Question, learners: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(len(q.label)) for _ in range(STREAMS)]
    draws = [rng.random(len(q.label)) for _ in range(STREAMS)]
    res: dict = {"n": len(q.label), "accuracy": round(float(q.base.accuracy(q.label)), 3)}
    for name, learner in learners.items():
        runs = [run_stream(q, o, d, learner) for o, d in zip(orders, draws)]
        taken = np.concatenate([r.taken for r in runs])
        right = np.concatenate([r.right for r in runs])
        late = np.concatenate([r.taken[len(r.taken) // 2 :] for r in runs])
        after = np.concatenate([r.labels_before >= ECE_AFTER for r in runs])
        tops = np.concatenate([r.probability for r in runs])
        reads = np.concatenate([r.top for r in runs])
        res[name] = {
            "decisions": int(len(taken)),
            "takes": int(taken.sum()),
            "right_takes": int(right[taken].sum()),
            "coverage": round(float(taken.mean()), 3),
            "precision": round(float(right[taken].mean()), 3) if taken.any() else None,
            "coverage_second_half": round(float(late.mean()), 3),
            "labels": round(float(np.mean([r.labels for r in runs])), 1),
            "final_version": int(np.median([r.version[-1] for r in runs])),
            "accuracy_in_force_second_half": round(
                float(np.mean(np.concatenate([r.right[len(r.right) // 2 :] for r in runs]))), 3
            ),
            "ece_after_200": None
            if not after.any()
            else round(float(ece(tops[after], right[after])), 3),
            "ece_n": int(after.sum()),
            "ece_floor": None if not after.any() else round(ece_floor(tops[after]), 3),
            #: the ECE of the read's own probability (no measured map)
            "ece_read_after_200": None
            if not after.any()
            else round(float(ece(reads[after], right[after])), 3),
            "curve": _curve(runs),
        }
    return res


def _curve(runs: list[ls.LadderRun], parts: int = 4) -> list[float]:
    """Coverage in each quarter of the stream (mean over streams)."""
    out = []
    for k in range(parts):
        vals = []
        for r in runs:
            n = len(r.taken)
            vals.append(r.taken[k * n // parts : (k + 1) * n // parts].mean())
        out.append(round(float(np.mean(vals)), 3))
    return out


def pooled(results: dict, name: str) -> dict:
    takes = sum(r[name]["takes"] for r in results.values())
    right = sum(r[name]["right_takes"] for r in results.values())
    decisions = sum(r[name]["decisions"] for r in results.values())
    worst = [
        r[name]["right_takes"] / r[name]["takes"]
        for r in results.values()
        if r[name]["takes"] >= 20
    ]
    eces = [
        r[name]["ece_after_200"] for r in results.values() if r[name]["ece_after_200"] is not None
    ]
    measured = [r[name] for r in results.values() if r[name]["ece_after_200"] is not None]
    own = [m["ece_read_after_200"] for m in measured]
    return {
        "coverage": round(takes / decisions, 4),
        "precision": round(right / takes, 4) if takes else None,
        "worst_question_precision": round(min(worst), 4) if worst else None,
        "questions_opened": sum(r[name]["takes"] > 0 for r in results.values()),
        "ece_max": round(max(eces), 3) if eces else None,
        "ece_over_0_05": sum(e > 0.05 for e in eces),
        "ece_measured": len(eces),
        #: questions whose ECE is above 0.05 with at least 300 decisions measured
        "ece_over_0_05_n300": sum(m["ece_after_200"] > 0.05 for m in measured if m["ece_n"] >= 300),
        #: the same count for the read's own probability (no measured map)
        "ece_read_over_0_05": sum(e > 0.05 for e in own),
        "ece_read_max": round(max(own), 3) if own else None,
    }


def main() -> None:
    global STREAMS, BASE_SHARE, FIRST
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=STREAMS)
    parser.add_argument("--variants", nargs="+", default=["off", "examples", "head"])
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--only", nargs="*", default=None, help="question ids to run")
    parser.add_argument("--base-share", type=float, default=BASE_SHARE)
    parser.add_argument("--first", type=int, default=FIRST, help="labels of the first refit")
    parser.add_argument("--cache", type=Path, help="cache of the embeddings and reads (pickle)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    STREAMS, BASE_SHARE, FIRST = args.streams, args.base_share, args.first
    start = time.perf_counter()
    questions = lr.load_or_read({k: SETS[k] for k in args.sets}, args.cache)
    if args.only:
        questions = {k: v for k, v in questions.items() if k in args.only}
    read_s = time.perf_counter() - start
    learners = {name: lr.LEARNERS[name]() for name in args.variants}
    start = time.perf_counter()
    results = {
        qid: question_result(q, learners, seed=i)
        for i, (qid, q) in enumerate(sorted(questions.items()))
    }
    run_s = time.perf_counter() - start
    print(f"{len(results)} questions x {STREAMS} streams: reads {read_s:.0f}s, runs {run_s:.0f}s\n")
    head = f"{'question':24} {'n':>4} {'acc':>5} |" + "".join(
        f" {name:>22} |" for name in args.variants
    )
    print(head + "\n" + f"{'':35}|" + " cov  prec  late v  ece  (n)  |" * len(args.variants))
    for qid, r in results.items():
        cells = []
        for name in args.variants:
            m = r[name]
            p = "  -  " if m["precision"] is None else f"{m['precision']:.3f}"
            e = (
                "  -        "
                if m["ece_after_200"] is None
                else (f"{m['ece_after_200']:.3f} ({m['ece_n']:>3})")
            )
            cells.append(
                f" {m['coverage']:.2f} {p} {m['coverage_second_half']:.2f} "
                f"{m['final_version']} {e} |"
            )
        print(f"{qid:24} {r['n']:>4} {r['accuracy']:>5.2f} |" + "".join(cells))
    overall = {name: pooled(results, name) for name in args.variants}
    print("\npooled:", json.dumps(overall))
    if "off" in overall:
        off = overall["off"]["coverage"]
        for name in args.variants:
            if name == "off":
                continue
            o = overall[name]
            ratio = o["coverage"] / off if off else math.nan
            print(
                f"{name}: coverage on/off {ratio:.2f}x ({off} -> {o['coverage']}), "
                f"pooled take precision {o['precision']}, worst question (>=20 takes) "
                f"{o['worst_question_precision']}"
            )
    for name in args.variants:
        o = overall[name]
        print(
            f"{name}: ECE after {ECE_AFTER} labels ({BINS} equal-width bins) above 0.05 on "
            f"{o['ece_over_0_05']} of {o['ece_measured']} questions measured "
            f"({o['ece_over_0_05_n300']} of those with >= 300 decisions), max {o['ece_max']}; "
            f"the read's own probability: {o['ece_read_over_0_05']} above, max {o['ece_read_max']}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    out = {
        "target_precision": TARGET,
        "level": LEVEL,
        "audit_rate": RATE,
        "streams_per_question": STREAMS,
        "first_refit": FIRST,
        "base_share": BASE_SHARE,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "learners": {k: repr(v) for k, v in learners.items()},
        "overall": overall,
        "per_question": results,
    }
    (args.out / "learning.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out / 'learning.json'}")


if __name__ == "__main__":
    main()
