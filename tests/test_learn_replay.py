"""A recorded LangGraph run with Earned(learn=True) replays exactly — the same versions,
decisions and branches — when the store has since learned more (a newer version in
force from the first decision) or is gone: the cassette keeps the version in force for
each decision (``agentbranch.policy.earned.learn.replayed``)."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from _learn_canvas import QUESTION, FakeEncoder, Teacher, canvas_reader, stream
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import agentbranch as ab
from agentbranch.langgraph import DecisionRecords, decide_node
from agentbranch.policy import Earned, Generate, Policy
from agentbranch.policy.earned import QuestionKey
from agentbranch.replay import Cassette, ReplayMissError


class S(TypedDict, total=False):
    text: str
    decisions: DecisionRecords
    out: str


def graph(engine: ab.DecisionEngine, earned: Earned, teacher: Teacher | None = None):
    node = decide_node(
        engine,
        {"sport": QUESTION},
        policy=Policy(take_at=earned, fallbacks=[Generate(teacher or Teacher())]),
        state_key="text",
    )
    g = StateGraph(S)
    g.add_node("read", node)
    g.add_node("sports_desk", lambda s: {"out": "sports_desk"})
    g.add_node("kitchen", lambda s: {"out": "kitchen"})
    g.add_edge(START, "read")
    g.add_conditional_edges("read", node.router("sport", {"yes": "sports_desk", "no": "kitchen"}))
    g.add_edge("sports_desk", END)
    g.add_edge("kitchen", END)
    return g.compile()


def earned_on(path, encoder=None) -> Earned:
    e = Earned(precision=0.8, min_evidence=10, refresh_s=0, store=path, learn=True)
    e.learner.background = False
    e.learner.settle_s = 0  # one writer: no other replica's labels to wait for
    e.learner.encoder = encoder or FakeEncoder()
    return e


KEEP = (
    "label",
    "decided_by",
    "band",
    "take_at",
    "trust",
    "reader_version",
    "confidence",
    "probability",
)


def run(app, texts, use_async=False):
    if use_async:
        outs = [asyncio.run(app.ainvoke({"text": t})) for t in texts]
    else:
        outs = [app.invoke({"text": t}) for t in texts]
    return [(o["out"], {k: o["decisions"]["sport"].get(k) for k in KEEP}) for o in outs]


def test_a_learning_run_replays_its_versions_whatever_the_store_learned(tmp_path):
    store, cassette_path = tmp_path / "ev.jsonl", tmp_path / "run.jsonl"
    texts = [t for t, _ in stream(90)]
    with Cassette(cassette_path, mode="all") as cassette:
        earned = earned_on(store)
        recorded = run(graph(ab.DecisionEngine(cassette.reader(canvas_reader())), earned), texts)
    versions = [rec["reader_version"] for _, rec in recorded]
    assert versions[0] == 0 and 1 in versions  # the recording switched version midway
    switch = versions.index(1)
    assert {rec["decided_by"] for _, rec in recorded[switch:]} >= {"engine"}
    lines = [json.loads(x) for x in cassette_path.read_text().splitlines()]
    kept = [x for x in lines if x.get("kind") == "version"]
    assert [x["version"] for x in kept] == versions
    # the version's wire dict names its pool (digest and rule), never its labelled states
    assert all("learned_pool" in x["asked"] for x in kept if x["version"])
    assert not any("(note 1)" in json.dumps(x["asked"]) for x in kept)

    # The store learns on: a live run on it after the recording. A process that starts
    # now has version 1 (or newer) in force from its first decision.
    live = earned_on(store)
    run(graph(ab.DecisionEngine(canvas_reader()), live), [t for t, _ in stream(60, seed=1)])
    now = earned_on(store)
    now.learner.bind(ab.DecisionEngine(canvas_reader()))
    _, in_force = now.learner.asked(QuestionKey("sport", QUESTION, "scripted", "canvas"))
    assert in_force >= 1

    for label, path in (("learned more", store), ("no store", tmp_path / "gone.jsonl")):
        teacher = Teacher()
        with Cassette(cassette_path, mode="none") as cassette:
            app = graph(ab.DecisionEngine(cassette.reader()), earned_on(path), teacher)
            replayed = run(app, texts, use_async=label == "no store")
            # nothing recorded goes unplayed: the trial reads of learning versions are
            # not part of the recording (a replay, which learns nothing, never asks them)
            assert cassette.stale() == [], label
        assert replayed == recorded, label
        assert teacher.calls == 0  # its answers replayed from the cassette too
    assert not (tmp_path / "gone.jsonl").exists() or not (tmp_path / "gone.jsonl").read_text()


def test_a_replay_of_a_learning_run_without_recorded_versions_is_a_miss(tmp_path):
    path = tmp_path / "run.jsonl"
    texts = [t for t, _ in stream(3)]
    with Cassette(path, mode="all") as cassette:
        run(graph(ab.DecisionEngine(cassette.reader(canvas_reader())), earned_on(None)), texts)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines if x.get("kind") != "version"))
    with Cassette(path, mode="none") as cassette:
        app = graph(ab.DecisionEngine(cassette.reader()), earned_on(None))
        with pytest.raises(ReplayMissError, match="no version"):
            app.invoke({"text": texts[0]})


def test_a_replayed_head_version_is_keyed_by_its_digest(tmp_path):
    """The embedded reader's versions (a learned head) replay too: the head's digest,
    not its weights, keys the recorded read and is all the cassette keeps."""
    import numpy as np

    from agentbranch.core.heads import LinearHead, with_head
    from agentbranch.core.questions import as_compiled, to_spec
    from agentbranch.core.reads import ReadRequest
    from agentbranch.policy.earned.learn.replayed import rebuild, wire
    from agentbranch.replay.keys import request_key

    head = LinearHead(["yes", "no"], ["yes", "no"], np.arange(6.0).reshape(2, 3), [0.1, -0.1])
    version = with_head(QUESTION, head)
    back = rebuild(QUESTION.type, json.loads(json.dumps(wire(version))))
    assert back.model_dump(mode="json") == version.model_dump(mode="json")
    assert as_compiled(back).head.digest == head.digest
    key = lambda q: request_key(ReadRequest("s", (to_spec("sport", q),)))  # noqa: E731
    assert key(back) == key(version)
    other = LinearHead(["yes", "no"], ["yes", "no"], np.ones((2, 3)), [0.1, -0.1])
    assert key(with_head(QUESTION, other)) != key(version)
    with pytest.raises(ab.ConfigurationError, match="replayed"):
        as_compiled(back).head.log_probs(np.zeros((1, 3)), ["yes", "no"])


def test_recording_through_a_cassette_fits_the_same_kind_of_version(tmp_path):
    """A reader that embeds (the embedded default) is seen through the cassette reader,
    so learning fits it learned heads there too (``Learner._version`` looks for
    ``reader.embed``), not the few-shot pools of canvas readers."""

    class Embedding(ab.ScriptedReader):
        embed = staticmethod(FakeEncoder())
        written_scores = staticmethod(lambda states, q: np.zeros((len(states), 2)))

    with Cassette(tmp_path / "run.jsonl", mode="all") as cassette:
        reader = cassette.reader(lambda: Embedding({"sport": lambda s, q: {"yes": 1.0}}))
        assert reader.embed is Embedding.embed
        # and the written scores its heads read beside the embedding, as without it
        assert reader.written_scores is Embedding.written_scores
        assert reader.unrecorded().written_scores is Embedding.written_scores
    with Cassette(tmp_path / "run.jsonl", mode="none") as cassette:
        assert cassette.reader().embed is None  # a replay loads no model for it
        assert cassette.reader().written_scores is None


def test_an_embedded_learning_run_replays_its_head_versions(tmp_path):
    """The embedded default through a cassette: versions are learned heads, their reads
    recorded under the head's digest, and the run replays without the store."""
    from agentbranch.engine.readers.embedded import EmbeddedReader

    texts = [t for t, _ in stream(110)]
    with Cassette(tmp_path / "run.jsonl", mode="all") as cassette:
        engine = ab.DecisionEngine(cassette.reader(EmbeddedReader))
        app = graph(engine, earned_on(tmp_path / "ev"))
        recorded = run(app, texts)
    versions = [rec["reader_version"] for _, rec in recorded]
    assert max(versions) >= 1
    lines = [json.loads(x) for x in (tmp_path / "run.jsonl").read_text().splitlines()]
    kept = [x for x in lines if x.get("kind") == "version" and x["version"]]
    heads = [x["asked"]["learned_head"] for x in kept]
    assert heads and all(isinstance(h, str) and len(h) == 32 for h in heads)
    with Cassette(tmp_path / "run.jsonl", mode="none") as cassette:
        app = graph(ab.DecisionEngine(cassette.reader()), earned_on(tmp_path / "gone"))
        assert run(app, texts) == recorded
        assert cassette.stale() == []


@pytest.mark.parametrize("learn", [False, True])
def test_a_replay_miss_names_the_nearest_request_and_the_state_with_or_without_learning(
    tmp_path, learn
):
    """Issue 61: with ``learn=True`` a changed state missed on the decision's version
    (``holds no version``) without saying what changed, and the miss was not kept for the
    plugin's summary; it now says it as a read miss does without learning."""
    path = tmp_path / "run.jsonl"
    texts = [t for t, _ in stream(3)]

    def earned() -> Earned:
        if learn:
            return earned_on(None)
        return Earned(precision=0.8, min_evidence=10, refresh_s=0, store=None)

    with Cassette(path, mode="all") as cassette:
        run(graph(ab.DecisionEngine(cassette.reader(canvas_reader())), earned()), texts)
    changed = texts[1].replace(" ", "  ", 1) + " Edited."
    with Cassette(path, mode="none") as cassette:
        app = graph(ab.DecisionEngine(cassette.reader()), earned())
        with pytest.raises(ReplayMissError) as missed:
            app.invoke({"text": changed})
        said = str(missed.value)
        assert "Nearest recorded request" in said and "differs in: state" in said
        assert "+ The  cyclist" in said  # the state's diff
        assert len(cassette.misses) == 1 and "differs in state" in cassette.misses[0]
        assert ("version of 'sport'" in cassette.misses[0]) == learn
