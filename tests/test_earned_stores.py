"""Evidence stores: JSON Lines (restart, corrupt, foreign, odd files) and LangGraph stores
shared by real processes (SQLite, PostgreSQL)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _earned_fixtures import URGENT, URGENT_KEY, Oracle, engine, state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.policy import Earned, Generate, JsonlEvidenceStore, Policy, Resolver

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"


def learn(earned, n=20, start=0):
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    )
    return [r.resolve(state(i, "yes", 0.99, "yes"))["urgent"] for i in range(start, start + n)]


def trust(earned):
    return earned.state(URGENT_KEY)


# -- JSON Lines ---------------------------------------------------------------------------


def test_restart_keeps_what_was_earned(tmp_path):
    path = tmp_path / "evidence.jsonl"
    first = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    learn(first)
    assert trust(first).trust == "earned"
    again = Earned(precision=0.8, min_evidence=20, store=str(path), refresh_s=0)
    st_ = trust(again)
    assert (st_.trust, st_.take_at, st_.records) == ("earned", trust(first).take_at, 20)
    lines = path.read_text().splitlines()
    assert len(lines) == 20 and json.loads(lines[0])["schema"] == "agentbranch.earned/1"


def test_two_writers_in_one_file_lose_nothing(tmp_path):
    path = tmp_path / "evidence.jsonl"
    a = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    b = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    learn(a, 10, 0)
    learn(b, 10, 10)
    a.refresh()
    assert trust(a).records == trust(b).records == 20
    assert trust(a).take_at == trust(b).take_at is not None


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"not json\n", r"line 2 is not JSON"),
        (b'{"kind": "audit", "question_id": "q"}\n', r"line 2 is not an agentbranch evidence"),
        (b"\xff\xfe\n", r"line 2 is not UTF-8"),
        (
            b'{"schema": "agentbranch.earned/9"}\n',
            r"line 2 was written by a newer release of agentbranch \(schema agentbranch.earned/9",
        ),
    ],
)
def test_corrupt_or_foreign_lines_are_errors_naming_file_and_line(tmp_path, content, match):
    path = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    learn(earned, 1)
    with open(path, "ab") as f:
        f.write(content)
    again = Earned(store=path, refresh_s=0)
    with pytest.raises(InvalidFileError, match=match) as info:
        trust(again)
    assert f"evidence store {path}, line 2" in str(info.value)
    assert path.read_bytes().endswith(content)  # nothing rewritten


def test_a_truncated_store_is_logged_and_learning_restarts(tmp_path, caplog):
    """Issue 37.8: a store truncated while serving is an ERROR and learning again (nothing
    taken), not an exception on every decision."""
    path = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    learn(earned, 3)
    path.write_text("")
    with caplog.at_level(logging.ERROR, logger="agentbranch"):
        earned.refresh()
    assert "shrank" in caplog.text and "learning again" in caplog.text
    key = earned.key(URGENT_KEY)
    assert (
        all(st.trust == "learning" for st in earned.states().values()) or key not in earned.states()
    )


def test_a_line_being_written_waits(tmp_path):
    path = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    learn(earned, 2)
    with open(path, "a") as f:
        f.write('{"schema": "agentbranch.earn')  # no newline yet: another writer mid-line
    key = earned.key(URGENT_KEY)
    assert len(JsonlEvidenceStore(path).load(key)) == 2


def test_two_processes_share_a_jsonl_file(tmp_path):
    path = str(tmp_path / "evidence.jsonl")
    a, b = replicas("jsonl", path, tmp_path / "barrier")
    assert a == b and 20 <= a["records"] <= 30 and a["trust"] == "earned"
    assert len(Path(path).read_text().splitlines()) == a["records"]


def test_odd_paths_are_clear_errors(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(ConfigurationError, match="not a regular file"):
        Earned(store=tmp_path / "dir.jsonl")
    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(ConfigurationError, match="not a regular file"):
        Earned(store=tmp_path / "fifo.jsonl")
    (tmp_path / "real.jsonl").write_text("")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    with pytest.raises(ConfigurationError, match="symlink"):
        Earned(store=tmp_path / "link.jsonl")


@given(st.lists(st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b), min_size=1))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_garbage_never_gives_a_threshold(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("g") / "evidence.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    earned = Earned(store=path, refresh_s=0)
    with pytest.raises(InvalidFileError, match=r"evidence\.jsonl, line \d+"):
        trust(earned)


# -- shared LangGraph stores, real processes ------------------------------------------------


def replicas(kind: str, target: str, barrier: Path) -> list[dict]:
    """Two replicas resolve 15 decisions each against one store, then both re-read it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}
    barrier.mkdir()
    worker = [sys.executable, str(TESTS / "_earned_worker.py"), kind, target]
    procs = [
        subprocess.Popen(
            [*worker, str(s), "15", str(barrier), "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for s in (0, 1000)
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_share_a_langgraph_store(kind, tmp_path, request):
    if kind == "sqlite":
        from langgraph.store.sqlite import SqliteStore as Store

        conn = str(tmp_path / "evidence.sqlite")
    else:
        from langgraph.store.postgres import PostgresStore as Store

        conn = request.getfixturevalue("postgres_uri")
    with Store.from_conn_string(conn) as store:
        store.setup()
    a, b = replicas(kind, conn, tmp_path / "barrier")
    # 20 labels open the band (min_evidence=20); the replica that sees it first stops
    # labelling, so 20..30 records in all, and both replicas agree on everything
    assert a == b and 20 <= a["records"] <= 30 and a["trust"] == "earned"
    with Store.from_conn_string(conn) as store:
        earned = Earned(precision=0.8, min_evidence=20, store=store, refresh_s=0)
        third = trust(earned)  # a third replica converges too
        assert (third.take_at, third.records) == (a["take_at"], a["records"])


def test_foreign_items_in_the_namespace_are_errors():
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    earned = Earned(precision=0.8, min_evidence=20, store=store, refresh_s=0)
    key = earned.key(URGENT_KEY)
    store.put(("agentbranch", "earned", key), "x1", {"hello": "world"})
    with pytest.raises(InvalidFileError, match="not an agentbranch evidence record"):
        trust(earned)


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_stored_lists_every_question_of_the_store(tmp_path, kind):
    from langgraph.store.memory import InMemoryStore

    store = tmp_path / "evidence.jsonl" if kind == "jsonl" else InMemoryStore()
    earned = Earned(precision=0.8, min_evidence=20, store=store, refresh_s=0)
    learn(earned, 20)
    other = Earned(precision=0.8, min_evidence=20, store=store, refresh_s=0)
    (state_,) = other.stored().values()
    assert (state_.question_id, state_.trust, state_.records) == ("urgent", "earned", 20)
    assert [e.kind for e in state_.events] == ["earned"]


def test_a_view_kept_to_some_keys_parses_only_their_lines(tmp_path):
    path = tmp_path / "evidence.jsonl"
    learn(Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0))
    key = json.loads(path.read_text().splitlines()[0])["key"]
    with path.open("a") as f:  # another key's line that does not parse: never read
        f.write('{"key": "other", "not json\n')
    everything = JsonlEvidenceStore(path)
    with pytest.raises(InvalidFileError, match="line 21 is not JSON"):
        everything.read_new()
    mine = JsonlEvidenceStore(path)
    mine.keep_only([key])
    assert [r.key for r in mine.read_new()] == [key] * 20
    assert mine.read_new() == [] and mine.offset == path.stat().st_size
    none = JsonlEvidenceStore(path)
    none.keep_only(["no such key"])
    assert none.read_new() == [] and none.offset == path.stat().st_size


def test_each_learned_version_reads_only_its_own_key_of_a_shared_file(tmp_path):
    from _learn_store import learn_store

    earned = learn_store(tmp_path / "evidence.jsonl", n=120)
    versions = [(k, rung) for k, (_, rung) in earned.learner._rungs.items() if rung.index >= 1]
    assert versions, "no version was fitted"
    stored = earned.stored()
    for key, rung in versions:
        view = rung.trust.evidence
        assert view is not earned.evidence and view._needles == (json.dumps(key).encode(),)
        # what the version's copy counted is what a reader of the whole file counts
        live = rung.trust._ledger.windows.get(key)
        if key in stored:
            assert live is not None and live.live.records == stored[key].records
    assert any(key in stored for key, _ in versions), "no version has evidence yet"
