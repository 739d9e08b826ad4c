"""Earned(learn=True) on canvas readers: each state read by a learned version is shown
the labelled states most similar to it (``agentbranch.policy.earned.learn.nearest``), after the
hand-written examples, within the bounds, under a key that names the pool and the rule;
without the encoder, the most recent labelled states under another key."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from _learn_canvas import (
    COOKING,
    QUESTION,
    SPORT,
    WRITTEN,
    FakeEncoder,
    Teacher,
    canvas_reader,
    stream,
)

import agentbranch as ab
from agentbranch.core.examples import instructions_with_examples
from agentbranch.core.questions import as_compiled
from agentbranch.policy import Earned, Generate, Policy, Resolver
from agentbranch.policy.earned import QuestionKey
from agentbranch.policy.earned.learn import loop, nearest
from agentbranch.policy.earned.learn.ladder import refit_at


def _expected(pool_rows, encode, state, per_option, budget, chars=nearest.CHARS):
    """The rule, spelled out: by similarity (ties: earlier), within the bounds."""
    vecs = encode([t for _, t in pool_rows])
    s = encode([state])[0]
    sims = [round(float(v @ s), 6) for v in vecs]
    got, used = {}, 0
    for i in sorted(range(len(pool_rows)), key=lambda i: (-sims[i], i)):
        o, t = pool_rows[i]
        t = t[:chars]
        if len(got.get(o, [])) < per_option and used + len(t) <= budget:
            got.setdefault(o, []).append(t)
            used += len(t)
    return got


def test_a_pool_picks_each_state_its_nearest_labels_within_the_bounds():
    enc = FakeEncoder()
    examples = {"yes": SPORT, "no": COOKING}
    pool = nearest.Pool(examples, enc, per_option=2, budget=10_000)
    states = ["The goalkeeper saved a penalty in the final", "Roast the garlic with lemon"]
    picks = pool.pick(states)
    rows = [(o, t) for o, v in examples.items() for t in v]
    # caller order: one pick per state, in the order given
    assert picks == [_expected(rows, enc, s, 2, 10_000) for s in states]
    assert picks[0]["yes"][0] == SPORT[3]  # the goalkeeper's line is nearest the first
    assert picks[1]["no"][0] == COOKING[2]  # the roast chicken the second
    assert all(len(v) <= 2 for p in picks for v in p.values())
    # the budget bounds the characters of all lines of one read
    small = nearest.Pool(examples, enc, per_option=4, budget=120)
    for state, p in zip(states, small.pick(states)):
        assert 0 < sum(len(t) for v in p.values() for t in v) <= 120
        assert p == _expected(rows, enc, state, 4, 120)
    # ties go to the earlier label, whatever the order of the texts' vectors
    twin = nearest.Pool({"yes": ["same words", "same words too"], "no": ["same words"]}, enc)
    want = {"yes": ["same words", "same words too"], "no": ["same words"]}
    assert twin.pick(["same words"])[0] == want


def test_the_pool_s_key_names_its_labels_and_its_rule():
    enc = FakeEncoder()
    a = nearest.Pool({"yes": SPORT[:3], "no": COOKING[:3]}, enc)
    b = nearest.Pool({"yes": SPORT[:3], "no": COOKING[:3]}, FakeEncoder())
    assert a.wire() == b.wire()  # same labels and rule: same identity (not the encoder)
    assert nearest.Pool({"yes": SPORT[:4], "no": COOKING[:3]}, enc).digest != a.digest
    assert nearest.Pool({"yes": SPORT[:3], "no": COOKING[:3]}, enc, per_option=3).digest != a.digest
    earned = Earned()

    def key(pool):
        return earned.key(QuestionKey("sport", nearest.with_pool(QUESTION, pool), "s", "m"))

    assert key(a) == key(b)
    assert key(a) != key(nearest.Pool({"yes": SPORT[:3], "no": COOKING[:3]}, enc, budget=999))
    assert key(a) != earned.key(QuestionKey("sport", QUESTION, "s", "m"))


def _learning(tmp_path, encoder=None, **kw):
    earned = Earned(
        precision=0.8, min_evidence=10, refresh_s=0, store=tmp_path / "ev.jsonl", learn=True, **kw
    )
    earned.learner.background = False
    earned.learner.settle_s = 0  # one writer: no other replica's labels to wait for
    earned.learner.encoder = encoder
    return earned


def test_a_learned_canvas_version_shows_each_state_its_nearest_labels(tmp_path):
    enc = FakeEncoder()
    earned = _learning(tmp_path, enc)
    reader = canvas_reader()
    other = ab.yes_no("Is it polite?")  # not learning: read in the same request
    policy = {
        "sport": Policy(take_at=earned, fallbacks=[Generate(Teacher())]),
        "*": Policy(take_at=0.0),
    }
    engine = ab.DecisionEngine(reader, batching=False)
    r = Resolver(engine, {"sport": QUESTION, "polite": other}, policy)
    items = stream(90)
    records = [r.resolve(text) for text, _ in items]

    ladder = next(iter(earned.learner._questions.values())).ladder
    v1 = ladder.rungs[1].model
    pool = as_compiled(v1).pool
    assert pool is not None and ladder.rungs[1].fitted_on == refit_at(1)
    assert v1.examples == WRITTEN  # the written examples stay on the version
    wire = v1.model_dump(mode="json")["learned_pool"]
    assert wire == {"digest": pool.digest, **pool.rule} and wire["rule"] == "nearest"
    assert "learned_pool" not in QUESTION.model_dump(mode="json")
    # the version decides once it has earned its threshold, and takes
    versions = [rec["sport"].get("reader_version") for rec in records]
    assert versions[0] == 0 and 1 in versions
    first = versions.index(1)
    assert any(rec["sport"]["decided_by"] == "engine" for rec in records[first:])

    # Each read of the version in force: ONE request with both questions, the learned
    # question's examples the written ones first, then the nearest pool states.
    text = items[-1][0]
    request = reader.calls[-1][0]
    assert request.state == text and [q.id for q in request.questions] == ["sport", "polite"]
    spec = request.questions[0]
    want = pool.pick([text])[0]
    assert dict(zip(spec.options, spec.examples)) == {
        o: (*WRITTEN[o], *want.get(o, [])) for o in spec.options
    }
    rows = [(o, t) for o, v in pool.examples.items() for t in v]
    assert want == _expected(rows, enc, text, nearest.PER_OPTION, nearest.BUDGET)
    assert all(len(v) <= nearest.PER_OPTION for v in want.values())
    # the nearest: the pool states share the state's sentence (another note number)
    base = text.split(" (note")[0]
    assert all(base in t for t in want[items[-1][1]][:1])
    # how a canvas reader shows them: after the hand-written lines
    shown = instructions_with_examples(spec.instructions, spec.options, spec.examples)
    assert shown.index('"A football match report"') < shown.index(want["yes"][0].split(" (")[0])

    # A replica on the same store builds the same version (same pool, same key).
    again = _learning(tmp_path, FakeEncoder())
    again.learner.bind(r.engine)
    q, j = again.learner.asked(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    assert j == ladder.in_force
    assert again.key(QuestionKey("sport", q, "scripted", "canvas")) == earned.key(
        QuestionKey("sport", ladder.deciding.model, "scripted", "canvas")
    )


def test_the_encoder_loads_only_when_a_pool_version_is_read(tmp_path, monkeypatch):
    enc = FakeEncoder()
    monkeypatch.setattr(nearest, "encoder_available", lambda: True)
    monkeypatch.setattr(nearest, "default_encode", enc)
    earned = _learning(tmp_path)  # no encoder given: the default one
    learner = earned.learner
    learner.bind(ab.DecisionEngine(canvas_reader()))
    q = learner._question(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    labelled = [((f"{i:04d}", "x"), t, y) for i, (t, y) in enumerate(stream(32))]
    version = learner._version(q, 1, labelled).model
    assert as_compiled(version).pool is not None
    assert enc.calls == 0  # fitted: nothing embedded yet
    nearest.read_questions({"sport": version}, "The striker scored")
    assert enc.calls == 2  # the pool once, then the state
    nearest.read_questions({"sport": version}, "Knead the dough")
    assert enc.calls == 3


def test_without_the_encoder_a_version_shows_the_most_recent_and_says_so(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(nearest, "encoder_available", lambda: False)
    earned = _learning(tmp_path)
    learner = earned.learner
    learner.bind(ab.DecisionEngine(canvas_reader()))
    q = learner._question(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    labelled = [
        ((f"{i:04d}", "x"), f"{i} " + "long text " * 100, "yes" if i % 2 else "no")
        for i in range(32)
    ]
    with caplog.at_level(logging.INFO, logger="agentbranch"):
        recent = learner._version(q, 1, labelled).model
        learner._version(q, 1, labelled)
    said = [r for r in caplog.records if "most recent" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert as_compiled(recent).pool is None
    learned = {o: v[len(WRITTEN[o]) :] for o, v in recent.examples.items()}
    assert all(len(v) == loop.CANVAS_PER_OPTION for v in learned.values())
    assert all(len(t) <= loop.CANVAS_CHARS for v in learned.values() for t in v)
    assert [t.split()[0] for t in learned["yes"]] == ["25", "27", "29", "31"]
    # the same labels under the nearest rule are another version, with another key
    learner.encoder = FakeEncoder()
    near = learner._version(q, 1, labelled).model
    assert as_compiled(near).pool is not None
    assert earned.key(QuestionKey("sport", near, "s", "m")) != earned.key(
        QuestionKey("sport", recent, "s", "m")
    )


def test_a_pool_version_on_the_tiny_transformers_reader(tiny_model_dir):
    enc = FakeEncoder()
    reader = ab.TransformersReader.from_pretrained(tiny_model_dir)
    engine = ab.DecisionEngine(reader)
    pool = nearest.Pool({"yes": SPORT, "no": COOKING}, enc, per_option=2)
    version = nearest.with_pool(QUESTION, pool)
    states = ["The goalkeeper saved a penalty", "Roast the chicken with garlic"]
    reads = [nearest.read_questions({"sport": version}, s)["sport"] for s in states]
    # the canvas the model reads holds the hand-written lines, then each state's own picks
    from agentbranch.core.questions import to_spec

    specs = [to_spec("sport", q) for q in reads]
    shown = [instructions_with_examples(s.instructions, s.options, s.examples) for s in specs]
    assert SPORT[3].split(" in")[0] in shown[0] and SPORT[3].split(" in")[0] not in shown[1]
    assert shown[0].index("A football match report") < shown[0].index(SPORT[3][:20])
    decided = engine.decide_many(states, [{"sport": q} for q in reads])
    assert [sorted(d["sport"].probabilities) for d in decided] == [["no", "yes"]] * 2
    assert np.isfinite([d["sport"].confidence for d in decided]).all()
    # one batch for the two states (the reader's batch, as for any read)
    alone = [engine.decide(s, {"sport": q})["sport"] for s, q in zip(states, reads)]
    for a, d in zip(alone, decided):
        assert a.probabilities == pytest.approx(d["sport"].probabilities, abs=1e-4)


def test_when_picking_fails_the_written_question_decides_and_says_so(tmp_path, caplog):
    from agentbranch.policy.earned.learn.hooks import asked_questions

    fake, broken = FakeEncoder(), [True]

    def encoder(texts):
        if broken[0]:
            raise OSError("encoder files missing")
        return fake(texts)

    earned = _learning(tmp_path, encoder)
    engine = ab.DecisionEngine(canvas_reader())
    learner = earned.learner
    learner.bind(engine)
    q = learner._question(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    labelled = [((f"{i:04d}", "x"), t, y) for i, (t, y) in enumerate(stream(32))]
    learner._add(q, learner._version(q, 1, labelled))
    q.ladder.in_force = 1  # (as if version 1 had earned its threshold)
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        got = asked_questions(engine, {"sport": QUESTION}, learner, "a state")["sport"]
    assert got.question is QUESTION and got.read is QUESTION and got.version == 0
    assert any("encoder files missing" in r.getMessage() for r in caplog.records)
    broken[0] = False  # the version itself decides when its pool can pick
    got = asked_questions(engine, {"sport": QUESTION}, learner, "a state")["sport"]
    assert got.version == 1 and got.question is q.ladder.rungs[1].model
    assert len(got.read.examples["yes"]) > len(WRITTEN["yes"])


def test_concurrent_picks_embed_their_states_together():
    import threading
    import time

    fake = FakeEncoder()
    entered, release = threading.Event(), threading.Event()

    def slow(texts):
        entered.set()
        release.wait(5)
        time.sleep(0.01)
        return fake(texts)

    shared = nearest.Coalesced(slow)
    texts = [f"{SPORT[i % 6]} {i}" for i in range(8)]
    got: dict[int, np.ndarray] = {}

    def call(i):
        got[i] = shared([texts[i]])

    first = threading.Thread(target=call, args=(0,))
    first.start()
    assert entered.wait(30)  # the first forward runs; the others queue behind it
    rest = [threading.Thread(target=call, args=(i,)) for i in range(1, 8)]
    for t in rest:
        t.start()
    deadline = time.monotonic() + 60
    while len(shared._pending) < 7 and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for t in [first, *rest]:
        t.join(60)
    assert shared.forwards == 2  # the first alone, then the seven that waited, at once
    for i in range(8):  # each caller its own row
        assert got[i] == pytest.approx(fake([texts[i]]))
    errors = nearest.Coalesced(lambda t: (_ for _ in ()).throw(OSError("no model")))
    with pytest.raises(OSError, match="no model"):
        errors(["x"])


def test_the_pool_names_its_encoder(monkeypatch):
    texts, labels = [t for t, _ in stream(8)], [y for _, y in stream(8)]
    fake = FakeEncoder()
    assert nearest.pool_of(texts, labels, ["yes", "no"], {}, fake).rule["encoder"] == "FakeEncoder"
    monkeypatch.setattr(nearest, "default_encode", fake)
    default = nearest.pool_of(texts, labels, ["yes", "no"], {}, nearest.default_encode)
    assert default.rule["encoder"] == nearest.ENCODER == "all-MiniLM-L6-v2"


def test_a_learning_question_keys_its_evidence_by_its_reading_settings(tmp_path):
    """The reading fingerprint (here the engine's calibration temperature) is in every
    version's evidence key, as it is without learning: a threshold earned on one
    confidence scale never serves another, and a change of reading settings starts the
    question's learning and trust afresh."""
    from agentbranch.engine.calibration import Calibration

    earned = _learning(tmp_path, FakeEncoder())
    policy = {"sport": Policy(take_at=earned, fallbacks=[Generate(Teacher())])}
    sharp = ab.DecisionEngine(
        canvas_reader(), batching=False, calibration=Calibration(temperatures={"sport": 0.5})
    )
    reading = sharp.reading_for("sport", QUESTION)
    assert reading is not None
    r = Resolver(sharp, {"sport": QUESTION}, policy)
    records = [r.resolve(text)["sport"] for text, _ in stream(90)]
    assert {rec["reading"] for rec in records} == {reading}
    assert any(rec["decided_by"] == "engine" for rec in records)  # trust was earned

    ladder = next(iter(earned.learner._questions.values())).ladder
    keys = {
        earned.key(QuestionKey("sport", rung.model, "scripted", "canvas", reading))
        for rung in ladder.rungs
    }
    unkeyed = {
        earned.key(QuestionKey("sport", rung.model, "scripted", "canvas")) for rung in ladder.rungs
    }
    stored = set(earned.evidence.keys())
    assert stored and stored <= keys and not stored & unkeyed
    deciding = ladder.deciding.model
    assert (
        earned.threshold(QuestionKey("sport", deciding, "scripted", "canvas", reading)).take_at
        is not None
    )
    assert earned.threshold(QuestionKey("sport", deciding, "scripted", "canvas")).take_at is None

    # The same policy on an engine without the calibration: nothing earned carries over.
    plain = ab.DecisionEngine(canvas_reader(), batching=False)
    assert plain.reading_for("sport", QUESTION) is None
    first = Resolver(plain, {"sport": QUESTION}, policy).resolve(stream(1, seed=7)[0][0])
    assert first["sport"]["reading"] is None
    assert first["sport"]["decided_by"] == "fallback" and first["sport"]["reader_version"] == 0
    assert len(earned.learner._questions) == 2  # a ladder per reading


def test_labels_stored_under_a_version_no_longer_fitted_the_same_way_are_learned_from(tmp_path):
    """A later release (or another encoder, other numeric libraries) fits the versions
    differently, so under other keys: the labelled states stored while an earlier
    version decided are still found, through the written question they name, and the
    rebuilt question learns from all of them, each once."""
    import json

    earned = _learning(tmp_path, FakeEncoder())
    policy = {"sport": Policy(take_at=earned, fallbacks=[Generate(Teacher())])}
    engine = ab.DecisionEngine(canvas_reader(), batching=False)
    r = Resolver(engine, {"sport": QUESTION}, policy)
    versions = [r.resolve(text)["sport"]["reader_version"] for text, _ in stream(120)]
    assert 1 in versions  # a learned version decided, so labels sit under its key
    lines = [json.loads(x) for x in (tmp_path / "ev.jsonl").read_text().splitlines()]
    labelled = [x for x in lines if "state" in x]
    written = earned.key(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    assert {x["written"] for x in lines} == {written}  # every learning record names it
    assert len({x["key"] for x in labelled}) >= 2  # states under the written and v1 keys

    renamed = FakeEncoder()
    renamed.name = "another-encoder"  # its versions' pools name it: other keys
    again = _learning(tmp_path, renamed)
    again.learner.bind(engine)
    again.learner.asked(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    rebuilt = next(iter(again.learner._questions.values()))
    old_keys = {x["key"] for x in lines}
    new_keys = {
        again.key(QuestionKey("sport", rung.model, "scripted", "canvas"))
        for rung in rebuilt.ladder.rungs
    }
    assert old_keys & new_keys == {written}  # only the written question keeps its key
    assert rebuilt.ladder.labels == len(labelled)  # every label, once
    # (fewer than FIT_PER_OPTION per option: the fits' sample holds every one)
    assert [s[1] for s in rebuilt.labels.sample()] == [x["state"] for x in labelled]
    assert len(rebuilt.ladder.rungs) == len(
        next(iter(earned.learner._questions.values())).ladder.rungs
    )
