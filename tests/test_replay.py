"""Cassettes: record and replay reads and chat exchanges, modes, misses, stale entries,
format validation and pre-v1 cassettes."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

import agentbranch as ab
from agentbranch.replay import (
    Cassette,
    CassetteFormatError,
    ReplayMissError,
    cassette_reader,
    default_mode,
)

QUESTIONS = {"team": ab.choice("Which team?", ["billing", "outage"]), "urgent": ab.yes_no("?")}


def scripted():
    return ab.ScriptedReader({"team": {"billing": 0.3, "outage": 0.7}})


def fake_chat(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies]))


def test_record_then_replay_gives_identical_decisions(tmp_path):
    path = tmp_path / "run.jsonl"
    live = scripted()
    recorded = ab.DecisionEngine(cassette_reader(path, live, mode="new")).decide(
        "site down", QUESTIONS
    )
    replay = cassette_reader(path, mode="none")
    replayed = ab.DecisionEngine(replay).decide("site down", QUESTIONS)
    assert replay.name == "replay:scripted" and replay.model == "scripted"
    for qid in QUESTIONS:
        assert replayed[qid].probabilities == recorded[qid].probabilities
    assert len(live.calls) == 1  # replay never touched the live reader


def test_new_mode_records_only_misses_and_builds_the_reader_lazily(tmp_path):
    path = tmp_path / "run.jsonl"
    built = []

    def make():
        built.append(1)
        return scripted()

    ab.DecisionEngine(Cassette(path, "new").reader(make)).decide("a", QUESTIONS)
    assert built == [1]
    engine = ab.DecisionEngine(Cassette(path, "new").reader(make))
    engine.decide("a", QUESTIONS)
    assert built == [1]  # all replayed: the model was never built
    engine.decide("b", QUESTIONS)
    assert built == [1, 1]
    kinds = [json.loads(line).get("kind") for line in path.read_text().splitlines()]
    assert kinds == [None, "reader", "read", "read"]  # header, declaration, two reads


def test_all_mode_rerecords_and_passthrough_records_nothing(tmp_path):
    path = tmp_path / "run.jsonl"
    ab.DecisionEngine(Cassette(path, "new").reader(scripted())).decide("old", QUESTIONS)
    live = scripted()
    ab.DecisionEngine(Cassette(path, "all").reader(live)).decide("new", QUESTIONS)
    assert len(live.calls) == 1
    entries = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    reads = [e["request"]["state"] for e in entries if e["kind"] == "read"]
    assert reads == ["new"]  # the old read is gone

    with Cassette(path, "all"):
        pass  # a re-recorded run that asked nothing leaves an empty cassette
    assert len(path.read_text().splitlines()) == 1
    ab.DecisionEngine(Cassette(path, "new").reader(scripted())).decide("new", QUESTIONS)

    before = path.read_text()
    live = scripted()
    ab.DecisionEngine(Cassette(path, "passthrough").reader(live)).decide("other", QUESTIONS)
    assert len(live.calls) == 1 and path.read_text() == before


def test_default_mode_reads_ci_and_never_writes_it(monkeypatch):
    assert default_mode({"CI": "true"}) == "none"
    assert default_mode({"CI": "1"}) == "none"
    assert default_mode({"CI": "false"}) == "new"
    assert default_mode({}) == "new"
    monkeypatch.setenv("CI", "1")
    assert Cassette("unused.jsonl").mode == "none"
    monkeypatch.delenv("CI")
    assert Cassette("unused.jsonl").mode == "new"
    with pytest.raises(ab.ConfigurationError, match="unknown record mode 'replay'"):
        Cassette("unused.jsonl", "replay")


def test_missing_cassette_needs_a_reader(tmp_path):
    with pytest.raises(ab.ConfigurationError, match="no reader to record"):
        cassette_reader(tmp_path / "none.jsonl")
    reader = Cassette(tmp_path / "none.jsonl", "none").reader(scripted())
    with pytest.raises(ReplayMissError, match="no cassette file"):
        ab.DecisionEngine(reader).decide("a", QUESTIONS)


def test_a_miss_names_the_nearest_request_and_the_fields_that_differ(tmp_path):
    path = tmp_path / "run.jsonl"
    engine = ab.DecisionEngine(Cassette(path, "new").reader(scripted()), instructions="Be brief.")
    engine.decide("The site is down since 9am", QUESTIONS)
    engine.decide("I was charged twice", QUESTIONS)

    replay = Cassette(path, "none")
    changed = ab.DecisionEngine(replay.reader(), instructions="Be very brief.")
    moved = {
        "team": ab.choice("Which team?", ["billing", "outage", "bug"]),
        "urgent": QUESTIONS["urgent"],
    }
    with pytest.raises(ReplayMissError) as err:
        changed.decide("The site is down since 10am", moved)
    text = str(err.value)
    assert (
        "Nearest recorded request (line 3) differs in: state, instructions, options (team)" in text
    )
    assert "state: - … is down since 9am  + … is down since 10am" in text
    assert "options (team): ['billing', 'outage'] -> ['billing', 'outage', 'bug']" in text
    assert "--agentbranch-record=new" in text
    assert replay.misses and "differs in state, instructions, options (team)" in replay.misses[0]


def test_chat_exchanges_record_replay_and_miss_with_a_diff(tmp_path):
    path = tmp_path / "run.jsonl"
    recording = Cassette(path, "new")
    model = recording.chat_model(fake_chat("Sorry about the double charge."))
    assert (
        model.invoke("Draft a reply to: charged twice").content == "Sorry about the double charge."
    )
    assert model.cache is recording.chat_cache

    replay = Cassette(path, "none")
    offline = replay.chat_model(fake_chat())  # would raise if called
    assert offline.invoke("Draft a reply to: charged twice").content == (
        "Sorry about the double charge."
    )
    with pytest.raises(ReplayMissError) as err:
        offline.invoke("Draft a reply to: charged three times")
    assert "differs in: message 1 (human)" in str(err.value)
    other = replay.chat_model(fake_chat().model_copy(update={"name": "x"}))
    assert other.invoke("Draft a reply to: charged twice").content  # name is not identity

    # Another model class/config is another identity: the diff names the model.
    from langchain_core.language_models import FakeListChatModel

    with pytest.raises(ReplayMissError, match=r"differs in: model"):
        replay.chat_model(FakeListChatModel(responses=["x"])).invoke(
            "Draft a reply to: charged twice"
        )


async def test_streamed_chat_calls_record_and_replay_through_the_cassette(tmp_path):
    # LangChain's native stream() bypasses every cache: a model that streams would be
    # called live in CI. The cassette's copy streams through invoke instead.
    path = tmp_path / "run.jsonl"
    recording = Cassette(path, "new")
    chunks = list(recording.chat_model(fake_chat("We are on it.")).stream("Draft a reply"))
    assert "".join(str(c.content) for c in chunks) == "We are on it."

    replay = Cassette(path, "none")
    offline = replay.chat_model(fake_chat())  # would raise if called
    assert [c.content for c in offline.stream("Draft a reply")] == ["We are on it."]
    assert [c.content async for c in offline.astream("Draft a reply")] == ["We are on it."]
    # Recorded by invoke, replayed by stream, and back: one identity.
    assert offline.invoke("Draft a reply").content == "We are on it."
    with pytest.raises(ReplayMissError):
        list(offline.stream("Draft another reply"))

    # passthrough keeps the model's own streaming (nothing is recorded or replayed).
    live = Cassette(tmp_path / "live.jsonl", "passthrough").chat_model(fake_chat("a b c"))
    assert len(list(live.stream("x"))) > 1


async def test_async_reads_and_chat_replay(tmp_path):
    path = tmp_path / "run.jsonl"
    c = Cassette(path, "new")
    live = await ab.DecisionEngine(c.reader(scripted())).adecide("a", QUESTIONS)
    await c.chat_model(fake_chat("hi")).ainvoke("hello")
    r = Cassette(path, "none")
    again = await ab.DecisionEngine(r.reader()).adecide("a", QUESTIONS)
    assert again["team"].probabilities == live["team"].probabilities
    assert (await r.chat_model(fake_chat()).ainvoke("hello")).content == "hi"


def test_stale_entries_are_the_ones_never_played(tmp_path):
    path = tmp_path / "run.jsonl"
    c = Cassette(path, "new")
    engine = ab.DecisionEngine(c.reader(scripted()))
    for state in ("one", "two", "three"):
        engine.decide(state, QUESTIONS)
    c.chat_model(fake_chat("ok")).invoke("ping")

    r = Cassette(path, "none")
    ab.DecisionEngine(r.reader()).decide("two", QUESTIONS)
    stale = r.stale()
    assert [(e["kind"], e["line"]) for e in stale] == [("read", 3), ("read", 5), ("chat", 7)]
    assert "'one'" in stale[0]["summary"] and stale[2]["model"] == "generic-fake-chat-model"


def test_two_readers_are_keyed_apart_and_a_changed_model_is_refused(tmp_path):
    path = tmp_path / "run.jsonl"
    c = Cassette(path, "new")
    a = ab.DecisionEngine(c.reader(scripted()))
    b = ab.DecisionEngine(c.reader(ab.ScriptedReader({"team": {"billing": 0.9, "outage": 0.1}})))
    assert a.decide("x", QUESTIONS)["team"].label == "outage"
    assert b.decide("x", QUESTIONS)["team"].label == "billing"  # same request, other reader

    r = Cassette(path, "none")
    a, b = ab.DecisionEngine(r.reader()), ab.DecisionEngine(r.reader())
    assert a.decide("x", QUESTIONS)["team"].label == "outage"
    assert b.decide("x", QUESTIONS)["team"].label == "billing"

    again = Cassette(path, "new")
    engine = ab.DecisionEngine(again.reader(ab.ScriptedReader(model="another-model")))
    with pytest.raises(ab.ConfigurationError, match="recorded with scripted \\(scripted\\)"):
        engine.decide("unseen", QUESTIONS)


# -- the file -------------------------------------------------------------------------


def recorded(tmp_path) -> list[str]:
    path = tmp_path / "good.jsonl"
    c = Cassette(path, "new")
    ab.DecisionEngine(c.reader(scripted())).decide("a", QUESTIONS)
    c.chat_model(fake_chat("ok")).invoke("ping")
    return path.read_text().splitlines()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda ls: ls[:2] + [ls[2][:40]], r"bad\.jsonl:3: the line is truncated"),
        (lambda ls: [ls[0], "{not json", *ls[2:]], r"bad\.jsonl:2: the line is not valid JSON"),
        (lambda ls: [ls[0], "[1, 2]", *ls[2:]], r"bad\.jsonl:2: expected a JSON object, got list"),
        (
            lambda ls: [*ls[:2], json.dumps({"kind": "read", "reader": "reader-1"})],
            r"bad\.jsonl:3: field 'key': Field required",
        ),
        (
            lambda ls: [ls[0], ls[2]],
            r"bad\.jsonl:2: reader 'reader-1' is not declared before this line",
        ),
        (
            lambda ls: [*ls[:2], ls[2].replace('"label_mass": 1.0', '"label_mass": 7')],
            r"bad\.jsonl:3: field 'reads\[0\]\.label_mass': Input should be less than or equal "
            r"to 1 \(got 7\)",
        ),
        (lambda ls: [ls[0], json.dumps({"kind": "video"})], r"unknown entry kind 'video'"),
        (
            lambda ls: [ls[0].replace('"agentbranch_cassette": 2', '"agentbranch_cassette": 9')],
            r"format 9, written by a newer agentbranch",
        ),
        (lambda ls: ls[1:], r"bad\.jsonl:1: the first line is not an agentbranch cassette header"),
        (lambda ls: [], r"bad\.jsonl is empty"),
    ],
)
def test_loading_validates_every_line(tmp_path, mutate, message):
    bad = tmp_path / "bad.jsonl"
    lines = mutate(recorded(tmp_path))
    bad.write_text("\n".join(lines) + ("\n" if lines and "truncated" not in message else ""))
    with pytest.raises(CassetteFormatError, match=message) as err:
        Cassette(bad, "none")
    assert isinstance(err.value, ab.AgentBranchError)


def test_non_utf8_and_directories_fail_clearly(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"agentbranch_cassette": 2, "library": "x"}\n\xff\xfe garbage\n')
    with pytest.raises(CassetteFormatError, match=r"bad\.jsonl:2: not UTF-8"):
        Cassette(bad, "new")
    with pytest.raises(CassetteFormatError, match="is a directory"):
        Cassette(tmp_path, "none")
    Cassette(bad, "all")  # re-recording does not need the broken file


def test_a_pre_v1_cassette_loads_as_reader_1(tmp_path):
    """The format before v1: no header, one object a line, keyed by the request digest."""
    from agentbranch.replay import request_key

    engine = ab.DecisionEngine(scripted())
    request = engine._prepare("site down", QUESTIONS, 1).request
    old = {
        "key": request_key(request),
        "reader": "transformers",
        "model": "tiny-model",
        "state": "site down",
        "questions": ["team", "urgent"],
        "reads": [
            {
                "logprobs": [-1.2, -0.36],
                "label_mass": 0.01,
                "argmax_is_label": False,
                "agreement": 1.0,
            },
            {
                "logprobs": [None, -0.1],
                "label_mass": 0.02,
                "argmax_is_label": True,
                "agreement": 1.0,
            },
        ],
    }
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n")
    reader = cassette_reader(path, mode="none")
    d = ab.DecisionEngine(reader).decide("site down", QUESTIONS)
    assert reader.name == "replay:transformers" and reader.model == "tiny-model"
    assert d["team"].label == "outage" and d["urgent"].probabilities == {"yes": 0.0, "no": 1.0}
    with pytest.raises(ReplayMissError, match="differs in: state"):
        ab.DecisionEngine(reader).decide("site up", QUESTIONS)

    # Recording into it in `new` mode upgrades the file to v2, keeping the old reads.
    class SameModel(ab.ScriptedReader):
        name = "transformers"

    same = SameModel({"team": {"outage": 1.0}}, model="tiny-model")
    ab.DecisionEngine(Cassette(path, "new").reader(same)).decide("another", QUESTIONS)
    assert json.loads(path.read_text().splitlines()[0])["agentbranch_cassette"] == 2
    again = ab.DecisionEngine(cassette_reader(path, mode="none"))
    assert again.decide("site down", QUESTIONS)["team"].label == "outage"
    assert again.decide("another", QUESTIONS)["team"].label == "outage"

    mixed = dict(old, reader="vllm", key="k2")
    path.write_text(json.dumps(old) + "\n" + json.dumps(mixed) + "\n")
    with pytest.raises(CassetteFormatError, match="pre-v1 .* mixes reads of 2 readers.*re-record"):
        Cassette(path, "none")


def test_diff_pairs_a_reworded_prompt_and_fails_clearly_on_a_bad_file(tmp_path):
    from typer.testing import CliRunner

    from agentbranch.cli import app

    old, new = tmp_path / "v1.jsonl", tmp_path / "v2.jsonl"
    for path, instructions, dist in (
        (old, "Route tickets.", {"billing": 0.3, "outage": 0.7}),
        (new, "Route support tickets.", {"billing": 0.8, "outage": 0.2}),
    ):
        engine = ab.DecisionEngine(
            Cassette(path, "new").reader(ab.ScriptedReader({"team": dist})),
            instructions=instructions,
        )
        engine.decide("site down", QUESTIONS)
    result = CliRunner().invoke(app, ["replay", "diff", str(old), str(new), "--json"])
    report = json.loads(result.stdout)
    team = next(d for d in report["decisions"] if d["question"] == "team")
    assert (team["old_label"], team["new_label"], team["flipped"]) == ("outage", "billing", True)
    assert team["changed_fields"] == ["instructions"]
    assert report["summary"]["added"] == report["summary"]["removed"] == 0
    assert result.exit_code == 1

    (tmp_path / "broken.jsonl").write_text("{oops\n")
    result = CliRunner().invoke(app, ["replay", "diff", str(old), str(tmp_path / "broken.jsonl")])
    assert result.exit_code == 2 and "broken.jsonl:1" in result.output


def test_load_and_warmup_reach_the_live_reader_only_when_it_will_read(tmp_path):
    class Lazy(ab.ScriptedReader):
        loads = 0

        def load(self) -> None:
            type(self).loads += 1

        def warmup(self) -> None:
            self.load()

    path = tmp_path / "run.jsonl"
    reader = Cassette(path, "new").reader(Lazy)
    reader.warmup()
    ab.DecisionEngine(reader).decide("a", QUESTIONS)
    assert Lazy.loads == 2  # loaded once when built, once more by its own warm-up

    replay = Cassette(path, "none").reader(Lazy)
    replay.load()
    replay.warmup()
    ab.DecisionEngine(replay).decide("a", QUESTIONS)
    assert Lazy.loads == 2  # replay never built or loaded the model


def test_an_unwritable_cassette_is_a_clear_error(tmp_path):
    (tmp_path / "a-file").write_text("")
    reader = Cassette(tmp_path / "a-file" / "run.jsonl", "new").reader(scripted())
    with pytest.raises(ab.ConfigurationError, match="cannot write the cassette"):
        ab.DecisionEngine(reader).decide("a", QUESTIONS)


def test_a_live_mode_without_a_reader_says_so(tmp_path):
    reader = Cassette(tmp_path / "run.jsonl", "all").reader()
    with pytest.raises(ab.ConfigurationError, match="mode 'all', which reads live"):
        ab.DecisionEngine(reader).decide("a", QUESTIONS)
