"""pytest plugin: a ``decision_cassette`` fixture per test.

    def test_triage(decision_cassette):
        reader = decision_cassette(lambda: TransformersReader.from_pretrained(path))
        engine = DecisionEngine(reader)

Replays ``<test dir>/cassettes/<test name>.jsonl``; ``pytest --agentbranch-record``
(or a missing cassette) records through the real reader the factory builds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentbranch.engine.readers.base import Reader
from agentbranch.replay import cassette_reader


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--agentbranch-record",
        action="store_true",
        default=False,
        help="re-record agentbranch decision cassettes through the real reader",
    )


@pytest.fixture
def decision_cassette(request: pytest.FixtureRequest) -> Iterator[Callable[..., Reader]]:
    """A function ``(make_reader) -> Reader`` that replays this test's cassette."""
    name = re.sub(r"[^\w.-]+", "_", request.node.name)
    path = Path(request.node.path).parent / "cassettes" / f"{name}.jsonl"
    record = request.config.getoption("--agentbranch-record")
    opened: list[Reader] = []

    def make(make_reader: Callable[[], Reader] | None = None) -> Reader:
        if record or not path.exists():
            if make_reader is None:
                raise pytest.UsageError(f"no cassette at {path} and no reader to record with")
            reader = cassette_reader(path, make_reader(), mode="record")
        else:
            reader = cassette_reader(path, mode="replay")
        opened.append(reader)
        return reader

    yield make
    for reader in opened:
        reader.close()
