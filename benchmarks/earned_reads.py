"""Per-question reads of the public sets for ``earned_trust.py``: confidence and
correctness of every decision the embedded reader makes on a set's held-out part (the
live stream), plus a labelled sample of its fit part (what a user would hand-label to
calibrate before deploying).

The questions are ``embedded_calibration.py``'s (one draw of examples), so the figures
line up with that benchmark's. The reads are cached as JSON (``--reads``): reading takes a
few minutes, replaying the streams seconds.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import embedded_calibration as ec  # noqa: E402
import public_sets as ps  # noqa: E402

from agentbranch.core.decisions import confidence_from  # noqa: E402
from agentbranch.engine.readers import embedded as emb  # noqa: E402

SETS = {**ec.FIT_SETS, "snips": ps.snips}
#: Fit-part items read per set: the labelled sample calibrate-then-fixed is fitted on.
FIT_SAMPLE = 150


def _probs(logprobs: tuple[float, ...]) -> list[float]:
    top = max(logprobs)
    e = [math.exp(x - top) for x in logprobs]
    s = sum(e)
    return [x / s for x in e]


def _rows(reads: list[ec.Read]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in reads:
        q = out.setdefault(
            r.task.id,
            {"type": r.spec.type, "kind": r.task.kind, "probs": [], "label": []},
        )
        q["probs"].append([round(p, 6) for p in _probs(r.logprobs)])
        q["label"].append(r.label_index)
    return out


def read_sets(seed: int = 0) -> dict:
    """``{question_id: {"type", "kind", "stream": {...}, "fit": {...}}}`` where each part
    has ``probs`` (the decision's label distribution) and ``label`` (the true option)."""
    reader = emb.EmbeddedReader().load()
    rng = random.Random(seed)
    questions: dict[str, dict] = {}
    start = time.perf_counter()
    for name, load in SETS.items():
        fit, held = load()
        tasks = ec.tasks_for(name, fit, seed=ec.DRAWS[0])
        sample = rng.sample(fit, min(FIT_SAMPLE, len(fit)))
        for part, items in (("stream", held), ("fit", sample)):
            for qid, rows in _rows(ec.read_all(reader, items, tasks)).items():
                q = questions.setdefault(qid, {"type": rows["type"], "kind": rows["kind"]})
                q[part] = {"probs": rows["probs"], "label": rows["label"]}
        print(
            f"read {name}: {len(held)} + {len(sample)} texts ({time.perf_counter() - start:.0f}s)"
        )
    return questions


def confidence_and_correct(part: dict) -> tuple[list[float], list[bool]]:
    """What the policy compares (``1 − H/ln K``) and whether the label is right."""
    conf = [confidence_from(p) for p in part["probs"]]
    correct = [
        max(range(len(p)), key=p.__getitem__) == y for p, y in zip(part["probs"], part["label"])
    ]
    return conf, correct


def load_or_read(path: Path | None) -> dict:
    if path is not None and path.is_file():
        return json.loads(path.read_text())
    questions = read_sets()
    if path is not None:
        path.write_text(json.dumps(questions))
    return questions
