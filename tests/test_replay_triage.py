"""Whole agent runs replay offline: the support-triage graph on the tiny DiffusionGemma,
with a ``Generate`` fallback, recorded once and replayed with no reader and a chat model
that cannot answer."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from typer.testing import CliRunner

import agentbranch as ab
from agentbranch.cli import app
from agentbranch.demo.triage import SAMPLE_TICKETS, TEAMS, build_triage_graph, default_policy
from agentbranch.policy import GotoNode, MoreDraws, Policy
from agentbranch.replay import Cassette, ReplayMissError

TEAM_NAMES = list(TEAMS)


def chat_model(replies: list[str] | None = None) -> GenericFakeChatModel:
    """A chat model answering ``replies`` in order; with none, any call fails (offline)."""
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies or []]))


def comparable(state: dict) -> dict:
    """A final state without what differs between a live and a replayed run by design."""
    records = {
        qid: {k: v for k, v in rec.items() if k not in ("latency_s", "reader")}
        for qid, rec in state["decisions"].items()
    }
    return {**state, "decisions": records}


def run(engine, model=None, *, take_at: float = 0.5) -> list[dict]:
    policy = default_policy(model, take_at=take_at) if model is not None else None
    graph = build_triage_graph(engine, policy=policy)
    return [graph.invoke({"ticket": t}) for t in SAMPLE_TICKETS]


@pytest.fixture(scope="module")
def tiny_reader(tiny_model_dir):
    reader = ab.TransformersReader.from_pretrained(tiny_model_dir)
    yield reader
    reader.close()


def test_triage_with_generate_fallback_replays_offline(tmp_path, tiny_reader):
    path = tmp_path / "triage.jsonl"
    replies = [json.dumps({"label": TEAM_NAMES[i % 5]}) for i in range(len(SAMPLE_TICKETS))]
    with Cassette(path, "new") as cassette:
        live = run(ab.DecisionEngine(cassette.reader(tiny_reader)), chat_model(replies))
    fallbacks = [s for s in live if s["decisions"]["team"]["decided_by"] == "fallback"]
    assert fallbacks, "the tiny model's team answers should be uncertain enough to fall back"

    offline = chat_model()  # no replies: calling it raises
    with pytest.raises(StopIteration):
        offline.invoke("hello")
    with Cassette(path, "none") as cassette:
        replayed = run(ab.DecisionEngine(cassette.reader()), offline)  # no reader at all
        assert cassette.stale() == [] and cassette.misses == []

    assert [comparable(s) for s in replayed] == [comparable(s) for s in live]
    assert [s["queue"] for s in replayed] == [s["queue"] for s in live]
    assert [s["decisions"]["team"].get("fallback") for s in replayed] == [
        s["decisions"]["team"].get("fallback") for s in live
    ]
    assert {r["reader"] for s in replayed for r in s["decisions"].values()} == {
        "replay:transformers"
    }
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["agentbranch_cassette"] == 2
    readers = {e["id"]: e for e in lines if e.get("kind") == "reader"}
    assert readers["reader-1"]["name"] == "transformers"
    assert sum(line.get("kind") == "chat" for line in lines) == len(fallbacks)


def test_a_threshold_change_replays_with_the_new_band(tmp_path, tiny_reader):
    path = tmp_path / "triage.jsonl"
    with Cassette(path, "new") as cassette:
        taken = run(ab.DecisionEngine(cassette.reader(tiny_reader)), chat_model(), take_at=0.0)
    assert {s["decisions"]["team"]["band"] for s in taken} == {"take"}

    # The same cassette, a stricter threshold: the stored log-probabilities give the same
    # confidences, now below take_at, so every team goes to the human_triage fallback.
    with Cassette(path, "none") as cassette:
        policy = {"team": Policy(take_at=0.99, fallbacks=[GotoNode("human_triage")]), "*": Policy()}
        graph = build_triage_graph(ab.DecisionEngine(cassette.reader()), policy=policy)
        strict = [graph.invoke({"ticket": t}) for t in SAMPLE_TICKETS]
    for before, after in zip(taken, strict):
        assert after["decisions"]["team"]["band"] == "fallback"
        assert after["queue"] == "human_triage"
        assert after["decisions"]["team"]["confidence"] == before["decisions"]["team"]["confidence"]

    # A calibration change too: the temperature applies to the stored reads.
    with Cassette(path, "none") as cassette:
        hot = ab.DecisionEngine(
            cassette.reader(), calibration=ab.Calibration(temperatures={"team": 4.0})
        )
        from agentbranch.demo.triage import TRIAGE_QUESTIONS

        d = hot.decide(SAMPLE_TICKETS[0], TRIAGE_QUESTIONS)["team"]
    assert d.calibrated
    assert d.confidence < taken[0]["decisions"]["team"]["confidence"]


def build_team_question():
    from agentbranch.demo.triage import TRIAGE_QUESTIONS

    return TRIAGE_QUESTIONS["team"]


def test_two_engines_and_a_chat_model_share_one_cassette(tmp_path, tiny_model_dir, tiny_reader):
    """MoreDraws(engine=e2) reads through a second reader (another model); both readers'
    reads and the chat model's replies live in one cassette, keyed apart."""
    path = tmp_path / "run.jsonl"
    question = {"team": build_team_question()}

    def graph_for(cassette, model, make_second):
        e1 = ab.DecisionEngine(cassette.reader(tiny_reader))
        e2 = ab.DecisionEngine(cassette.reader(make_second, id="second-opinion"))
        policy = Policy(take_at=0.99, fallbacks=[MoreDraws(draws=1, engine=e2), ab.Generate(model)])
        from agentbranch.langgraph import decide_node

        return decide_node(e1, question, policy=policy, state_key="ticket")

    built: list[str] = []

    def second():
        built.append("second")
        return ab.TransformersReader.from_pretrained(ab_testing_model(seed=1))

    replies = [json.dumps({"label": "bug"}), json.dumps({"label": "billing"})]
    with Cassette(path, "new") as cassette:
        node = graph_for(cassette, chat_model(replies), second)
        live = [node.invoke({"ticket": t})["decisions"]["team"] for t in SAMPLE_TICKETS[:2]]
    assert built == ["second"]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    readers = {e["id"]: e for e in lines if e.get("kind") == "reader"}
    assert set(readers) == {"reader-1", "second-opinion"}
    assert readers["reader-1"]["model"] != readers["second-opinion"]["model"]

    with Cassette(path, "none") as cassette:
        node = graph_for(cassette, chat_model(), second)
        replayed = [node.invoke({"ticket": t})["decisions"]["team"] for t in SAMPLE_TICKETS[:2]]
    assert built == ["second"]  # the second model was not built again
    strip = lambda r: {k: v for k, v in r.items() if k not in ("latency_s", "reader")}  # noqa: E731
    assert [strip(r) for r in replayed] == [strip(r) for r in live]
    assert [r["label"] for r in replayed] == ["bug", "billing"]


def ab_testing_model(seed: int):
    from agentbranch.testing import tiny_diffusiongemma

    return tiny_diffusiongemma(seed=seed)


def test_none_mode_miss_shows_the_field_diff(tmp_path, tiny_reader):
    path = tmp_path / "triage.jsonl"
    with Cassette(path, "new") as cassette:
        run(ab.DecisionEngine(cassette.reader(tiny_reader)))
    from agentbranch.demo.triage import TRIAGE_QUESTIONS

    reworded = dict(TRIAGE_QUESTIONS)
    reworded["team"] = ab.choice("Which team owns this ticket?", TEAMS)
    with Cassette(path, "none") as cassette:
        engine = ab.DecisionEngine(cassette.reader())
        with pytest.raises(ReplayMissError) as err:
            engine.decide(SAMPLE_TICKETS[2], reworded)
    message = str(err.value)
    assert "differs in: question text (team)" in message
    assert "- Which team should handle this support ticket?" in message
    assert "+ Which team owns this ticket?" in message
    assert "state:" not in message  # the state is the same ticket


def test_diff_command_on_two_models_and_two_thresholds(tmp_path, tiny_reader):
    runner = CliRunner()
    first, second, strict = (tmp_path / n for n in ("m1.jsonl", "m2.jsonl", "strict.jsonl"))
    with Cassette(first, "new") as c:
        run(ab.DecisionEngine(c.reader(tiny_reader)), chat_model(), take_at=0.0)
    with Cassette(second, "new") as c:
        other = lambda: ab.TransformersReader.from_pretrained(ab_testing_model(seed=1))  # noqa: E731
        run(ab.DecisionEngine(c.reader(other)), chat_model(), take_at=0.0)

    result = runner.invoke(app, ["replay", "diff", str(first), str(second), "--json"])
    report = json.loads(result.stdout)
    assert report["summary"]["decisions"] == 3 * len(SAMPLE_TICKETS)
    assert report["summary"]["added"] == report["summary"]["removed"] == 0
    flipped = report["summary"]["flipped_decisions"]
    assert result.exit_code == (1 if flipped else 0)
    assert flipped > 0, "two random models should disagree somewhere"
    assert report["old_models"]["reader-1"] != report["new_models"]["reader-1"]
    shown = runner.invoke(app, ["replay", "diff", str(first), str(second)])
    assert shown.exit_code == 1 and "FLIP" in shown.stdout and "flipped" in shown.stdout

    # Same model, another threshold: the reads agree, but the run now falls back to the
    # chat model for uncertain teams — new requests, so the gate fails too.
    replies = [json.dumps({"label": "bug"})] * len(SAMPLE_TICKETS)
    with Cassette(strict, "new") as c:
        run(ab.DecisionEngine(c.reader(tiny_reader)), chat_model(replies), take_at=0.5)
    result = runner.invoke(app, ["replay", "diff", str(first), str(strict), "--json"])
    report = json.loads(result.stdout)
    assert report["summary"]["flipped_decisions"] == 0
    assert report["summary"]["added"] > 0 and report["summary"]["removed"] == 0
    assert all(a.startswith("chat generic-fake-chat-model") for a in report["added"])
    assert result.exit_code == 1

    same = runner.invoke(app, ["replay", "diff", str(first), str(first)])
    assert same.exit_code == 0 and "0 flipped" in same.stdout
