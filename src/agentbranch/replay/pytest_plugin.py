"""pytest plugin (entry point ``pytest11``): one decision cassette per test (the
``decision_cassette`` fixture, its marker, ``--agentbranch-record=MODE``; docs/replay.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "MODES",
    "decision_cassette",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_makereport",
    "pytest_terminal_summary",
]

# agentbranch.replay.modes.MODES, repeated so that loading the plugin in every pytest
# session imports nothing but pytest.
MODES = ("all", "new", "none", "passthrough")


@dataclass
class _Session:
    mode: str | None
    #: One id for the whole test run: pytest-xdist's workers re-recording (mode ``all``)
    #: one cassette share it instead of each starting the file afresh.
    recording: str | None = None
    cassettes: dict[Path, Any] = field(default_factory=dict)
    #: The tests that used each cassette.
    tests: dict[Path, list[str]] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)

    def open(self, path: Path, nodeid: str) -> Any:
        from agentbranch.replay.cassette import Cassette

        if path not in self.cassettes:
            self.cassettes[path] = Cassette(path, self.mode, recording=self.recording)
        self.tests.setdefault(path, []).append(nodeid)
        self.cassettes[path]._begin_test()
        return self.cassettes[path]


_SESSION = pytest.StashKey[_Session]()
_CALL_FAILED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentbranch", "agentbranch decision cassettes")
    group.addoption(
        "--agentbranch-record",
        choices=MODES,
        default=None,
        metavar="MODE",
        help="record mode of decision cassettes: all (re-record), new (record misses), "
        "none (replay only), passthrough (live). Default: none when CI is set, else new.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "decision_cassette(name): the decision cassette this test uses "
        "(cassettes/<name>.jsonl next to the test file; tests with one name share it)",
    )
    workerinput = getattr(config, "workerinput", None) or {}  # set in pytest-xdist workers
    config.stash[_SESSION] = _Session(
        config.getoption("--agentbranch-record", None), workerinput.get("testrunuid")
    )


def _cassette_path(request: pytest.FixtureRequest) -> Path:
    marker = request.node.get_closest_marker("decision_cassette")
    if marker is not None:
        if len(marker.args) != 1 or not isinstance(marker.args[0], str):
            raise pytest.UsageError(
                f"{request.node.nodeid}: use @pytest.mark.decision_cassette('name')"
            )
        name = marker.args[0]
    else:
        name = re.sub(r"[^\w.-]+", "_", request.node.name)
    if not name.endswith(".jsonl"):
        name += ".jsonl"
    return Path(request.node.path).parent / "cassettes" / name


@pytest.fixture
def decision_cassette(request: pytest.FixtureRequest) -> Iterator[Any]:
    """This test's ``agentbranch.replay.Cassette`` on ``<test file dir>/cassettes/<test
    name>.jsonl`` (``@pytest.mark.decision_cassette("name")``: ``cassettes/name.jsonl``,
    shared by the tests that name it). ``--agentbranch-record=MODE`` sets the record
    mode; the terminal summary lists misses and stale entries. A test whose audits
    missed fails at teardown.
    """
    session = request.config.stash[_SESSION]
    cassette = session.open(_cassette_path(request), request.node.nodeid)
    audit_misses = len(cassette.audit_misses)
    try:
        yield cassette
    finally:
        cassette.close()
    # An audit's teacher runs on the audit's worker thread, where a miss fails the audit,
    # never the run: fail the test here instead of letting it pass with a miss.
    missed = cassette.audit_misses[audit_misses:]
    if missed and not request.node.stash.get(_CALL_FAILED, False):
        pytest.fail(
            f"the cassette {_rel(cassette.path, request.config)} has no answer for "
            f"{len(missed)} audit teacher call(s) of this test (made on the audit's worker "
            f"thread, so the test itself did not fail): {'; '.join(missed)}. Record them: "
            "pytest --agentbranch-record=new, or --agentbranch-record=all",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed
    if report.failed and _SESSION in item.config.stash:
        item.config.stash[_SESSION].failed.add(item.nodeid)
    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is None or not session.cassettes:
        return
    misses, stale, unchecked = [], [], []
    for path, cassette in session.cassettes.items():
        where = _rel(path, config)
        misses += [f"{where}: {m}" for m in cassette.misses]
        if cassette.mode not in ("new", "none"):
            continue
        if any(t in session.failed for t in session.tests[path]):
            unchecked.append(where)
            continue
        for e in cassette.stale():
            who = e.get("reader") or e.get("model")
            stale.append(f"{where}:{e['line']}: {e['kind']} {who} {e['summary']}")
    if not (misses or stale):
        return
    tr = terminalreporter
    tr.write_sep("=", "agentbranch decision cassettes")
    if misses:
        tr.write_line(f"misses ({len(misses)}):")
        for m in misses:
            tr.write_line(f"  {m}")
    if stale:
        tr.write_line(
            f"stale entries, never played ({len(stale)}); re-record with "
            "--agentbranch-record=all to drop them:"
        )
        for s in stale:
            tr.write_line(f"  {s}")
    if unchecked:
        tr.write_line(f"not checked for stale entries (a test using them failed): {unchecked}")


def _rel(path: Path, config: pytest.Config) -> str:
    try:
        return os.path.relpath(path, config.rootpath)
    except ValueError:  # another drive (Windows)
        return str(path)
