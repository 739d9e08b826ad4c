"""Earned(learn=True) end to end on the embedded reader: labels become a new version of
the read, tested on later labels only, adopted once it has earned its own threshold,
kept with the evidence (redacted) and rebuilt from the store after a restart."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest
from _learn_fixtures import QUESTION, Teacher, learning_resolver, stream

import agentbranch as ab
from agentbranch.core.heads import LinearHead, with_head
from agentbranch.core.questions import as_compiled, to_spec
from agentbranch.policy import Earned, Generate, Policy, Resolver
from agentbranch.policy.earned import QuestionKey
from agentbranch.policy.earned.learn import examples as lx
from agentbranch.policy.earned.learn import ladder as ld


@pytest.fixture(scope="module")
def engine() -> ab.DecisionEngine:
    from agentbranch.engine.readers.embedded import EmbeddedReader

    return ab.DecisionEngine(EmbeddedReader())


def test_labels_make_a_version_that_is_tested_then_decides(engine, tmp_path):
    path = tmp_path / "evidence.jsonl"
    items = stream(140)
    truth = dict(items)
    redact = lambda s: s.replace("note", "[n]")  # noqa: E731
    earned = Earned(
        precision=0.8, min_evidence=10, refresh_s=0, store=path, learn=True, redact=redact
    )
    r = learning_resolver(engine, earned, truth)
    records = [r.resolve(text)["sport"] for text, _ in items]

    lines = [json.loads(x) for x in path.read_text().splitlines()]
    deciding = [x for x in lines if "state" in x]
    # Every label the deciding version got is kept with its (redacted) state.
    assert deciding and all("[n]" in x["state"] and "note" not in x["state"] for x in deciding)
    v1_fit = ld.refit_at(1)
    ladder = next(iter(earned.learner._questions.values())).ladder
    assert len(ladder.rungs) >= 2 and ladder.rungs[1].fitted_on == v1_fit
    v1 = ladder.rungs[1]
    # On the embedded reader the learned version is the written question read by a
    # logistic head fitted on the embeddings of its 32 labelled states.
    head = as_compiled(v1.model).head
    assert head is not None and set(head.classes) == {"yes", "no"}
    assert not v1.model.examples  # the head reads; no learned examples
    _check_head_version(engine, v1.model, head, items)
    v1_key = earned.key(QuestionKey("sport", v1.model, "embedded", engine.reader.model))
    # Its key is not the written question's, nor that of the version with the same
    # labels as examples: the head's digest is part of the version's identity.
    examples_version = lx.with_learned(
        QUESTION, {"yes": ["The striker scored"], "no": ["Simmer the onions"]}
    )
    model = engine.reader.model
    others = {
        earned.key(QuestionKey("sport", m, "embedded", model)) for m in (QUESTION, examples_version)
    }
    assert v1_key not in others
    assert json.loads(json.dumps(v1.model.model_dump(mode="json")))["learned_head"] == head.digest
    trials = [x for x in lines if x["key"] == v1_key and "state" not in x]
    # Version 1 was tested on labels after its fit only: its first record (a trial read,
    # or its own decision as the newest version while nothing is open) comes after the
    # 32nd labelled state, and trial records decide nothing.
    first = lines.index(next(x for x in lines if x["key"] == v1_key))
    assert sum("state" in x for x in lines[:first]) >= v1_fit
    assert all(x["take_at"] is None and x["trust"] == "learning" for x in trials)
    # It was adopted once it had earned a threshold of its own: decisions say so.
    versions = [rec.get("reader_version") for rec in records]
    assert versions[0] == 0 and max(versions) >= 1
    adopted = versions.index(max(versions))
    assert all(v == 0 for v in versions[:v1_fit])
    assert records[adopted]["trust"] in ("earned", "learning")

    # A restart rebuilds the same versions from the store (on learning's own thread: the
    # question as written decides until it is done) and the same one is in force.
    again = Earned(
        precision=0.8, min_evidence=10, refresh_s=0, store=path, learn=True, redact=redact
    )
    again.learner.bind(engine)
    key = QuestionKey("sport", QUESTION, "embedded", engine.reader.model)
    again.learner.asked(key)
    assert again.learner.wait(timeout=120)
    q, j = again.learner.asked(key)
    assert j == ladder.deciding.index and again.learner._questions  # the same one reads
    rebuilt = next(iter(again.learner._questions.values())).ladder
    assert (rebuilt.in_force, rebuilt.open) == (ladder.in_force, ladder.open)
    assert again.key(QuestionKey("sport", q, "embedded", engine.reader.model)) == earned.key(
        QuestionKey("sport", ladder.deciding.model, "embedded", engine.reader.model)
    )


def _check_head_version(engine, version, head, items) -> None:
    """The version's embedded read is its head's: one product on the state embeddings,
    not the similarity read of the written question."""
    texts = [t for t, _ in items[-6:]]
    written = engine.decide_many(texts, {"sport": QUESTION})
    learned = engine.decide_many(texts, {"sport": version})
    x = engine.reader.embed(texts).numpy()
    if head.written:  # it reads the written question's option scores beside the embedding
        scores = engine.reader.written_scores(x, to_spec("sport", QUESTION))
        x = np.hstack([x, head.written * scores])
    expect = np.exp(head.log_probs(x, ["yes", "no"]))
    for w, d, p in zip(written, learned, expect):
        got = [d["sport"].probabilities[o] for o in ("yes", "no")]
        assert got == pytest.approx(p.tolist(), abs=1e-5)
        assert got != pytest.approx([w["sport"].probabilities[o] for o in ("yes", "no")])
    # Another head (other weights) is another version, with another key.
    other = LinearHead(head.options, head.classes, head.weights * 0.5, head.bias)
    assert with_head(QUESTION, other) != version
    assert Earned().key(
        QuestionKey("sport", with_head(QUESTION, other), "embedded", "m")
    ) != Earned().key(QuestionKey("sport", version, "embedded", "m"))


def test_without_learn_no_state_is_stored(engine, tmp_path):
    path = tmp_path / "evidence.jsonl"
    items = stream(5)
    earned = Earned(precision=0.8, min_evidence=10, refresh_s=0, store=path)
    policy = Policy(take_at=earned, fallbacks=[Generate(Teacher(truth=dict(items)))])
    r = Resolver(engine, {"sport": QUESTION}, policy)
    recs = [r.resolve(t)["sport"] for t, _ in items]
    assert all("reader_version" not in rec for rec in recs)
    assert all("state" not in json.loads(x) for x in path.read_text().splitlines())


def test_redact_must_be_a_function():
    with pytest.raises(ab.ConfigurationError, match="redact"):
        Earned(learn=True, redact="emails")


def test_the_head_reads_what_scikit_learn_fitted_and_survives_json():
    from sklearn.linear_model import LogisticRegression

    from agentbranch.core.heads import FLOOR
    from agentbranch.policy.earned.learn.head import C, fit_head

    rng = np.random.default_rng(0)
    options = ["a", "b", "c", "d"]
    x = rng.normal(size=(60, 8))
    y = (x[:, 0] > 0).astype(int) + 2 * (x[:, 1] > 0.5)  # options a..d, "d" rarely
    x, y = x[y < 3], y[y < 3]  # "d" never labelled
    head = fit_head(options, x, [options[k] for k in y], calibrate=False)
    ref = LogisticRegression(C=C, max_iter=2000).fit(x, y).predict_proba(x)
    want = np.full((len(x), 4), FLOOR)
    want[:, :3] = ref
    want /= want.sum(1, keepdims=True)
    assert np.exp(head.log_probs(x, options)) == pytest.approx(want, abs=1e-12)
    # a yes/no head: one logit in scikit-learn, two rows here
    yn = fit_head(["yes", "no"], x, ["yes" if k == 0 else "no" for k in y], calibrate=False)
    ref = LogisticRegression(C=C, max_iter=2000).fit(x, (y != 0).astype(int)).predict_proba(x)
    assert np.exp(yn.log_probs(x, ["yes", "no"])) == pytest.approx(ref, abs=1e-12)
    # the shipped head: the same weights, the logits divided by its out-of-fold
    # temperature plus a shift per option (carried in the biases, centred)
    mapped = fit_head(["yes", "no"], x, ["yes" if k == 0 else "no" for k in y])
    assert (mapped.weights == yn.weights).all() and mapped.temperature != 1.0
    shift = (mapped.bias - yn.bias) / mapped.temperature
    assert shift.sum() == pytest.approx(0.0, abs=1e-12) and (shift != 0).any()
    z = x @ yn.weights.T + yn.bias
    want = np.exp(z / mapped.temperature + shift)
    want /= want.sum(1, keepdims=True)
    assert np.exp(mapped.log_probs(x, list(mapped.classes))) == pytest.approx(want, abs=1e-12)
    # serialisable, same digest; a permuted or partial question is read over its options
    back = LinearHead.from_dict(json.loads(json.dumps(head.to_dict())))
    assert back == head and back.digest == head.digest and hash(back) == hash(head)
    sub = np.exp(head.log_probs(x[:3], ["c", "a"]))
    full = np.exp(head.log_probs(x[:3], options))
    assert sub == pytest.approx(full[:, [2, 0]] / full[:, [2, 0]].sum(1, keepdims=True))
    assert not head.reads(["a", "z"])
    # nothing to tell apart: no head (the learner then uses learned examples)
    assert fit_head(options, x[:5], ["a"] * 5) is None
    with pytest.raises(ValueError, match="finite"):
        LinearHead(["a", "b"], ["a", "b"], [[np.nan], [0.0]], [0.0, 0.0])


def test_a_restart_decides_at_once_and_refits_off_the_calling_thread(engine, tmp_path, monkeypatch):
    """Issue 61: a restart refitted every version on the calling thread before the first
    decision (a minute on a few hundred labels). The question as written decides until
    the rebuild, on learning's own thread, is done; then the same versions are back."""
    from agentbranch.policy.earned.learn import loop

    path = tmp_path / "evidence.jsonl"
    items = stream(60)
    earned = Earned(precision=0.8, min_evidence=10, refresh_s=0, store=path, learn=True)
    r = learning_resolver(engine, earned, dict(items))
    for text, _ in items:
        r.resolve(text)
    ladder = next(iter(earned.learner._questions.values())).ladder
    assert len(ladder.rungs) >= 2

    gate, fitted_on = threading.Event(), []
    real = loop.fit_head

    def held_fit(*args: Any, **kw: Any) -> Any:
        fitted_on.append(threading.current_thread().name)
        assert gate.wait(60)
        return real(*args, **kw)

    monkeypatch.setattr(loop, "fit_head", held_fit)
    again = Earned(precision=0.8, min_evidence=10, refresh_s=0, store=path, learn=True)
    again.learner.bind(engine)
    key = QuestionKey("sport", QUESTION, "embedded", engine.reader.model)
    q, j = again.learner.asked(key)  # returns while the rebuild's first fit is held
    assert j == 0 and q == QUESTION  # the question as written decides meanwhile
    assert not again.learner.wait(timeout=0.2)  # the rebuild is still going
    gate.set()
    assert again.learner.wait(timeout=120)
    assert fitted_on and set(fitted_on) == {"agentbranch-learn"}  # never the caller's
    rebuilt = next(iter(again.learner._questions.values())).ladder
    assert [r.fitted_on for r in rebuilt.rungs] == [r.fitted_on for r in ladder.rungs]
    assert again.learner.asked(key)[1] == ladder.deciding.index


def test_a_process_that_exits_while_learning_works_exits_cleanly(tmp_path):
    """Learning's thread finishes its task in flight at exit (a daemon thread stopped in
    a native forward aborts the process: "terminate called without an active
    exception") and drops what is queued; the process exits 0. A restart on a store of
    labelled decisions rebuilds its versions on that thread (embedding every labelled
    state) while the first decision is served; the process exits right after it."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    code = textwrap.dedent(
        f"""
        import json, sys
        from langchain_core.runnables import RunnableLambda
        import agentbranch as ab
        from agentbranch.demo.loop import LOOP_QUESTIONS
        from agentbranch.demo.stream import ticket_stream
        from agentbranch.policy import Earned, Generate, Policy, Resolver

        tickets = ticket_stream(200)
        truth = {{t["ticket"]: t["urgent"] for t in tickets}}

        def teacher(messages):
            text = messages[-1].content
            return json.dumps({{"label": next(v for k, v in truth.items() if k in text)}})

        earned = Earned(precision=0.9, store={str(tmp_path / "e.jsonl")!r}, learn=True)
        policy = Policy(take_at=earned, fallbacks=[Generate(RunnableLambda(teacher))])
        resolver = Resolver(
            ab.DecisionEngine.from_env(), {{"urgent": LOOP_QUESTIONS["urgent"]}}, policy
        )
        serve = tickets if sys.argv[1] == "fill" else tickets[:1]
        for t in serve:
            resolver.resolve(t["ticket"])
        if sys.argv[1] == "fill":
            earned.learner.wait()
        print("served")  # a restart exits at once: its rebuild is still running
        """
    )
    src = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    for step in ("fill", "restart", "restart"):
        done = subprocess.run(
            [sys.executable, "-c", code, step],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert done.returncode == 0, (step, done.stderr[-2000:])
        assert "served" in done.stdout and "terminate called" not in done.stderr, step
