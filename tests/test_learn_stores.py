"""Earned(learn=True) on LangGraph stores (SQLite; PostgreSQL from pip-installed
binaries): what a question learned lives with its evidence, so a restart on the same
store rebuilds the same versions, the same one in force, from every labelled state."""

from __future__ import annotations

import json

from _learn_canvas import QUESTION, FakeEncoder, Teacher, canvas_reader, stream

import agentbranch as ab
from agentbranch.policy import Earned, Generate, Policy, Resolver
from agentbranch.policy.earned import QuestionKey
from agentbranch.policy.earned.learn.ladder import refit_at


def _learning(store, settle_s: float = 0) -> Earned:
    earned = Earned(precision=0.8, min_evidence=10, refresh_s=0, store=store, learn=True)
    earned.learner.background = False
    # one writer at a time: no label of another replica is ever still being written
    earned.learner.settle_s = settle_s
    earned.learner.encoder = FakeEncoder()
    return earned


def _learn_and_restart(store) -> None:
    earned = _learning(store)
    policy = {"sport": Policy(take_at=earned, fallbacks=[Generate(Teacher())])}
    engine = ab.DecisionEngine(canvas_reader(), batching=False)
    r = Resolver(engine, {"sport": QUESTION}, policy)
    versions = [r.resolve(text)["sport"]["reader_version"] for text, _ in stream(120)]
    assert 1 in versions  # a learned version earned its threshold and decided
    ladder = next(iter(earned.learner._questions.values())).ladder
    records = [rec for key in earned.evidence.keys() for rec in earned.evidence.load(key)]
    labelled = [rec for rec in records if rec.state is not None]
    assert ladder.labels == len(labelled) > 32
    written = earned.key(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    assert {rec.written for rec in records} == {written}
    assert all(json.loads(json.dumps(rec.to_json()))["state"] for rec in labelled)

    again = _learning(store)  # a restart on the same store
    again.learner.bind(engine)
    q, j = again.learner.asked(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    rebuilt = next(iter(again.learner._questions.values())).ladder
    assert (j, rebuilt.open, rebuilt.labels) == (ladder.deciding.index, ladder.open, ladder.labels)
    assert [
        again.key(QuestionKey("sport", x.model, "scripted", "canvas")) for x in rebuilt.rungs
    ] == [earned.key(QuestionKey("sport", x.model, "scripted", "canvas")) for x in ladder.rungs]
    mine = again.threshold(QuestionKey("sport", q, "scripted", "canvas"))
    assert mine == earned.threshold(
        QuestionKey("sport", ladder.deciding.model, "scripted", "canvas")
    )
    assert mine.take_at is not None


def test_learning_lasts_on_a_sqlite_store(tmp_path):
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path / "evidence.sqlite")) as store:
        store.setup()
        _learn_and_restart(store)


def test_learning_lasts_on_a_postgres_store(postgres_uri):
    from langgraph.store.postgres import PostgresStore

    uri = postgres_uri
    with PostgresStore.from_conn_string(uri) as store:
        store.setup()
        _learn_and_restart(store)


def _replicas_learn_together(make_store) -> None:
    """Two replicas on one store, taking turns: each fits every version on the labels
    both gathered, so their versions are the same (same keys, one threshold each)."""
    engine = ab.DecisionEngine(canvas_reader(), batching=False)
    replicas = []
    for _ in range(2):
        earned = _learning(make_store())
        policy = {"sport": Policy(take_at=earned, fallbacks=[Generate(Teacher())])}
        replicas.append((earned, Resolver(engine, {"sport": QUESTION}, policy)))
    versions = [
        replicas[i % 2][1].resolve(text)["sport"]["reader_version"]
        for i, (text, _) in enumerate(stream(160))
    ]
    assert 1 in versions[-40:]
    for earned, _ in replicas:  # a last read of the store, as the next decision would
        earned.learner.asked(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    store = replicas[0][0].evidence
    labelled = [r for key in store.keys() for r in store.load(key) if r.state is not None]
    ladders = [next(iter(e.learner._questions.values())).ladder for e, _ in replicas]
    assert [ladder.labels for ladder in ladders] == [len(labelled)] * 2
    keys = [
        [e.key(QuestionKey("sport", x.model, "scripted", "canvas")) for x in ladder.rungs]
        for (e, _), ladder in zip(replicas, ladders)
    ]
    assert len(keys[0]) >= 3 and keys[0] == keys[1]
    # one threshold per version, earned on both replicas' reads: the same one decides
    assert [ladder.deciding.index for ladder in ladders] == [ladders[0].deciding.index] * 2


def test_replicas_on_a_json_lines_store_learn_together(tmp_path):
    _replicas_learn_together(lambda: str(tmp_path / "evidence.jsonl"))


def test_replicas_on_a_sqlite_store_learn_together(tmp_path):
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path / "evidence.sqlite")) as store:
        store.setup()
        _replicas_learn_together(lambda: store)


def test_replicas_deciding_at_once_fit_the_same_versions(tmp_path):
    """Four threads, two replicas, one store: labels made at once are written in another
    order than they were made; waiting ``settle_s`` before a fit, both fit the same."""
    import threading
    import time

    engine = ab.DecisionEngine(canvas_reader(), batching=False)
    replicas = []
    for _ in range(2):
        earned = _learning(str(tmp_path / "evidence.jsonl"), settle_s=1.0)
        policy = {"sport": Policy(take_at=earned, fallbacks=[Generate(Teacher())])}
        replicas.append((earned, Resolver(engine, {"sport": QUESTION}, policy)))
    texts = [text for text, _ in stream(400)]

    def run(i: int) -> None:
        for text in texts[i::4]:
            replicas[i % 2][1].resolve(text)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for _ in range(3):  # the next decisions' reads of the store: fit what is due
        time.sleep(1.1)  # (past settle_s: every label made is settled)
        for earned, _ in replicas * 2:
            earned.learner.asked(QuestionKey("sport", QUESTION, "scripted", "canvas"))
            earned.learner.wait()  # (on learning's own thread)
    ladders = [next(iter(e.learner._questions.values())).ladder for e, _ in replicas]
    keys = [
        [e.key(QuestionKey("sport", x.model, "scripted", "canvas")) for x in ladder.rungs]
        for (e, _), ladder in zip(replicas, ladders)
    ]
    assert len(keys[0]) >= 3 and keys[0] == keys[1]


def test_labels_stored_before_records_named_their_written_question_are_learned_from(tmp_path):
    """Records without ``written`` (stored by an earlier release) are found under their
    version's key: a restart rebuilds the same versions from them."""
    path = tmp_path / "evidence.jsonl"
    earned = _learning(str(path))
    policy = {"sport": Policy(take_at=earned, fallbacks=[Generate(Teacher())])}
    engine = ab.DecisionEngine(canvas_reader(), batching=False)
    r = Resolver(engine, {"sport": QUESTION}, policy)
    for text, _ in stream(120):
        r.resolve(text)
    ladder = next(iter(earned.learner._questions.values())).ladder
    older = tmp_path / "older.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    older.write_text(
        "".join(json.dumps({k: v for k, v in x.items() if k != "written"}) + "\n" for x in lines)
    )
    again = _learning(str(older))
    again.learner.bind(engine)
    again.learner.asked(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    rebuilt = next(iter(again.learner._questions.values())).ladder
    assert rebuilt.labels == ladder.labels >= refit_at(2) and len(ladder.rungs) >= 3
    assert [
        again.key(QuestionKey("sport", x.model, "scripted", "canvas")) for x in rebuilt.rungs
    ] == [earned.key(QuestionKey("sport", x.model, "scripted", "canvas")) for x in ladder.rungs]
