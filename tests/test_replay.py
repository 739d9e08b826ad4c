import pytest

import agentbranch as ab
from agentbranch.replay import ReplayMissError, cassette_reader

QUESTIONS = {"team": ab.choice("Which team?", ["billing", "outage"]), "urgent": ab.yes_no("?")}


def test_record_then_replay_gives_identical_decisions(tmp_path):
    path = tmp_path / "run.jsonl"
    live = ab.ScriptedReader({"team": {"billing": 0.3, "outage": 0.7}})
    recorded = ab.DecisionEngine(cassette_reader(path, live)).decide("site down", QUESTIONS)
    replay = cassette_reader(path)
    replayed = ab.DecisionEngine(replay).decide("site down", QUESTIONS)
    assert replay.name == "replay:scripted"
    for qid in QUESTIONS:
        assert replayed[qid].probabilities == recorded[qid].probabilities
    assert len(live.calls) == 1  # replay never touched the live reader


def test_replay_miss_is_loud(tmp_path):
    path = tmp_path / "run.jsonl"
    ab.DecisionEngine(cassette_reader(path, ab.ScriptedReader())).decide("a", QUESTIONS)
    with pytest.raises(ReplayMissError, match="re-record"):
        ab.DecisionEngine(cassette_reader(path)).decide("a different state", QUESTIONS)


def test_missing_cassette_needs_a_reader(tmp_path):
    with pytest.raises(ab.ConfigurationError):
        cassette_reader(tmp_path / "none.jsonl")


def test_pytest_fixture_records_then_replays(pytester):
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        """
        import agentbranch as ab

        def test_it(decision_cassette):
            reader = decision_cassette(lambda: ab.ScriptedReader({"u": {"yes": 0.8, "no": 0.2}}))
            d = ab.DecisionEngine(reader).decide("x", {"u": ab.yes_no("?")})
            assert d["u"].label == "yes"
        """
    )
    first = pytester.runpytest("-p", "agentbranch.replay.pytest_plugin")
    first.assert_outcomes(passed=1)
    assert (pytester.path / "cassettes" / "test_it.jsonl").exists()
    second = pytester.runpytest("-p", "agentbranch.replay.pytest_plugin")
    second.assert_outcomes(passed=1)


def test_a_whole_agent_run_replays_offline_from_its_cassette(tmp_path, tiny_model_dir):
    """Record the support-triage graph on the real (tiny) model, then replay it with no
    model at all: every route, label and probability comes back the same."""
    from agentbranch.demo.triage import SAMPLE_TICKETS, build_triage_graph

    def run(reader):
        graph = build_triage_graph(ab.DecisionEngine(reader))
        return [graph.invoke({"ticket": t}) for t in SAMPLE_TICKETS]

    def comparable(state):
        records = {
            qid: {k: v for k, v in rec.items() if k not in ("latency_s", "reader")}
            for qid, rec in state["decisions"].items()
        }
        return {**state, "decisions": records}

    path = tmp_path / "triage.jsonl"
    live = run(cassette_reader(path, ab.TransformersReader.from_pretrained(tiny_model_dir)))
    replayed = run(cassette_reader(path))
    assert [comparable(s) for s in replayed] == [comparable(s) for s in live]
    assert {r["reader"] for s in replayed for r in s["decisions"].values()} == {
        "replay:transformers"
    }
