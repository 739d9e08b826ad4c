"""``check_store``: the conformance kit of the evidence store contract
(``agentbranch.policy.earned.EvidenceStore``, docs/stores.md), for a store backend's own
tests. It appends under evidence keys of its own (fresh per run, so storage that already
holds evidence is fine) and removes nothing."""

from __future__ import annotations

import random
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any, NoReturn

from agentbranch.policy.earned import Evidence, EvidenceStore, as_store, new_evidence

__all__ = ["check_store"]

#: Records of one key appended at once (``large batches``): three pages of 1,000 items.
LARGE = 2500
#: Keys appended at once (``keys``): more than one page of 1,000 namespaces.
MANY_KEYS = 1100
#: ``read_new`` calls after which a reader that never returns ``[]`` fails.
MAX_READS = 10_000


def check_store(make_store: Callable[[], Any], *, lose: Callable[[], None] | None = None) -> None:
    """Check the store ``make_store()`` opens against the ``EvidenceStore`` contract.

    ``make_store``: returns a new store object on the same storage each call: an
    ``EvidenceStore``, a LangGraph ``BaseStore`` (checked through the adapter
    ``Earned`` wraps it in) or a JSON Lines path. ``lose``: optional; destroys the
    storage (deletes the file) to check that a reader notices (``pop_lost``) and
    starts again from nothing (fail closed), for stores that can notice. Raises
    ``AssertionError`` naming the first clause the store breaks."""
    kit = _Kit(make_store)
    kit.check_a_store_is_made()
    kit.check_empty_reads()
    kit.check_append_and_load()
    kit.check_durable()
    kit.check_non_ascii()
    kit.check_read_new()
    kit.check_view()
    kit.check_concurrent_appends()
    kit.check_records()
    kit.check_large_batches()
    if lose is not None:
        kit.check_lost(lose)


class _Kit:
    def __init__(self, make_store: Callable[[], Any]) -> None:
        self.make_store = make_store
        self.run_id = uuid.uuid4().hex[:12]
        self.start = datetime.now(UTC) - timedelta(hours=1)
        self.made = 0  # records made (each a millisecond after the last)
        self.appended: list[Evidence] = []  # every record made (each is appended)
        self.keys: set[str] = set()  # every key this run wrote
        self.name = "?"

    # -- helpers -----------------------------------------------------------------------

    def open(self) -> EvidenceStore:
        store = as_store(self.make_store())
        if not isinstance(store, EvidenceStore):  # (as_store refuses anything else)
            self.fail("make_store", f"returned {type(store).__name__}")
        return store

    def fail(self, clause: str, detail: str) -> NoReturn:
        raise AssertionError(f"EvidenceStore contract, {clause} ({self.name}): {detail}")

    def key(self, name: str) -> str:
        key = f"check-store-{self.run_id}-{name}"
        self.keys.add(key)
        return key

    def records(self, key: str, n: int, **fields: Any) -> list[Evidence]:
        out = []
        for _ in range(n):
            when = self.start + timedelta(milliseconds=self.made)
            self.made += 1
            values = dict(
                key=key,
                question_id="check_store",
                source="fallback",
                band="fallback",
                confidence=0.75,
                options=["yes", "no"],
                engine_label="yes",
                teacher_label="yes" if self.made % 3 else "no",
                rate=1.0,
                time=when.isoformat(timespec="milliseconds"),
            )
            out.append(new_evidence(**(values | fields)))
        self.appended += out
        return out

    def append(self, store: EvidenceStore, records: Sequence[Evidence], clause: str) -> None:
        try:
            store.append(records)
        except Exception as e:  # noqa: BLE001 - reported as the clause that failed
            self.fail(clause, f"append of {len(records)} records raised {e!r}")

    def same(self, clause: str, got: list[Evidence], want: list[Evidence]) -> None:
        """``got`` is ``want``: the same records, in the same order, field for field."""
        got_ids, want_ids = [r.id for r in got], [r.id for r in want]
        if got_ids != want_ids:
            self.fail(clause, _difference(got_ids, want_ids))
        for g, w in zip(got, want, strict=True):
            if g.to_json() != w.to_json():
                self.fail(clause, f"record {w.id} came back changed: {g.to_json()!r}")

    def drain(self, store: EvidenceStore, clause: str) -> list[Evidence]:
        """What ``read_new`` returns until it returns nothing, of this run's keys."""
        out: list[Evidence] = []
        for _ in range(MAX_READS):
            batch = store.read_new()
            if not isinstance(batch, list):
                self.fail(clause, f"read_new returned {type(batch).__name__}, not a list")
            if not batch:
                return [r for r in out if r.key in self.keys]
            out += batch
        self.fail(clause, f"read_new returned records {MAX_READS} times and never []")

    def once_each(self, clause: str, got: list[Evidence], want: list[Evidence]) -> None:
        """``got`` holds each record of ``want`` once and nothing else, in any order
        (``read_new``: ``Earned`` puts them in replay order itself)."""
        by_id = attrgetter("id")
        self.same(clause, sorted(got, key=by_id), sorted(want, key=by_id))

    # -- the clauses ---------------------------------------------------------------------

    def check_a_store_is_made(self) -> None:
        store = self.open()
        self.name = repr(store)
        if store.pop_lost() is not None:
            self.fail("pop_lost", "a store nothing happened to says it was lost")

    def check_empty_reads(self) -> None:
        store = self.open()
        if (got := store.load(f"check-store-{self.run_id}-never-written")) != []:
            self.fail("load of a key never written", f"returned {len(got)} records, not []")
        self.append(store, [], "append([]) does nothing")
        keys = store.keys()
        if not isinstance(keys, list) or any(not isinstance(k, str) for k in keys):
            self.fail("keys", f"returned {keys!r:.200}, not a list of str")

    def check_append_and_load(self) -> None:
        store = self.open()
        key = self.key("order")
        records = self.records(key, 40)
        # same time, ids in both orders: replay order breaks the tie by id
        records += self.records(key, 2, time=records[-1].time)
        shuffled = records[:]
        random.Random(7).shuffle(shuffled)
        self.append(store, shuffled[:25], "append")
        self.append(store, shuffled[25:], "append")
        want = sorted(records, key=lambda r: r.order)
        self.same("load returns every record of the key, each once, in replay order "
                  "(time, then id)", store.load(key), want)  # fmt: skip
        keys = store.keys()
        if key not in keys:
            self.fail("keys lists every key written", f"{key!r} is missing")
        if keys != sorted(set(keys)):
            self.fail("keys are sorted, each once", f"got {keys[:10]!r}...")

    def check_durable(self) -> None:
        writer, key = self.open(), self.key("durable")
        records = self.records(key, 30)
        self.append(writer, records, "append")
        writer.sync()
        again = self.open()
        self.same("a new store object on the same storage loads what another appended",
                  again.load(key), records)  # fmt: skip
        if key not in again.keys():
            self.fail("a new store object lists the keys another wrote", f"{key!r} is missing")

    def check_non_ascii(self) -> None:
        store, key = self.open(), self.key("clé-問題-ключ-🙂")
        records = self.records(
            key,
            5,
            question_id="état_du_問題",
            options=["oui ✓", "non ✗", "peut-être"],
            engine_label="oui ✓",
            teacher_label="non ✗",
            state="Ünïcödé text: 日本語, emoji 🙂, quotes \" ' and a newline\nhere",
        )
        self.append(store, records, "append")
        clause = "non-ASCII keys and text come back as they were"
        self.same(clause, self.open().load(key), records)
        if key not in self.open().keys():
            self.fail(clause, f"keys() does not list {key!r}")

    def check_read_new(self) -> None:
        reader, writer = self.open(), self.open()
        self.drain(reader, "read_new")  # what the storage held before
        clause = "read_new returns each record another store object appended, once"
        for name in ("a", "b"):
            records = self.records(self.key(f"read-{name}"), 12)
            records += self.records(self.key("read-shared"), 8)
            self.append(writer, records, "append")
            self.once_each(clause, self.drain(reader, clause), records)

    def check_view(self) -> None:
        store, writer = self.open(), self.open()
        before = self.drain(store, "read_new")
        view = store.view()
        if not isinstance(view, EvidenceStore):
            self.fail("view", f"returned {type(view).__name__}, not an EvidenceStore")
        records = self.records(self.key("view"), 10)
        self.append(writer, records, "append")
        clause = "view() reads the same evidence from its own place"
        self.once_each(clause, self.drain(store, clause), records)
        seen = {r.id for r in before}
        got = [r for r in self.drain(view, clause) if r.id not in seen]
        self.once_each(clause, [r for r in got if r.key == records[0].key], records)

    def check_concurrent_appends(self) -> None:
        reader = self.open()
        self.drain(reader, "read_new")
        shared = self.key("concurrent")
        batches = [
            [self.records(shared, 5) + self.records(self.key(f"concurrent-{w}"), 5)
             for _ in range(20)]
            for w in range(2)
        ]  # fmt: skip
        writers, start = [self.open(), self.open()], threading.Barrier(2)

        def write(w: int) -> None:
            start.wait(timeout=60)
            for batch in batches[w]:
                writers[w].append(batch)

        with ThreadPoolExecutor(2) as pool:
            done = [pool.submit(write, w) for w in range(2)]
        clause = "two store objects appending at once lose nothing"
        for error in (f.exception() for f in done):
            if error is not None:
                self.fail(clause, f"an append raised {error!r}")
        records = [r for w in batches for b in w for r in b]
        fresh = self.open()
        for key in {r.key for r in records}:
            want = sorted((r for r in records if r.key == key), key=lambda r: r.order)
            self.same(clause, fresh.load(key), want)
        self.once_each(clause, self.drain(reader, clause), records)

    def check_large_batches(self) -> None:
        reader, writer = self.open(), self.open()
        self.drain(reader, "read_new")
        big = self.records(self.key("large"), LARGE)
        many = [r for i in range(MANY_KEYS) for r in self.records(self.key(f"k{i:05d}"), 1)]
        clause = f"a batch of {LARGE + MANY_KEYS} records under {MANY_KEYS + 1} keys is kept whole"
        self.append(writer, big + many, clause)
        fresh = self.open()
        self.same(clause, fresh.load(big[0].key), big)
        missing = {r.key for r in many} - set(fresh.keys())
        if missing:
            self.fail(clause, f"keys() misses {len(missing)} keys, e.g. {min(missing)!r}")
        self.once_each(clause, self.drain(reader, clause), big + many)

    def check_records(self) -> None:
        clause = "records() returns every record once"
        self.once_each(clause, [r for r in self.open().records() if r.key in self.keys],
                       self.appended)  # fmt: skip

    def check_lost(self, lose: Callable[[], None]) -> None:
        reader, writer = self.open(), self.open()
        self.drain(reader, "read_new")
        lose()
        clause = "a store lost while being read says so once and starts again (fail closed)"
        try:
            after = self.drain(reader, clause)
        except Exception as e:  # noqa: BLE001 - reported as the clause that failed
            self.fail(clause, f"read_new raised {e!r}")
        if after:
            self.fail(clause, f"read_new returned {len(after)} records of the lost store")
        why = reader.pop_lost()
        if not isinstance(why, str) or not why:
            self.fail(clause, f"pop_lost() returned {why!r}, not why the store was lost")
        if reader.pop_lost() is not None:
            self.fail(clause, "pop_lost() said so twice")
        records = self.records(self.key("after-loss"), 4)
        self.append(writer, records, clause)
        self.once_each(clause, self.drain(reader, clause), records)


def _difference(got: list[str], want: list[str]) -> str:
    from collections import Counter

    got_set, want_set = set(got), set(want)
    missing = [i for i in want if i not in got_set]
    extra = [i for i in got if i not in want_set]
    twice = sorted(i for i, n in Counter(got).items() if n > 1)
    if missing:
        return f"{len(missing)} of {len(want)} records missing (e.g. id {missing[0]})"
    if extra:
        return f"{len(extra)} records that were not appended (e.g. id {extra[0]})"
    if twice:
        return f"{len(twice)} records returned more than once (e.g. id {twice[0]})"
    first = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
    return f"out of order: position {first} holds id {got[first]}, expected {want[first]}"
