"""Evidence stores: behaviours mutation testing found no test for (scripts/mutation.py,
docs/reliability.md "Mutation testing"): many pages of records and keys in a LangGraph
store, namespaces that are not evidence, the JSON Lines file's lock, encoding,
durability and errors, and what ``Earned(store=...)`` accepts."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from _evidence_records import evidence

from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.policy import Earned, JsonlEvidenceStore
from agentbranch.policy.earned import EvidenceStore, LangGraphEvidenceStore
from agentbranch.policy.earned._any_store import as_store

#: Record ``i`` is made ``i`` ms after this: records sort (time, id) in the order of ``i``.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def record(key: str = "k" * 32, i: int = 0, **over):
    when = (EPOCH + timedelta(milliseconds=i)).isoformat(timespec="milliseconds")
    return evidence(**({"key": key, "time": when} | over))


def memory():
    from langgraph.store.memory import InMemoryStore

    inner = InMemoryStore()
    return inner, LangGraphEvidenceStore(inner)


# -- LangGraph stores: paging, foreign namespaces, messages -------------------------------


def test_a_langgraph_store_loads_every_record_of_a_key_across_pages():
    # 1,000 items a page: 2,500 records are three pages, the last one short.
    _, store = memory()
    records = [record(i=i) for i in range(2500)]
    store.append(records)
    assert store.load("k" * 32) == records


def test_a_langgraph_store_lists_every_key_across_pages():
    _, store = memory()
    keys = [f"{i:032d}" for i in range(2100)]
    store.append([record(key=k) for k in keys])
    assert store.keys() == keys


def test_a_langgraph_store_lists_only_its_own_namespaces():
    inner, store = memory()
    store.append([record(key="a" * 32)])
    inner.put(("checkpoints", "thread-1"), "x", {"app": "data"})  # the app's own items
    inner.put(("agentbranch", "other"), "x", {"app": "data"})
    inner.put(("agentbranch", "earned"), "x", {"not": "a key"})  # directly in the prefix
    assert store.keys() == ["a" * 32]
    assert LangGraphEvidenceStore(inner, namespace=("checkpoints",)).keys() == ["thread-1"]


def test_a_foreign_item_is_named_with_store_item_and_namespace():
    inner, store = memory()
    inner.put(("agentbranch", "earned", "k" * 32), "x1", {"hello": "world"})
    with pytest.raises(InvalidFileError) as info:
        store.load("k" * 32)
    msg = str(info.value)
    assert msg.startswith(
        f"evidence store InMemoryStore, item 'x1' in ('agentbranch', 'earned', '{'k' * 32}') "
        "is not an agentbranch evidence record (id: Field required)"
    )
    assert msg.endswith(
        "the store holds something else or was edited. Point Earned(store=...) at a file or "
        "store of its own; nothing was reset"
    )


def test_evidence_is_never_embedded_in_a_store_set_up_for_semantic_search():
    from langgraph.store.memory import InMemoryStore

    calls = []

    def embed(texts):
        calls.append(list(texts))
        return [[1.0, 0.0] for _ in texts]

    store = LangGraphEvidenceStore(InMemoryStore(index={"dims": 2, "embed": embed}))
    store.append([record(i=i) for i in range(3)])
    assert len(store.load("k" * 32)) == 3
    assert calls == []


# -- JSON Lines: lock, encoding, durability, errors ----------------------------------------


def test_a_jsonl_append_waits_for_the_lock_other_writers_hold(tmp_path):
    from filelock import FileLock

    path = tmp_path / "evidence.jsonl"
    store = JsonlEvidenceStore(path)
    held = FileLock(str(path) + ".lock")
    held.acquire()
    writer = threading.Thread(target=store.append, args=([record()],))
    writer.start()
    time.sleep(0.3)
    assert not path.exists() or path.read_bytes() == b""  # waiting for the lock
    held.release()
    writer.join(5)
    assert len(store.load("k" * 32)) == 1


def test_a_jsonl_append_of_many_records_writes_one_line_each(tmp_path):
    path = tmp_path / "evidence.jsonl"
    store = JsonlEvidenceStore(path)
    records = [record(i=i) for i in range(3)]
    store.append(records)
    store.append([])
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == [
        r.id for r in records
    ]
    assert JsonlEvidenceStore(path).load("k" * 32) == records


def test_a_jsonl_store_writes_utf8_text_not_escapes(tmp_path):
    path = tmp_path / "evidence.jsonl"
    rec = record(question_id="dringlichkeit-é-緊急", options=["ja", "nein"], engine_label="ja",
                 teacher_label="ja")  # fmt: skip
    JsonlEvidenceStore(path).append([rec])
    assert "dringlichkeit-é-緊急" in path.read_text(encoding="utf-8")
    assert JsonlEvidenceStore(path).load(rec.key) == [rec]


def test_a_jsonl_store_creates_missing_directories(tmp_path):
    path = tmp_path / "a" / "b" / "evidence.jsonl"
    JsonlEvidenceStore(path).append([record()])
    assert len(JsonlEvidenceStore(path).load("k" * 32)) == 1


def test_jsonl_appends_are_in_the_file_at_once_and_on_disk_within_sync_s(tmp_path, monkeypatch):
    """Issue 61: one fsync per label cost the decision path; the appends of ``SYNC_S``
    share one, on a timer, and each is in the file (safe from a process crash) at once."""
    import time

    from agentbranch.policy.earned import _jsonl_store

    synced = []
    real = os.fsync
    path = tmp_path / "evidence.jsonl"

    def fsync(fd):
        # Only this store's fsyncs count: os.fsync is process-wide, and a timer left by
        # another store in this worker may fire during the test.
        if path.exists() and os.path.samestat(os.fstat(fd), path.stat()):
            synced.append(fd)
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store = JsonlEvidenceStore(path)
    store.append([record()])
    store.append([record(i=1)])
    assert len(path.read_text().splitlines()) == 2  # in the file when append returns
    assert synced == []  # not waited for
    deadline = time.monotonic() + 10 * _jsonl_store.SYNC_S
    while not synced and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(synced) == 1  # one fsync for both
    store.append([record(i=2)])
    store.sync()  # at once when asked
    assert len(synced) == 2


def test_a_jsonl_store_that_disappears_after_being_read_is_reported_once(tmp_path):
    """Issue 37.8: a store deleted while serving is not an exception on every read; the
    store reports it once (``pop_lost``, which ``Earned`` logs as an ERROR and answers
    with learning again), forgets what it read, and the next append starts a new file."""
    path = tmp_path / "evidence.jsonl"
    store = JsonlEvidenceStore(path)
    store.append([record()])
    assert store.read_new() == [] and store.keys() == ["k" * 32]
    assert store.pop_lost() is None  # nothing lost while the file is there
    path.unlink()
    assert store.read_new() == []
    assert store.keys() == []  # the keys of the lost file are forgotten
    assert store.pop_lost() == f"evidence store {path} was moved or deleted while serving"
    assert store.pop_lost() is None  # reported once
    fresh = record(i=1)
    store.append([fresh])
    assert store.load("k" * 32) == [fresh]
    assert store.keys() == ["k" * 32] and store.read_new() == []  # its own line: not read back
    assert store.pop_lost() is None


def test_a_jsonl_store_that_shrank_is_reported_and_read_again_from_the_start(tmp_path):
    """Issue 37.8: a store truncated or rewritten while serving (it is append-only) is
    reported once with the sizes, and what the file now holds is read from its start."""
    path = tmp_path / "evidence.jsonl"
    store = JsonlEvidenceStore(path)
    first, second = record(i=0), record(i=1)
    store.append([first, second])
    size = path.stat().st_size
    assert store.read_new() == [] and store.keys() == ["k" * 32]
    assert store.pop_lost() is None  # a file exactly as long as what was read is intact
    path.write_text(path.read_text().splitlines()[0] + "\n")  # same file, shorter
    assert store.read_new() == [first]
    assert store.pop_lost() == (
        f"evidence store {path} shrank ({path.stat().st_size} < {size} bytes read) while serving"
    )
    assert store.pop_lost() is None and store.read_new() == []


def test_a_bad_line_names_the_field_and_what_is_wrong(tmp_path):
    path = tmp_path / "evidence.jsonl"
    bad = record().to_json()
    bad["confidence"] = 1.5
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(InvalidFileError) as info:
        JsonlEvidenceStore(path).keys()
    assert (
        f"evidence store {path}, line 1 is not an agentbranch evidence record "
        "(confidence: Input should be less than or equal to 1); "
    ) in str(info.value)


def test_a_record_level_error_is_named_record(tmp_path):
    path = tmp_path / "evidence.jsonl"
    bad = record().to_json()
    bad["correct"] = False  # the labels agree
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(InvalidFileError, match=r"line 1 is not an agentbranch evidence "
                       r"record \(record: Value error, correct must say"):  # fmt: skip
        JsonlEvidenceStore(path).keys()


@pytest.mark.parametrize("line", ["[1, 2]", '"a string"', "42", "null"])
def test_a_line_that_is_json_but_not_an_object_is_not_a_record(tmp_path, line):
    """A JSON array, string, number or null on a line: named as not a record, never an
    AttributeError from looking for its schema."""
    path = tmp_path / "evidence.jsonl"
    path.write_text(json.dumps(record().to_json()) + "\n" + line + "\n")
    with pytest.raises(InvalidFileError, match=r"line 2 is not an agentbranch evidence record"):
        JsonlEvidenceStore(path).keys()


def test_a_jsonl_store_that_is_not_a_regular_file_says_so(tmp_path):
    with pytest.raises(ConfigurationError, match=r"is a directory, not a regular file; give "
                       r"a \.jsonl file path$"):  # fmt: skip
        JsonlEvidenceStore(tmp_path)


# -- what Earned(store=...) accepts ------------------------------------------------------


class OwnStore(EvidenceStore):
    """A store of the application's own: an ``EvidenceStore`` with the three methods."""

    def __init__(self):
        self.records = []

    def append(self, records):
        self.records += records

    def load(self, key):
        return [r for r in self.records if r.key == key]

    def keys(self):
        return sorted({r.key for r in self.records})


def test_an_evidence_store_is_used_as_it_is():
    own = OwnStore()
    assert as_store(own) is own
    earned = Earned(store=own)
    assert earned.evidence is own


def test_a_store_that_is_no_evidence_store_is_refused_saying_what_to_do():
    class Duck:  # the three methods, but not the declared contract
        append = load = keys = OwnStore.keys

    with pytest.raises(
        ConfigurationError,
        match=r"^Earned\(store=\.\.\.\) takes a JSON Lines path, a LangGraph BaseStore "
        r"\(InMemoryStore, SqliteStore, PostgresStore\) or a subclass of "
        r"agentbranch\.policy\.earned\.EvidenceStore \(docs/stores\.md\), got Duck$",
    ):
        as_store(Duck())


@pytest.mark.parametrize("missing", ["append", "load", "keys"])
def test_an_evidence_store_without_a_required_method_cannot_be_made(missing):
    methods = {name: getattr(OwnStore, name) for name in ("append", "load", "keys")}
    del methods[missing]
    Half = type("Half", (EvidenceStore,), methods)
    with pytest.raises(TypeError, match=rf"abstract method.*{missing}"):
        Half()


@pytest.mark.parametrize("path", ["", "   "])
def test_an_empty_store_path_is_refused(path):
    with pytest.raises(ConfigurationError, match=r"^Earned\(store=\.\.\.\) got an empty path$"):
        as_store(path)


def test_a_store_path_is_a_jsonl_store_and_none_is_in_memory(tmp_path):
    assert isinstance(as_store(tmp_path / "e.jsonl"), JsonlEvidenceStore)
    assert isinstance(as_store(str(tmp_path / "e.jsonl")), JsonlEvidenceStore)
    assert isinstance(as_store(None), LangGraphEvidenceStore)


def test_stores_say_what_they_are(tmp_path):
    path = tmp_path / "evidence.jsonl"
    assert repr(JsonlEvidenceStore(path)) == f"JsonlEvidenceStore({str(path)!r})"
    assert repr(memory()[1]) == "LangGraphEvidenceStore(InMemoryStore, ('agentbranch', 'earned'))"
    assert repr(Earned(store=path)) == (
        f"Earned(precision=0.9, level=0.95, store=JsonlEvidenceStore({str(path)!r}))"
    )


# -- evidence.py: times, the key's reading fingerprint, the record's JSON ----------------


def test_check_time_says_what_is_wrong_with_a_time():
    from datetime import UTC, datetime, timedelta

    from agentbranch.policy.earned._evidence import MAX_CLOCK_SKEW_S, check_time

    now = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match=r"^time 'soon' is not an ISO-8601 time$"):
        check_time("soon", now)
    for zone in ("", "+02:00"):
        with pytest.raises(
            ValueError,
            match=r"is not in UTC \(records are ordered by time: write it with '\+00:00'\)$",
        ):
            check_time("2026-01-01T00:00:00" + zone, now)
    skew = timedelta(seconds=MAX_CLOCK_SKEW_S)
    at_limit = (now + skew).isoformat()
    assert check_time(at_limit, now) == now + skew  # exactly the allowed skew: accepted
    late = (now + 2 * skew).isoformat()
    with pytest.raises(ValueError) as err:
        check_time(late, now)
    assert str(err.value) == (
        f"time {late!r} is 600 s in the future (more than 300 s of clock skew): the record "
        "was edited or its writer's clock is wrong"
    )
    assert check_time(late, now, future_ok=True) == now + 2 * skew


def test_the_evidence_key_changes_with_the_reading_fingerprint():
    from agentbranch.policy.earned._evidence import evidence_key

    who = ("urgent", {"options": ["yes", "no"]}, "scripted", "m")
    plain = evidence_key(*who)
    assert evidence_key(*who, reading=None) == plain  # defaults keep the earlier keys
    keys = {evidence_key(*who, reading=r) for r in ("draws=4", "draws=8", "None", "")}
    assert len(keys) == 4 and plain not in keys
    # pinned like the keys above: stores keep evidence under it
    assert evidence_key(*who, reading="draws=4") == "80b3ec7979fe85e6f8e33922d5a20704"


def test_a_record_without_a_learning_state_has_no_state_field():
    bare = evidence(question_id="q").to_json()
    assert "state" not in bare and "version" not in bare  # records written before learning
    kept = evidence(question_id="q", state="the ticket text", version=2).to_json()
    assert kept["state"] == "the ticket text" and kept["version"] == 2
