"""The evidence store contract (``EvidenceStore``) and its conformance kit
(``agentbranch.testing.check_store``): every built-in store passes it (JSON Lines, and
LangGraph's InMemoryStore, SqliteStore and PostgresStore through the adapter), a store
that breaks a clause fails it naming the clause, and the adapter reads a LangGraph store
correctly whatever order its ``search`` lists items in."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from datetime import UTC, datetime, timedelta

import pytest
from langgraph.store.base import BaseStore, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from agentbranch.policy.earned import EvidenceStore, JsonlEvidenceStore, LangGraphEvidenceStore
from agentbranch.policy.earned._evidence import new_evidence
from agentbranch.testing import check_store

# -- every built-in store passes the kit --------------------------------------------------


def test_a_jsonl_store_conforms(tmp_path):
    path = tmp_path / "evidence.jsonl"
    check_store(lambda: JsonlEvidenceStore(path), lose=path.unlink)


def test_a_jsonl_path_conforms_as_earned_opens_it(tmp_path):
    check_store(lambda: tmp_path / "evidence.jsonl")


def test_langgraphs_in_memory_store_conforms_through_the_adapter():
    store = InMemoryStore()
    check_store(lambda: store)


def test_langgraphs_sqlite_store_conforms_through_the_adapter(tmp_path):
    from langgraph.store.sqlite import SqliteStore

    path = str(tmp_path / "evidence.sqlite")
    with contextlib.ExitStack() as stack:
        stack.enter_context(SqliteStore.from_conn_string(path)).setup()
        check_store(lambda: stack.enter_context(SqliteStore.from_conn_string(path)))


def test_langgraphs_postgres_store_conforms_through_the_adapter(postgres_uri):
    from langgraph.store.postgres import PostgresStore

    with contextlib.ExitStack() as stack:
        stack.enter_context(PostgresStore.from_conn_string(postgres_uri)).setup()
        check_store(lambda: stack.enter_context(PostgresStore.from_conn_string(postgres_uri)))


def test_the_adapter_conforms_on_a_store_listing_in_another_order():
    for order in ("oldest first", "shuffled"):
        store = Listed(order)
        check_store(lambda store=store: store)


# -- a store that breaks a clause fails the kit, naming the clause ------------------------


class Shelf(EvidenceStore):
    """A store of its own in memory, on the defaults for everything but the three
    required methods; its storage (``shelf``) is shared by every object made on it."""

    def __init__(self, shelf: dict):
        self.shelf = shelf
        self.lock = shelf.setdefault("lock", threading.Lock())

    def __repr__(self):
        return "Shelf()"

    def append(self, records):
        with self.lock:
            for r in records:
                self.shelf.setdefault(r.key, {})[r.id] = r.to_json()

    def load(self, key):
        from agentbranch.policy.earned import Evidence

        with self.lock:
            raw = list(self.shelf.get(key, {}).values())
        return sorted((Evidence.model_validate(r) for r in raw), key=lambda r: r.order)

    def keys(self):
        with self.lock:
            return sorted(k for k in self.shelf if k != "lock")


class DropsOne(Shelf):
    def append(self, records):
        super().append(records[:-1] if len(records) > 1 else records)


class InAppendOrder(Shelf):
    def load(self, key):
        wanted = {r.id: r for r in super().load(key)}
        return [wanted[i] for i in self.shelf.get(key, {})]  # (dict order: appended)


class ReadsTwice(Shelf):
    def read_new(self):
        new = super().read_new()
        return new + new[:1]


class Unnoticing(JsonlEvidenceStore):
    def pop_lost(self):
        super().pop_lost()
        return None


def test_a_store_on_the_defaults_conforms():
    shelf: dict = {}
    check_store(lambda: Shelf(shelf))


@pytest.mark.parametrize(
    ("kind", "clause"),
    [
        (DropsOne, r"load returns every record of the key, each once, in replay order "
                   r"\(time, then id\) \(Shelf\(\)\): 2 of 42 records missing"),
        (InAppendOrder, r"load returns every record .*: out of order: position \d+ holds"),
        (ReadsTwice, r"read_new returns each record another store object appended, once "
                     r"\(Shelf\(\)\): 1 records returned more than once"),
    ],
)  # fmt: skip
def test_a_store_breaking_a_clause_fails_the_kit_naming_it(kind, clause):
    shelf: dict = {}
    with pytest.raises(AssertionError, match=rf"^EvidenceStore contract, {clause}"):
        check_store(lambda: kind(shelf))


def test_a_store_that_forgets_when_opened_again_fails_the_kit():
    with pytest.raises(
        AssertionError,
        match=r"^EvidenceStore contract, a new store object on the same storage loads what "
        r"another appended \(Shelf\(\)\): 30 of 30 records missing",
    ):
        check_store(lambda: Shelf({}))


def test_a_store_that_does_not_notice_its_loss_fails_the_kit(tmp_path):
    path = tmp_path / "evidence.jsonl"
    with pytest.raises(
        AssertionError,
        match=r"^EvidenceStore contract, a store lost while being read says so once and "
        r"starts again \(fail closed\) .*: pop_lost\(\) returned None",
    ):
        check_store(lambda: Unnoticing(path), lose=path.unlink)


def test_a_jsonl_store_finds_the_records_of_a_non_ascii_key(tmp_path):
    # Lines are written as UTF-8; the key was looked for \u-escaped, so load() and
    # keep_only() of "clé" found nothing (check_store's non-ASCII clause caught it).
    path = tmp_path / "evidence.jsonl"
    records = [record(str(i), i, key="clé-問題") for i in range(3)]
    JsonlEvidenceStore(path).append(records + [record("other", 9)])
    assert JsonlEvidenceStore(path).load("clé-問題") == records
    mine = JsonlEvidenceStore(path)
    mine.keep_only(["clé-問題"])
    assert mine.read_new() == records


# -- the adapter does not rely on the order LangGraph lists items in ----------------------


class Listed(BaseStore):
    """A LangGraph store (an ``InMemoryStore`` inside) whose ``search`` lists items in
    another order than any built-in store: oldest first, or shuffled (by a hash of the
    item key, the same each call, so pages do not overlap), and whose items carry the
    times of a clock the test moves (``now``)."""

    def __init__(self, order: str):
        self.inner = InMemoryStore()
        self.order = order
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.born: dict[tuple, datetime] = {}

    def batch(self, ops):
        ops = list(ops)
        for op in ops:
            if type(op).__name__ == "PutOp":
                self.born.setdefault((op.namespace, op.key), self.now)
        out = []
        for op in ops:
            if isinstance(op, SearchOp):
                out.append(self._search(op))
            else:
                out.append(self.inner.batch([op])[0])
        return out

    async def abatch(self, ops):
        return self.batch(ops)

    def _search(self, op):
        whole = SearchOp(op.namespace_prefix, op.filter, limit=1 << 30, offset=0)
        items = [
            SearchItem(i.namespace, i.key, i.value, when, when)
            for i in self.inner.batch([whole])[0]
            for when in [self.born[(i.namespace, i.key)]]
        ]
        if self.order == "oldest first":
            items.sort(key=lambda i: (i.updated_at, i.key))
        else:
            items.sort(key=lambda i: hashlib.sha256(i.key.encode()).digest())
        return items[op.offset : op.offset + op.limit]


@pytest.mark.parametrize("order", ["oldest first", "shuffled"])
def test_the_adapter_reads_every_new_record_whatever_order_the_store_lists(order):
    store = Listed(order)
    writer, reader = LangGraphEvidenceStore(store), LangGraphEvidenceStore(store)
    got, want = [], []
    for minute in range(4):  # each batch written a minute (more than MARGIN) after the last
        store.now += timedelta(minutes=1)
        records = [record(f"{minute}-{i}", minute * 10 + i) for i in range(5)]
        writer.append(records[::-1])
        got.append([r.id for r in reader.read_new()])
        want.append([r.id for r in records])
        assert reader.read_new() == []
    assert [sorted(ids) for ids in got] == [sorted(ids) for ids in want]  # none lost
    assert got == want  # in replay order


def test_a_postgres_store_is_read_whole_however_it_orders_one_transactions_items(postgres_uri):
    # PostgresStore lists newest first, but items of one transaction share their
    # ``updated_at`` and come in any order, not the same each call: read a page at a time
    # at growing offsets, 2,500 records written at once were partly missed, partly
    # read twice.
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_uri) as store:
        store.setup()
        writer, reader = LangGraphEvidenceStore(store), LangGraphEvidenceStore(store)
        writer.append([record(f"before-{i}", i) for i in range(50)])
        while reader.read_new():
            pass
        records = [record(str(i), 100 + i) for i in range(2500)]
        writer.append(records)
        got = []
        while batch := reader.read_new():
            got += batch
        assert sorted(r.id for r in got) == sorted(r.id for r in records)
        assert [r.id for r in reader.load("k" * 32)][50:] == [r.id for r in records]


def test_an_in_memory_store_subclass_listing_newest_first_is_read_whole():
    class NewestFirst(InMemoryStore):
        def batch(self, ops):
            ops = list(ops)
            out = super().batch(ops)
            return [r[::-1] if isinstance(op, SearchOp) else r for op, r in zip(ops, out)]

    store = NewestFirst()
    writer, reader = LangGraphEvidenceStore(store), LangGraphEvidenceStore(store)
    first = [record(f"a{i}", i) for i in range(3)]
    writer.append(first)
    assert [r.id for r in reader.read_new()] == [r.id for r in first]
    second = [record(f"b{i}", 10 + i) for i in range(3)]
    writer.append(second)
    assert [r.id for r in reader.read_new()] == [r.id for r in second]


def record(id_: str, i: int, key: str = "k" * 32):
    return new_evidence(
        id=f"rec-{id_}",
        key=key,
        question_id="urgent",
        source="fallback",
        band="fallback",
        confidence=0.9,
        options=["yes", "no"],
        engine_label="yes",
        teacher_label="yes",
        rate=1.0,
        time=(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i)).isoformat(
            timespec="milliseconds"
        ),
    )
