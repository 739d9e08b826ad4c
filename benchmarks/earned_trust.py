"""Earned thresholds on the public labelled sets, against fixed and calibrated ones.

Every question of ``embedded_calibration.py`` (one draw of examples) is read by the
embedded CPU reader on its set's held-out part, which becomes a stream of decisions
(``STREAMS`` seeded orders of it). On each stream, in one run:

* **fixed**: ``take_at = FIXED`` (a hand-picked threshold, as a user would start);
* **calibrated**: calibrate-then-fixed, today's workflow: a temperature fitted on a
  labelled sample of ``earned_reads.FIT_SAMPLE`` (150) items of the set's *fit* part,
  and the threshold ``agentbranch calibrate`` suggests on that sample for precision 0.9
  (the lowest whose kept decisions are 90 % right there), then fixed;
* **earned**: ``Earned(precision=0.9, level=0.95)`` (defaults otherwise), fed as the
  policy feeds it: every decision below the threshold in force is labelled by the
  teacher (the ``Generate`` fallback), taken ones are audited at ``RATE``;
* **before**: the same, with the previous release's method on the same streams (a look
  that has shown nothing walks from the top only: ``second_walk_from=None``), for the
  ratio;
* **hindsight**: the lowest fixed threshold whose decisions over the whole stream are
  90 % right — the best any fixed threshold could do, known only afterwards;
* **reference**: the single-test reference of ``earned_simulation.py`` on the question's
  own band curve — after ``i`` decisions, all labelled, the widest band one exact test
  at 0.05 would show on the expected counts: the yardstick for what a level-0.95 method
  can cover on a stream this long (and the labels it needs to open).

The teacher is the set's true label (precision is against the truth here). Reported per
question: accuracy; coverage (share of the stream taken) and realized precision of each
method; for earned, the share of streams whose taken decisions ended below 0.9, coverage
as a share of hindsight's, labels used and labels before it first opened. Where nothing
reaches 0.9, coverage 0 is the right answer.

    pip install 'agentbranch[bench]'
    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python benchmarks/earned_trust.py [--reads reads.json]

Reading takes about 2 minutes on 2 shared CPU cores (≈2,300 texts); ``--reads`` caches
the reads, replaying the streams takes seconds.
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

import _earned_streams as es  # noqa: E402
import earned_reads as er  # noqa: E402

from agentbranch import calibration as cal  # noqa: E402
from agentbranch.core.decisions import confidence_from  # noqa: E402
from agentbranch.policy.earned import Earned  # noqa: E402

TARGET, LEVEL = 0.9, 0.95
FIXED = 0.8
RATE = 0.1
STREAMS = 20


def _stats(taken: np.ndarray, right: np.ndarray) -> tuple[float, float]:
    """(coverage, realized precision; nan when nothing was taken)."""
    k = int(taken.sum())
    return k / len(taken), (float(right[taken].mean()) if k else float("nan"))


def calibrated_threshold(q: dict) -> tuple[float, float | None]:
    """Temperature fitted on the labelled fit sample, and the threshold suggested there."""
    fit = q["fit"]
    scored = [
        cal.Scored("q", q["type"], tuple(map(str, range(len(p)))), tuple(p), y)
        for p, y in zip(fit["probs"], fit["label"])
    ]
    t = cal.fit_temperature(scored)
    conf = [confidence_from(cal.apply_temperature(s.probs, t)) for s in scored]
    right = [max(range(len(s.probs)), key=s.probs.__getitem__) == s.label_index for s in scored]
    return t, cal.suggest_threshold(conf, right, TARGET).threshold


def question(q: dict, earneds: dict[str, Earned], seed: int) -> dict:
    conf0, right0 = (np.array(x) for x in er.confidence_and_correct(q["stream"]))
    temperature, cal_at = calibrated_threshold(q)
    cal_conf0 = np.array(
        [confidence_from(cal.apply_temperature(p, temperature)) for p in q["stream"]["probs"]]
    )
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"fixed": [], "calibrated": [], "hindsight": []}
    runs: dict[str, dict[str, list]] = {
        name: {
            "earned": [],
            "labels": [],
            "labels_to_open": [],
            "late_coverage": [],
            "at_realized": [],
        }
        for name in earneds
    }
    for _ in range(STREAMS):
        order = rng.permutation(len(conf0))
        conf, right, cal_conf = conf0[order], right0[order], cal_conf0[order]
        rows["fixed"].append(_stats(conf >= FIXED, right))
        cal_taken = cal_conf >= cal_at if cal_at is not None else np.zeros(len(conf), bool)
        rows["calibrated"].append(_stats(cal_taken, right))
        rows["hindsight"].append(es.hindsight_best(conf, right, TARGET))
        draw = rng.random(len(conf))
        for name, earned in earneds.items():
            run = es.run_stream(earned, conf, right, draw, RATE)
            got = runs[name]
            got["earned"].append(_stats(run.taken, right))
            got["labels"].append(run.labels)
            got["labels_to_open"].append(run.labels_to_open)
            got["late_coverage"].append(float(run.taken[len(conf) // 2 :].mean()))
            # What hindsight takes at the precision this run's takes really had.
            realized = float(right[run.taken].mean()) if run.taken.any() else TARGET
            got["at_realized"].append(es.hindsight_best(conf, right, max(TARGET, realized))[1])

    def summary(pairs: list[tuple[float, float]]) -> dict:
        cov = [c for c, _ in pairs]
        prec = [p for _, p in pairs if not math.isnan(p)]
        return {
            "coverage": round(float(np.mean(cov)), 3),
            "precision": round(float(np.mean(prec)), 3) if prec else None,
            "streams_below_target": round(sum(p < TARGET for p in prec) / len(pairs), 3),
        }

    hind_cov = float(np.mean([c for _, c in rows["hindsight"]]))
    # The single-test reference on this question's own band curve (earned_simulation.py).
    cands = np.round(np.arange(1.0, -0.001, -0.01), 2)
    ref_cov, ref_first = es.single_test_reference(
        *es.band_curve(conf0, right0.astype(float), cands), len(conf0), TARGET, LEVEL
    )

    def earned_summary(got: dict[str, list]) -> dict:
        out = summary(got["earned"])
        opened = [x for x in got["labels_to_open"] if x is not None]
        at_realized = float(np.mean(got["at_realized"]))
        return {
            **out,
            "coverage_second_half": round(float(np.mean(got["late_coverage"])), 3),
            "share_of_hindsight": round(out["coverage"] / hind_cov, 3) if hind_cov else None,
            "share_at_realized_precision": round(out["coverage"] / at_realized, 3)
            if at_realized
            else None,
            "opened": round(len(opened) / STREAMS, 3),
            "labels_to_open": _median(opened),
            "labels": round(float(np.mean(got["labels"])), 1),
        }

    return {
        "type": q["type"],
        "kind": q["kind"],
        "n": len(conf0),
        "accuracy": round(float(right0.mean()), 3),
        "hindsight": {
            "threshold": _median([t for t, _ in rows["hindsight"]]),
            "coverage": round(hind_cov, 3),
        },
        "reference": {
            "coverage": round(ref_cov, 3),
            "share_of_hindsight": round(ref_cov / hind_cov, 3) if hind_cov else None,
            "labels_to_open": ref_first,
        },
        "fixed": {"take_at": FIXED, **summary(rows["fixed"])},
        "calibrated": {
            "temperature": round(temperature, 3),
            "take_at": None if cal_at is None else round(cal_at, 3),
            "labels": len(q["fit"]["label"]),
            **summary(rows["calibrated"]),
        },
        **{name: earned_summary(got) for name, got in runs.items()},
    }


def _share(m: dict) -> str:
    return "-" if m["share_of_hindsight"] is None else f"{m['share_of_hindsight']:.2f}"


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _median(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(float(np.median(xs)), 3) if xs else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reads", type=Path, help="cache of the reads (JSON)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    start = time.perf_counter()
    questions = er.load_or_read(args.reads)
    read_s = time.perf_counter() - start
    earned = Earned(precision=TARGET, level=LEVEL)
    # The previous release, on the same streams: no second walk from the predicted entry.
    before = Earned(precision=TARGET, level=LEVEL)
    before.second_walk_from = None
    earneds = {"before": before, "earned": earned}
    start = time.perf_counter()
    results = {
        qid: question(q, earneds, seed=i) for i, (qid, q) in enumerate(sorted(questions.items()))
    }
    print(
        f"{len(results)} questions x {STREAMS} streams in {time.perf_counter() - start:.0f}s "
        f"(reads {read_s:.0f}s)\n"
    )
    head = (
        f"{'question':24} {'n':>4} {'acc':>5} | {'hind':>5} | {'fixed':>11} | "
        f"{'calibrated':>11} | {'earned':>11} {'<.9':>5} {'share':>5} {'@real':>5} {'open@':>5} | "
        f"{'before':>11} {'share':>5} | {'ref':>5} {'open@':>5}"
    )
    print(head + "\n" + "-" * len(head))

    def cp(m: dict) -> str:
        p = m["precision"]
        return f"{m['coverage']:.2f} {'  -  ' if p is None else f'{p:.3f}'}"

    for qid, r in results.items():
        e = r["earned"]
        share, opens = e["share_of_hindsight"], e["labels_to_open"]
        print(
            f"{qid:24} {r['n']:>4} {r['accuracy']:>5.2f} | {r['hindsight']['coverage']:>5.2f} | "
            f"{cp(r['fixed']):>11} | {cp(r['calibrated']):>11} | {cp(e):>11} "
            f"{e['streams_below_target']:>5.2f} {'-' if share is None else f'{share:.2f}':>5} "
            f"{_f(e['share_at_realized_precision']):>5} "
            f"{'-' if opens is None else f'{opens:.0f}':>5} | {cp(r['before']):>11} "
            f"{_share(r['before']):>5} | {_share(r['reference']):>5} "
            f"{'-' if r['reference']['labels_to_open'] is None else r['reference']['labels_to_open']:>5}"
        )
    overall = {}
    for m in ("fixed", "calibrated", "earned", "before"):
        overall[m] = {
            "coverage": round(float(np.mean([r[m]["coverage"] for r in results.values()])), 3),
            "streams_below_target": round(
                float(np.mean([r[m]["streams_below_target"] for r in results.values()])), 3
            ),
            "questions_below_target": sum(
                (r[m]["precision"] or 1.0) < TARGET for r in results.values()
            ),
        }
    for m in ("earned", "before"):
        at_real = [r[m]["share_at_realized_precision"] for r in results.values()]
        at_real = [x for x in at_real if x is not None]
        overall[m]["share_at_realized_precision"] = round(float(np.mean(at_real)), 3)
    overall["reference"] = {
        "coverage": round(float(np.mean([r["reference"]["coverage"] for r in results.values()])), 3)
    }
    overall["hindsight"] = {
        "coverage": round(float(np.mean([r["hindsight"]["coverage"] for r in results.values()])), 3)
    }
    print("\nmean over questions:", json.dumps(overall))
    b, a = overall["before"]["coverage"], overall["earned"]["coverage"]
    print(f"earned coverage, after/before: {a / b if b else float('nan'):.2f}x ({b} -> {a})")
    args.out.mkdir(parents=True, exist_ok=True)
    out = {
        "target_precision": TARGET,
        "level": LEVEL,
        "fixed_take_at": FIXED,
        "audit_rate": RATE,
        "streams_per_question": STREAMS,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "before": "the previous release on the same streams: a look that has shown "
        "nothing walks from the top only (second_walk_from=None)",
        "earned": repr(earned)
        + f" min_evidence={earned.min_evidence} step={earned.step} max_take_at={earned.max_take_at}",
        "overall": overall,
        "per_question": results,
    }
    (args.out / "earned_trust.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out / 'earned_trust.json'}")


if __name__ == "__main__":
    main()
