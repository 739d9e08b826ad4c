"""The pytest plugin, run as a user's test suite would run it (pytester)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

PLUGIN = ("-p", "agentbranch.replay.pytest_plugin")

TWO_READERS_AND_A_CHAT_MODEL = """
import json
import agentbranch as ab
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

Q = {"team": ab.choice("Which team?", ["billing", "outage"])}

def test_run(decision_cassette):
    first = ab.DecisionEngine(decision_cassette.reader(
        lambda: ab.ScriptedReader({"team": {"billing": 0.55, "outage": 0.45}})))
    second = ab.DecisionEngine(decision_cassette.reader(
        lambda: ab.ScriptedReader({"team": {"billing": 0.1, "outage": 0.9}}, model="big")))
    model = GenericFakeChatModel(messages=iter([AIMessage('{"label": "outage"}')] * 5))
    policy = ab.Policy(take_at=0.4, fallbacks=[ab.MoreDraws(draws=1, engine=second),
                                               ab.Generate(decision_cassette.chat_model(model))])
    from agentbranch.policy import Resolver
    records = Resolver(first, Q, policy).resolve("The site is down")
    assert records["team"]["label"] == "outage"
    assert records["team"]["fallback"] == {"kind": "more_draws", "draws": 1}
    drafted = decision_cassette.chat_model(
        GenericFakeChatModel(messages=iter([AIMessage("We are on it.")]))).invoke("Draft a reply")
    assert drafted.content == "We are on it."
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def test_the_entry_point_names_the_plugin_module():
    meta = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    entry = meta["project"]["entry-points"]["pytest11"]
    # Named by its module: `-p agentbranch.replay.pytest_plugin` then finds it registered.
    assert entry == {"agentbranch.replay.pytest_plugin": "agentbranch.replay.pytest_plugin"}
    import agentbranch.replay.pytest_plugin as plugin

    assert callable(plugin.pytest_addoption) and hasattr(plugin, "decision_cassette")
    from agentbranch.replay.modes import MODES

    assert plugin.MODES == MODES


def test_fixture_records_then_replays_two_readers_and_a_chat_model(suite):
    suite.makepyfile(test_run=TWO_READERS_AND_A_CHAT_MODEL)
    suite.runpytest(*PLUGIN).assert_outcomes(passed=1)
    path = suite.path / "cassettes" / "test_run.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {e["id"] for e in lines if e.get("kind") == "reader"} == {"reader-1", "reader-2"}
    assert [e["kind"] for e in lines[1:]].count("read") == 2
    assert [e["kind"] for e in lines[1:]].count("chat") == 1  # the drafting node

    # Replay only: nothing live (the fakes would be rebuilt, but never asked).
    replay = suite.runpytest(*PLUGIN, "--agentbranch-record=none")
    replay.assert_outcomes(passed=1)
    assert "agentbranch decision cassettes" not in replay.stdout.str()  # no misses, no stale

    # Re-recording keeps every reader's reads (it used to delete the first one's).
    suite.runpytest(*PLUGIN, "--agentbranch-record=all").assert_outcomes(passed=1)
    again = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e.get("kind") for e in again] == [e.get("kind") for e in lines]
    suite.runpytest(*PLUGIN, "--agentbranch-record=none").assert_outcomes(passed=1)


def test_ci_replays_only_and_a_missing_cassette_fails(suite, monkeypatch):
    suite.makepyfile(test_run=TWO_READERS_AND_A_CHAT_MODEL)
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*ReplayMissError*no read for this request of reader 'reader-1'*"])
    result.stdout.fnmatch_lines(["*agentbranch decision cassettes*", "misses (1):*"])
    assert not (suite.path / "cassettes" / "test_run.jsonl").exists()


def test_marker_names_and_shares_a_cassette(suite):
    suite.makepyfile(
        test_shared="""
        import pytest
        import agentbranch as ab

        pytestmark = pytest.mark.decision_cassette("shared")
        Q = {"u": ab.yes_no("Urgent?")}

        def make():
            return ab.ScriptedReader({"u": {"yes": 0.8, "no": 0.2}})

        def test_a(decision_cassette):
            assert decision_cassette.path.name == "shared.jsonl"
            ab.DecisionEngine(decision_cassette.reader(make)).decide("a", Q)

        def test_b(decision_cassette):
            ab.DecisionEngine(decision_cassette.reader(make)).decide("b", Q)
        """
    )
    suite.runpytest(*PLUGIN).assert_outcomes(passed=2)
    assert sorted(p.name for p in (suite.path / "cassettes").iterdir()) == ["shared.jsonl"]
    # header, one reader declaration, two reads (no lock file left behind)
    assert len((suite.path / "cassettes" / "shared.jsonl").read_text().splitlines()) == 4
    suite.runpytest(*PLUGIN, "--agentbranch-record=none").assert_outcomes(passed=2)


def test_summary_lists_stale_entries_and_misses(suite):
    suite.makepyfile(
        test_it="""
        import agentbranch as ab
        Q = {"u": ab.yes_no("Urgent?")}

        def test_it(decision_cassette):
            engine = ab.DecisionEngine(decision_cassette.reader(ab.ScriptedReader))
            for state in STATES:
                engine.decide(state, Q)

        STATES = ["server down", "refund please", "hello"]
        """
    )
    _recorded_then_missed(
        suite.runpytest,
        suite,
        ('["server down", "refund please", "hello"]', '["server down", "hi"]'),
        "  cassettes/test_it.jsonl: read of reader-1 'hi' ['u'] — differs in state",
    )
    result = suite.runpytest(*PLUGIN, "--agentbranch-record=new")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "stale entries, never played (2); re-record with --agentbranch-record=all to drop them:",
            "  cassettes/test_it.jsonl:4: read reader-1 'refund please' ['u']",
            "  cassettes/test_it.jsonl:5: read reader-1 'hello' ['u']",
        ]
    )
    suite.runpytest(*PLUGIN, "--agentbranch-record=all").assert_outcomes(passed=1)
    result = suite.runpytest(*PLUGIN, "--agentbranch-record=none")
    result.assert_outcomes(passed=1)
    assert "stale entries" not in result.stdout.str()


def test_an_old_format_cassette_loads_under_the_plugin(suite):
    suite.makepyfile(
        test_old="""
        import agentbranch as ab

        def test_old(decision_cassette):
            reader = decision_cassette.reader()
            d = ab.DecisionEngine(reader).decide("x", {"u": ab.yes_no("?")})
            assert (reader.name, d["u"].label) == ("replay:scripted", "yes")
        """
    )
    import agentbranch as ab
    from agentbranch.replay import request_key

    request = ab.DecisionEngine(ab.ScriptedReader())._prepare("x", {"u": ab.yes_no("?")}, 1).request
    old = {
        "key": request_key(request),
        "reader": "scripted",
        "model": "scripted",
        "state": "x",
        "questions": ["u"],
        "reads": [
            {"logprobs": [-0.2, -1.7], "label_mass": 1.0, "argmax_is_label": True, "agreement": 1.0}
        ],
    }
    (suite.path / "cassettes").mkdir()
    (suite.path / "cassettes" / "test_old.jsonl").write_text(json.dumps(old) + "\n")
    suite.runpytest(*PLUGIN, "--agentbranch-record=none").assert_outcomes(passed=1)

    (suite.path / "cassettes" / "test_old.jsonl").write_text("[1]\n")
    result = suite.runpytest(*PLUGIN, "--agentbranch-record=none")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*CassetteFormatError*test_old.jsonl:1: expected a JSON object*"])


def test_xdist_workers_share_one_recording_id(suite):
    """Under pytest-xdist every worker gets the run's ``testrunuid``: the plugin makes it
    the cassettes' recording id, so workers re-recording one cassette (mode ``all``) join
    the file instead of each starting it afresh."""
    suite.makeconftest(
        """
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_configure(config):
            config.workerinput = {"workerid": "gw0", "testrunuid": "run-7f3a"}
        """
    )
    suite.makepyfile(
        test_w="""
        import pytest
        import agentbranch as ab

        @pytest.mark.decision_cassette("shared")
        def test_w(decision_cassette):
            assert decision_cassette.recording == "run-7f3a"
            reader = decision_cassette.reader(lambda: ab.ScriptedReader())
            ab.DecisionEngine(reader).decide("a", {"u": ab.yes_no("?")})
        """
    )
    suite.runpytest(*PLUGIN, "--agentbranch-record=all").assert_outcomes(passed=1)
    path = suite.path / "cassettes" / "shared.jsonl"
    assert json.loads(path.read_text().splitlines()[0])["recording"] == "run-7f3a"
    # A second worker of the same run (another process, another test) joins the file
    # instead of wiping the first one's read.
    test = suite.path / "test_w.py"
    test.write_text(test.read_text().replace('decide("a"', 'decide("b"'))
    suite.runpytest(*PLUGIN, "--agentbranch-record=all").assert_outcomes(passed=1)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["request"]["state"] for e in lines if e.get("kind") == "read"] == ["a", "b"]


def test_summary_lists_a_learning_questions_miss_with_what_changed(suite):
    """Issue 61: under ``Earned(learn=True)`` a changed state misses on the decision's
    version; the end-of-session summary lists it as it lists a read miss. (In a
    subprocess: numpy cannot be imported twice in one process.)"""
    suite.makepyfile(
        test_it="""
        import agentbranch as ab
        from langchain_core.language_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage
        from agentbranch.policy import Earned, Generate, Policy, Resolver

        Q = {"u": ab.yes_no("Urgent?")}

        def test_it(decision_cassette):
            engine = ab.DecisionEngine(decision_cassette.reader(
                lambda: ab.ScriptedReader({"u": {"yes": 0.55, "no": 0.45}})))
            teacher = GenericFakeChatModel(messages=iter([AIMessage('{"label": "yes"}')] * 9))
            earned = Earned(precision=0.9, learn=True)
            earned.learner.background = False
            policy = Policy(take_at=earned,
                            fallbacks=[Generate(decision_cassette.chat_model(teacher))])
            for state in STATES:
                Resolver(engine, Q, policy).resolve(state)

        STATES = ["server down", "refund please"]
        """
    )
    _recorded_then_missed(
        suite.runpytest_subprocess,
        suite,
        ('["server down", "refund please"]', '["server down", "refund now"]'),
        "  cassettes/test_it.jsonl: version of 'u' for 'refund now' — differs in state",
    )


def _recorded_then_missed(run, suite, edit: tuple[str, str], miss: str) -> None:
    """``run`` (pytester's ``runpytest`` or ``runpytest_subprocess``) records the suite's
    test_it.py; with ``edit`` (old, new) made in it, a replay (mode ``none``) fails and
    the session's summary lists the one miss ``miss``."""
    run(*PLUGIN).assert_outcomes(passed=1)
    test = suite.path / "test_it.py"
    test.write_text(test.read_text().replace(*edit))
    result = run(*PLUGIN, "--agentbranch-record=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*agentbranch decision cassettes*", "misses (1):", miss])
