"""How fast an earned threshold learns, on the synthetic streams of the simulation tests:
the previous method and the current one on the same streams, in one run.

For each scenario of ``tests/_earned_streams.py`` (calibrated, over-confident, ~90 %
right with sharp or with weak confidence, anti-correlated) and stream length, ``STREAMS``
seeded streams run through ``Earned(precision=0.9, level=0.95)`` exactly as in
tests/test_earned_simulation.py (fallback-band decisions labelled, taken ones audited at
``RATE``), once per variant:

* ``before``: the previous release — a look that has shown nothing yet walks the
  candidates from the top only (``second_walk_from=None``);
* ``after``: the current defaults — from the third look on, such a look also walks from
  the band the confidences predict is easiest to show, each walk at half the look's
  error (``thresholds.predicted_entry``).

Printed and written to ``benchmarks/results/earned_simulation.json``, per variant:

* coverage (share of the stream taken), and as a share of what the hindsight-best fixed
  threshold took **at the target** (the lowest threshold whose decisions over the whole
  stream are 90 % right) and **at the realized precision** (the lowest threshold whose
  decisions are right as often as the variant's taken ones were: the part of the gap
  that is slowness, not the safety margin);
* labels before the band first opened (median; share of streams opened, and opened
  within 100 labels);
* the share of streams whose taken decisions ended below 0.9.

And per case, a **single-test reference**, the yardstick for the aims: after ``i``
decisions, every one labelled, the lowest threshold whose band a single exact binomial
test at 0.05 would show on the expected counts (the true band precisions, no looks and
no choice among thresholds to pay for); its mean coverage as a share of hindsight's, and
the labels it needs before it shows any band. A method at level 0.95 that looks more than
once and chooses its threshold from the data can hardly do better on average; an aim
above the reference is out of reach on that stream length.

    HF_HUB_OFFLINE=1 python benchmarks/earned_simulation.py   # ten minutes or so
"""

from __future__ import annotations

import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests"))

import _earned_streams as es  # noqa: E402

from agentbranch.policy.earned import Earned  # noqa: E402

TARGET, LEVEL, RATE, STREAMS = 0.9, 0.95, 0.05, 200
CASES = [
    ("sharp", 1000),
    ("ninety", 1000),
    ("ninety", 4000),
    ("ninety", 16000),
    ("calibrated", 1000),
    ("calibrated", 4000),
    ("calibrated", 16000),
    ("sharp", 4000),
    ("overconfident", 4000),
    ("anticorrelated", 2000),
]


def variants() -> dict[str, Earned]:
    before = Earned(precision=TARGET, level=LEVEL)
    before.second_walk_from = None
    return {"before": before, "after": Earned(precision=TARGET, level=LEVEL)}


def reference(scenario: str, length: int, hindsight: float) -> tuple[float, int | None]:
    """The single-test reference: its coverage over ``hindsight``'s, and the labels it
    needs to open (``_earned_streams.single_test_reference`` on the true band curve)."""
    sc = es.SCENARIOS[scenario]
    conf = np.round(np.random.default_rng(7).beta(sc.alpha, sc.beta, 200_000), 4)
    ts = np.round(np.arange(1.0, -0.001, -0.01), 2)
    cov, prec = es.band_curve(conf, sc.p_right(conf), ts)
    mean, first = es.single_test_reference(cov, prec, length, TARGET, LEVEL)
    return (mean / hindsight if hindsight else 0.0), first


def measure(runs: list[es.Run], s: es.Streams, length: int, hind: np.ndarray) -> dict:
    cov = np.array([r.taken.mean() for r in runs])
    late = np.array([r.taken[3 * length // 4 :].mean() for r in runs])
    realized = [s.right[k][r.taken].mean() if r.taken.any() else None for k, r in enumerate(runs)]
    at_realized = np.array(
        [
            es.hindsight_best(s.confidence[k], s.right[k], max(TARGET, p or TARGET))[1]
            for k, p in enumerate(realized)
        ]
    )
    opened = [r.labels_to_open for r in runs if r.labels_to_open is not None]
    h = float(hind.mean())
    return {
        "coverage": round(float(cov.mean()), 3),
        "coverage_last_quarter": round(float(late.mean()), 3),
        "share_of_hindsight": round(float(cov.mean()) / h, 3) if h else None,
        "share_of_hindsight_last_quarter": round(float(late.mean()) / h, 3) if h else None,
        "share_at_realized_precision": round(float(cov.mean() / at_realized.mean()), 3)
        if at_realized.mean()
        else None,
        "opened": round(len(opened) / len(runs), 3),
        "opened_within_100_labels": round(sum(x <= 100 for x in opened) / len(runs), 3),
        "labels_to_open_median": float(np.median(opened)) if opened else None,
        "labels_to_open_p90": float(np.percentile(opened, 90)) if opened else None,
        "streams_below_target": round(
            sum(p is not None and p < TARGET for p in realized) / len(runs), 3
        ),
        "labels": round(float(np.mean([r.labels for r in runs])), 1),
    }


def case(vs: dict[str, Earned], scenario: str, length: int, seed: int) -> dict:
    s = es.streams(scenario, STREAMS, length, seed=seed)
    hind = np.array(
        [es.hindsight_best(s.confidence[k], s.right[k], TARGET)[1] for k in range(STREAMS)]
    )
    out = {"scenario": scenario, "length": length, "hindsight_coverage": round(hind.mean(), 3)}
    share, first = reference(scenario, length, float(hind.mean()))
    out["reference_share"], out["reference_labels_to_open"] = round(share, 3), first
    for name, earned in vs.items():
        out[name] = measure(es.run_many(earned, s, RATE), s, length, hind)
    return out


def _f(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def main() -> None:
    vs = variants()
    out = []
    start = time.perf_counter()
    print(
        f"{'scenario':14} {'length':>6} {'variant':7} {'cov':>5} {'share':>5} {'late':>5} "
        f"{'@real':>5} {'ref':>5} {'opened':>6} {'≤100':>5} {'open@':>6} {'<0.9':>5}"
    )
    for i, (scenario, length) in enumerate(CASES):
        r = case(vs, scenario, length, seed=100 + i)
        out.append(r)
        for name in vs:
            m = r[name]
            print(
                f"{scenario:14} {length:>6} {name:7} {m['coverage']:>5.2f} "
                f"{_f(m['share_of_hindsight']):>5} {_f(m['share_of_hindsight_last_quarter']):>5} "
                f"{_f(m['share_at_realized_precision']):>5} {r['reference_share']:>5.2f} "
                f"{m['opened']:>6.2f} {m['opened_within_100_labels']:>5.2f} "
                f"{_f(m['labels_to_open_median'], '.0f'):>6} {m['streams_below_target']:>5.3f}"
            )
        b, a = r["before"], r["after"]
        if b["share_of_hindsight"]:
            print(f"{'':22} after/before coverage: {a['coverage'] / max(b['coverage'], 1e-9):.2f}x")
    took = time.perf_counter() - start
    print(f"({STREAMS} streams per row, audit rate {RATE}; {took:.0f}s)")
    path = HERE / "results" / "earned_simulation.json"
    info = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}",
        "precision": TARGET,
        "level": LEVEL,
        "audit_rate": RATE,
        "streams": STREAMS,
        "variants": {
            "before": "a look that has shown nothing walks from the top only "
            "(second_walk_from=None; the previous release)",
            "after": "the defaults: from the third look, also a walk from the predicted "
            "entry, each at half the look's error",
        },
        "cases": out,
    }
    path.write_text(json.dumps(info, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
