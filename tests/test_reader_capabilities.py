"""What a reader can do is declared on ``Reader`` with defaults, never probed.

The reading settings a reader does not declare still count (a threshold earned on one
confidence scale must not carry over to another), the coalescer takes its defaults
from the declared attributes, and the engine refuses what is not a ``Reader``.
"""

from __future__ import annotations

import threading

import pytest

import agentbranch as ab
from agentbranch.core.errors import ConfigurationError
from agentbranch.engine.batching import BatchingReader
from agentbranch.engine.engine import reader_settings
from agentbranch.engine.readers.base import Reader

URGENT = {"urgent": ab.choice("Is this urgent?", ["yes", "no"])}


class Sharp(ab.ScriptedReader):
    """A reader of one's own with a confidence setting nobody listed anywhere."""

    def __init__(self, *, sharpness: float = 1.0, lock: object = None, **kw):
        super().__init__({"urgent": {"yes": 0.7, "no": 0.3}}, **kw)
        self.sharpness = sharpness
        self.lock = lock


def test_an_undeclared_setting_changes_the_reading_so_earned_trust_starts_again():
    plain = ab.DecisionEngine(Sharp()).decide("s", URGENT)["urgent"]
    sharp = ab.DecisionEngine(Sharp(sharpness=2.0)).decide("s", URGENT)["urgent"]
    assert plain.reading is None  # the defaults keep the keys of earlier releases
    assert sharp.reading is not None and sharp.reading != plain.reading
    assert reader_settings(Sharp(sharpness=2.0)) == {"sharpness": 2.0}


def test_reading_ignores_leaves_a_setting_out():
    class Quiet(Sharp):
        reading_ignores = (*Sharp.reading_ignores, "sharpness")

    assert reader_settings(Quiet(sharpness=2.0)) == {}
    assert ab.DecisionEngine(Quiet(sharpness=2.0)).decide("s", URGENT)["urgent"].reading is None


def test_a_setting_that_is_no_plain_data_counts_by_its_type_the_same_in_every_process():
    one, other = (
        reader_settings(Sharp(lock=threading.Lock())),
        reader_settings(Sharp(lock=threading.Lock())),
    )
    assert one == other and list(one) == ["lock"]
    assert "0x" not in one["lock"]  # no memory address: the same across processes


def test_a_wrapper_reads_with_the_settings_of_the_reader_it_wraps():
    wrapped = BatchingReader(Sharp(sharpness=3.0))
    try:
        assert reader_settings(wrapped) == {"sharpness": 3.0}
    finally:
        wrapped.close()


def test_the_built_in_readers_keep_their_fingerprints():
    from agentbranch.engine.readers.embedded.reader import EmbeddedReader
    from agentbranch.engine.readers.remote.reader import RemoteReader

    assert reader_settings(ab.ScriptedReader({"a": {"x": 1.0}}, model="m", delay_s=0.1)) == {}
    assert reader_settings(EmbeddedReader(batch_size=8, device="cpu")) == {}
    assert reader_settings(EmbeddedReader(top_k=5)) == {"top_k": 5}
    remote = RemoteReader("http://127.0.0.1:9", timeout_s=3.0, max_connections=3)
    try:
        assert reader_settings(remote) == {}
    finally:
        remote.close()


class Declares(ab.ScriptedReader):
    coalesce_wait_s = 0.0
    concurrent_batches = 3


def test_the_coalescer_takes_the_readers_declared_defaults():
    plain, declared = BatchingReader(ab.ScriptedReader()), BatchingReader(Declares())
    try:
        assert (plain.max_wait_s, plain.concurrency) == (0.002, 1)
        assert (declared.max_wait_s, declared.concurrency) == (0.0, 3)
    finally:
        plain.close()
        declared.close()


def test_the_base_defaults_say_a_reader_can_do_nothing_more():
    reader = ab.ScriptedReader()
    assert reader.unrecorded() is reader
    assert reader.embed is None and reader.written_scores is None
    assert reader.teacher_calls is None and reader.cassette is None
    assert list(reader.chain()) == [reader]
    engine = ab.DecisionEngine(reader)
    assert engine.unrecorded() is engine and engine.teacher_calls is None


class DuckReader:
    """Has ``read`` and ``aread`` but is no ``Reader``."""

    name, model, max_options = "duck", "duck", 26

    def read(self, requests):
        return [[] for _ in requests]

    async def aread(self, requests):
        return self.read(requests)


@pytest.mark.parametrize("build", [ab.DecisionEngine, BatchingReader])
def test_a_duck_typed_reader_is_refused_with_how_to_fix_it(build):
    with pytest.raises(ConfigurationError, match=r"subclasses agentbranch\.Reader"):
        build(DuckReader())
    assert ab.Reader is Reader


def test_a_reader_that_cannot_generate_gives_no_chat_model_and_says_what_to_use():
    reader = ab.ScriptedReader()
    assert reader.generator() is None
    with pytest.raises(ConfigurationError, match=r"cannot generate; use a VLLMReader"):
        ab.LocalChatModel.on(reader, max_tokens=8)


def test_the_decision_engine_has_everything_the_engine_protocol_names():
    from agentbranch.engine.protocol import Engine

    named = {n for n in vars(Engine) if not n.startswith("_")} | set(Engine.__annotations__)
    engine = ab.DecisionEngine(ab.ScriptedReader())
    assert {"decide", "adecide_many", "reader", "calibration", "reading_for"} <= named
    assert sorted(n for n in named if not hasattr(engine, n)) == []
