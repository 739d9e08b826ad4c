"""Decisions per second on the embedded reader with 0, 100 and 1,000 labels learned per
question (``Earned(learn=True)``'s versions on the embedded reader: the question read
by a logistic head fitted on its labelled states' embeddings and the written question's
option scores, as the learner fits it; ``--examples``: the
question with its labelled states as examples instead, at most
``agentbranch.policy.earned.learn.examples.PER_OPTION`` per option, spread over the embedder's
space as the learner selects them for canvas readers).

The variants are timed alternately in one process, on the same
states, and the ratio to the unlearned read is printed.

    HF_HUB_OFFLINE=1 python benchmarks/bench_learning_speed.py [--rounds 5] [--batch 16]
"""

from __future__ import annotations

import argparse
import random
import time

import agentbranch as ab
from agentbranch.core.heads import with_head
from agentbranch.engine.readers.embedded import EmbeddedReader
from agentbranch.policy.earned.learn import examples as lx
from agentbranch.policy.earned.learn.head import fit_head, head_inputs

TOPICS = {
    "billing": ["invoice", "refund", "charge", "payment", "subscription", "price"],
    "outage": ["down", "error 502", "timeout", "cannot log in", "crash", "slow pages"],
    "feature": ["dark mode", "export to csv", "an api", "more filters", "a mobile app", "sso"],
}


def text(rng: random.Random, option: str, i: int) -> str:
    word = rng.choice(TOPICS[option])
    return f"Ticket {i}: the customer writes about {word} and asks what to do next ({rng.random():.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--labels", type=int, nargs="+", default=[0, 100, 1000])
    parser.add_argument("--examples", action="store_true", help="learned examples, not heads")
    args = parser.parse_args()
    rng = random.Random(0)
    reader = EmbeddedReader().load()
    engine = ab.DecisionEngine(reader)
    options = list(TOPICS)
    base = ab.choice("Which team should handle this ticket?", options)
    variants = {}
    for n in args.labels:
        labels = [rng.choice(options) for _ in range(n)]
        texts = [text(rng, y, i) for i, y in enumerate(labels)]
        vectors = reader.embed(texts).numpy() if texts else None
        head = None
        if texts and not args.examples:  # what the learner fits
            x, weight = head_inputs(engine, "team", base, vectors)
            head = fit_head(options, x, labels, written=weight)
        if head is not None:
            variants[n] = with_head(base, head)
            size = head.weights.nbytes + head.bias.nbytes
            print(f"{n:>5} labels: a head of {size / 1024:.1f} KiB")
        else:
            learned = lx.select(texts, labels, options, vectors=vectors)
            variants[n] = lx.with_learned(base, learned)
            size = sum(len(v) for v in learned.values())
            print(f"{n:>5} labels: {size} learned examples")
    states = [text(rng, rng.choice(options), 10_000 + i) for i in range(args.batch)]
    for q in variants.values():  # warm: embeddings of the examples, temperatures
        engine.decide_many(states[:2], {"team": q})
    spent = {n: 0.0 for n in variants}
    done = {n: 0 for n in variants}
    for _ in range(args.rounds):
        for n, q in variants.items():
            batch = [f"{s} [{done[n]}]" for s in states]  # new texts: no cached state
            start = time.perf_counter()
            for s in batch:
                engine.decide(s, {"team": q})
            spent[n] += time.perf_counter() - start
            done[n] += len(batch)
    first = args.labels[0]
    for n in variants:
        rate = done[n] / spent[n]
        print(
            f"{n:>5} labels: {rate:7.1f} decisions/s, time per decision "
            f"{spent[n] / done[n] * 1e3:.2f} ms, x{(spent[n] / done[n]) / (spent[first] / done[first]):.2f} "
            f"of {first} labels"
        )


if __name__ == "__main__":
    main()
