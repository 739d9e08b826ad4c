"""How often learning puts a wrong threshold in force, by how the error is spent across
versions: the type-I simulation of ``tests/test_learn_simulation.py`` at more seeds.

Versions that learn nothing (each one's read of the stream a fresh draw of the same
scenario: right about 89 % of the time, confidence barely separating), streams of
1,000 decisions, ``Earned(precision=0.9, level=0.95)``, audits at 0.2, through the
ladder simulation (``tests/_learn_streams.run_ladder``: the library's trust states,
ladder and anytime-valid test on reads drawn in advance). Printed per variant,
per seed and pooled: the share of streams in which any threshold in force, of any
version, had a true take band below the target ("in force"); the FDR across versions
(the mean over streams of the share of the versions that earned a threshold whose
threshold was below the target, ``test_learn_simulation._fdr``); and the worst version's
share of streams with a wrong threshold (the level per threshold). The library
guarantees the last two at ``1 - level``. Variants:

* ``shipped``: the library's rule (shares: the written question 0.8 of the error, the
  versions 0.2 together; e-LOND across versions, ``ladder.elond_alpha``);
* ``apart``: the written question at the whole error, the versions together at another
  (the study option ``--versions-apart`` of ``learning_path.py``);
* ``none``: every version at the whole error (``--no-correction``).

    python benchmarks/learning_type1.py [--seeds 11 21 31 41] [--streams 150]

About half a minute per seed and variant on 2 shared cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import learning_path as lp  # noqa: E402
import test_learn_simulation as sim  # noqa: E402

from agentbranch.policy.earned.learn import ladder  # noqa: E402

SHIPPED = ladder.version_share
VARIANTS = {"shipped": SHIPPED, "apart": lp.STUDY_SHARES["apart"], "none": lp.STUDY_SHARES["none"]}


def wrong_share(variant: str, seed: int, streams: int) -> tuple[float, float, float]:
    """Of ``streams`` seeded ``seed``: the share with a wrong threshold in force, the FDR
    across versions and the worst version's share with a wrong threshold (the
    simulation's stream count, its cached runs and the library's split are put back
    after: a test run in the same process sees them as they were)."""
    saved = sim.STREAMS
    lp.spend_error(VARIANTS[variant])
    try:
        sim.STREAMS = streams
        sim._runs.cache_clear()
        runs = sim._runs("ninety", "ninety", seed)
        null = lambda v: "ninety"  # noqa: E731
        return sim._ever_below(runs, null), sim._fdr(runs, null), sim._worst_version(runs, null)
    finally:
        sim.STREAMS = saved
        sim._runs.cache_clear()
        lp.spend_error(SHIPPED)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[11, 21, 31, 41])
    parser.add_argument("--streams", type=int, default=150, help="streams per seed")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=HERE / "results" / "learning_type1.txt")
    args = parser.parse_args()
    if args.streams < 1:
        parser.error(f"--streams must be at least 1, got {args.streams}")
    lines = [
        f"versions that learn nothing, {sim.LENGTH}-decision streams, "
        f"Earned(precision={sim.PRECISION}, level={sim.LEVEL}), audits at {sim.RATE}, "
        f"{args.streams} streams per seed: share of streams with a wrong threshold in force "
        "/ FDR across versions / worst version's share (the last two at most 1 - level)",
        "",
    ]
    print(lines[0], flush=True)
    for variant in args.variants:
        got = [wrong_share(variant, seed, args.streams) for seed in args.seeds]
        pooled = [sum(g[k] for g in got) / len(got) for k in range(3)]
        per_seed = ", ".join(
            f"{seed}: {' / '.join(f'{x:.4f}' for x in g)}" for seed, g in zip(args.seeds, got)
        )
        line = f"{variant:8} pooled {' / '.join(f'{p:.4f}' for p in pooled)}  per seed {per_seed}"
        print(line, flush=True)
        lines.append(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
