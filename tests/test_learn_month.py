"""A month of labels in small: ``benchmarks/learning_month.py``'s stream (a ``Resolver``
with ``Earned(learn=True)`` on a JSON Lines store, a ``Generate`` teacher, audits) run
for 5,000 decisions. What each fit reads never exceeds the bound per option, however
many labels the store holds, and the learner keeps no other copy of the labelled
states (no timing is asserted)."""

from __future__ import annotations

import json
from collections import Counter

import learning_month as lm  # benchmarks/ (on the path: pyproject's pythonpath)

from agentbranch.policy import Earned
from agentbranch.policy.earned import QuestionKey

#: A bound small enough to bite within 5,000 decisions (the library's is larger).
BOUND = 32


def test_what_a_fit_reads_stays_bounded_however_many_labels(tmp_path):
    fits: list[tuple[int, Counter]] = []
    store = tmp_path / "evidence.jsonl"
    rows, resolver = lm.run(
        5_000,
        store,
        block=1_000,
        background=False,
        on_fit=lambda j, labelled: fits.append((j, Counter(y for _, _, y in labelled))),
        out=lambda line: None,
        per_option=BOUND,
    )
    labels = rows[-1]["labels"]
    assert labels > 4 * BOUND * len(lm.TOPICS)  # the bound had to bite
    # (versions 3 and 4 each read a full sample of the far more labels before them)
    assert [j for j, _ in fits] == list(range(1, len(fits) + 1)) and len(fits) >= 4
    assert all(max(per.values()) <= BOUND for _, per in fits)
    assert sum(fits[-1][1].values()) == BOUND * len(lm.TOPICS)  # a full sample
    assert all(row["fit_sample"] <= BOUND * len(lm.TOPICS) for row in rows)
    # every record carries its decision's identity, and each decision is one label
    lines = [json.loads(x) for x in store.read_text().splitlines()]
    assert all(x.get("decision") for x in lines)
    labelled = [x["decision"] for x in lines if "state" in x]
    assert len(labelled) == len(set(labelled))
    assert labels <= len(labelled)  # (the newest wait settle_s before they count)

    # A restart rebuilds the same versions from the store: the same samples, the same
    # heads, the same evidence keys.
    earned = resolver.policy.earned
    again = Earned(precision=0.9, level=0.95, store=str(store), learn=True)
    again.learner.fit_per_option = BOUND
    again.learner.bind(resolver.engine)
    again.learner.asked(QuestionKey("team", lm.QUESTION, "scripted", "scripted"))
    assert again.learner.wait(timeout=300)  # (rebuilt on learning's own thread)
    keys = [
        [e.key(QuestionKey("team", r.model, "scripted", "scripted")) for r in q.ladder.rungs]
        for e in (earned, again)
        for q in e.learner._questions.values()
    ]
    # (the restart also counts the newest labels, which the live learner was still
    # letting settle: it may fit one version more)
    assert len(keys[0]) >= 5 and keys[1][: len(keys[0])] == keys[0]
