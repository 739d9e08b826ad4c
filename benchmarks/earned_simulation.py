"""How fast an earned threshold learns, on the synthetic streams of the simulation tests.

For each scenario of ``tests/_earned_streams.py`` (calibrated, over-confident, ~90 %
right with sharp or with weak confidence, anti-correlated) and stream length, ``STREAMS`` seeded streams run through
``Earned(precision=0.9, level=0.95)`` exactly as in tests/test_earned_simulation.py
(fallback-band decisions labelled, taken ones audited at ``RATE``). Printed and written
to ``benchmarks/results/earned_simulation.json``:

* coverage (share of the stream taken), and in the stream's last quarter;
* coverage as a share of the hindsight-best fixed threshold's at precision 0.9 (the
  lowest threshold whose decisions over the whole stream are 90 % right);
* labels before the band first opened (median, and the share of streams that opened);
* the share of streams whose taken decisions ended below 0.9.

    HF_HUB_OFFLINE=1 python benchmarks/earned_simulation.py   # about a minute
"""

from __future__ import annotations

import json
import sys
import time
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
    ("calibrated", 1000),
    ("calibrated", 4000),
    ("calibrated", 16000),
    ("overconfident", 4000),
    ("anticorrelated", 2000),
]


def case(earned: Earned, scenario: str, length: int, seed: int) -> dict:
    s = es.streams(scenario, STREAMS, length, seed=seed)
    runs = es.run_many(earned, s, RATE)
    cov = np.array([r.taken.mean() for r in runs])
    late = np.array([r.taken[3 * length // 4 :].mean() for r in runs])
    hind = np.array(
        [es.hindsight_best(s.confidence[k], s.right[k], TARGET)[1] for k in range(STREAMS)]
    )
    prec = [s.right[k][r.taken].mean() for k, r in enumerate(runs) if r.taken.any()]
    opened = [r.labels_to_open for r in runs if r.labels_to_open is not None]
    return {
        "scenario": scenario,
        "length": length,
        "coverage": round(float(cov.mean()), 3),
        "coverage_last_quarter": round(float(late.mean()), 3),
        "hindsight_coverage": round(float(hind.mean()), 3),
        "share_of_hindsight": round(float(cov.mean() / hind.mean()), 3) if hind.mean() else None,
        "share_of_hindsight_last_quarter": round(float(late.mean() / hind.mean()), 3)
        if hind.mean()
        else None,
        "opened": round(len(opened) / STREAMS, 3),
        "labels_to_open_median": float(np.median(opened)) if opened else None,
        "labels_to_open_p90": float(np.percentile(opened, 90)) if opened else None,
        "streams_below_target": round(sum(p < TARGET for p in prec) / STREAMS, 3),
        "labels": round(float(np.mean([r.labels for r in runs])), 1),
    }


def main() -> None:
    earned = Earned(precision=TARGET, level=LEVEL)
    out = []
    start = time.perf_counter()
    head = f"{'scenario':15} {'length':>6} {'cov':>5} {'late':>5} {'hind':>5} {'share':>5} {'late/h':>6} {'opened':>6} {'labels→open':>11} {'<0.9':>5}"
    print(head)
    for i, (scenario, length) in enumerate(CASES):
        r = case(earned, scenario, length, seed=100 + i)
        out.append(r)
        share = r["share_of_hindsight"]
        late = r["share_of_hindsight_last_quarter"]
        lto = r["labels_to_open_median"]
        print(
            f"{scenario:15} {length:>6} {r['coverage']:>5.2f} {r['coverage_last_quarter']:>5.2f} "
            f"{r['hindsight_coverage']:>5.2f} {'-' if share is None else f'{share:.2f}':>5} "
            f"{'-' if late is None else f'{late:.2f}':>6} {r['opened']:>6.2f} "
            f"{'-' if lto is None else f'{lto:.0f}':>11} {r['streams_below_target']:>5.3f}"
        )
    print(f"({STREAMS} streams per row, audit rate {RATE}; {time.perf_counter() - start:.0f}s)")
    path = HERE / "results" / "earned_simulation.json"
    path.write_text(
        json.dumps(
            {
                "earned": repr(earned),
                "min_evidence": earned.min_evidence,
                "step": earned.step,
                "audit_rate": RATE,
                "streams": STREAMS,
                "cases": out,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
