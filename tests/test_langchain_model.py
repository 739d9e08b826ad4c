"""AgentBranchDecisionModel: batch/abatch as ONE engine read, score legends as given,
usage where the reader reports it."""

from __future__ import annotations

from typing import Any

import pytest
from _lg_fixtures import sure
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.decisions import ClassifierResponse, Score

import agentbranch as ab
from agentbranch.core.errors import InvalidQuestionError
from agentbranch.langchain import AgentBranchDecisionModel

URGENT = ab.yes_no("Urgent?")
TEAM = ab.choice("Which team?", {"billing": "money", "outage": "down"})


def model_on(script: dict[str, Any]) -> tuple[AgentBranchDecisionModel, ab.ScriptedReader]:
    reader = ab.ScriptedReader(script, model="dg-tiny")
    return AgentBranchDecisionModel(engine=ab.DecisionEngine(reader)), reader


def test_batch_reaches_the_reader_as_one_batch():
    model, reader = model_on({"urgent": {"yes": 0.8, "no": 0.2}, "team": sure("outage")})
    requests = [
        {"state": f"ticket {i}", "questions": {"urgent": URGENT, "team": TEAM}} for i in range(5)
    ]
    requests.append({"state": "only urgency", "questions": {"urgent": URGENT}})
    out = model.batch(requests)
    assert len(reader.calls) == 1 and len(reader.calls[0]) == 6  # one read, six requests
    assert [r.state for r in reader.calls[0]] == [f"ticket {i}" for i in range(5)] + [
        "only urgency"
    ]
    assert all(isinstance(o, ClassifierResponse) for o in out)
    assert out[0] == model.invoke(requests[0]) and set(out[5].answers) == {"urgent"}


async def test_abatch_reaches_the_reader_as_one_batch():
    model, reader = model_on({"team": sure("billing")})
    out = await model.abatch([{"state": s, "questions": {"team": TEAM}} for s in "abc"])
    assert len(reader.calls) == 1 and len(reader.calls[0]) == 3
    assert [o.answers["team"].choice for o in out] == ["billing"] * 3


def test_batch_runs_are_traced_per_input():
    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.starts, self.ends = 0, 0

        def on_chain_start(self, *a: Any, **k: Any) -> None:
            self.starts += 1

        def on_chain_end(self, *a: Any, **k: Any) -> None:
            self.ends += 1

    model, reader = model_on({})
    runs = Runs()
    model.batch([{"state": "x", "questions": {"u": URGENT}}] * 3, {"callbacks": [runs]})
    assert (runs.starts, runs.ends, len(reader.calls)) == (3, 3, 1)


def test_a_bad_input_fails_alone_in_a_batch():
    model, reader = model_on({})
    good = {"state": "x", "questions": {"urgent": URGENT}}
    other = {"state": "y", "questions": {"urgent": URGENT}}  # not a duplicate: read too
    bad = {"state": "x", "questions": {}}
    out = model.batch([good, bad, other], return_exceptions=True)
    assert isinstance(out[1], InvalidQuestionError)
    assert isinstance(out[0], ClassifierResponse) and isinstance(out[2], ClassifierResponse)
    assert [[r.state for r in call] for call in reader.calls] == [["x", "y"]]
    with pytest.raises(InvalidQuestionError):
        model.batch([good, bad])


def test_score_legend_holds_the_original_levels():
    levels = ["calm", {"level": "angry", "hint": "shouting"}, 3]
    model, _ = model_on({"mood": {"calm": 0.2, '{"level": "angry", "hint": "shouting"}': 0.5}})
    out = model.invoke(
        {"state": "x", "questions": {"mood": Score(instructions="Mood?", criteria=levels)}}
    )
    assert out.answers["mood"].legend == {
        0: "calm",
        1: {"level": "angry", "hint": "shouting"},
        2: 3,
    }


def test_usage_is_filled_from_a_token_reader(tiny_model_dir):
    reader = ab.TransformersReader.from_pretrained(tiny_model_dir)
    seen = []
    read_tokens = reader.read_tokens
    reader.read_tokens = lambda reads: (seen.extend(reads), read_tokens(reads))[1]
    model = AgentBranchDecisionModel(engine=ab.DecisionEngine(reader))
    out = model.invoke({"state": "site down", "questions": {"urgent": URGENT, "team": TEAM}})
    usage = out.usage
    assert usage is not None and len(seen) == 2  # two single canvas reads
    assert usage["input_tokens"] == sum(len(t.prompt_ids) for t in seen) > 0
    assert usage["output_tokens"] == 4  # vLLM's max_tokens=2 per single canvas read
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert out.request_id is None  # an in-process reader has no server request id
    no_usage, _ = model_on({})
    assert no_usage.invoke({"state": "x", "questions": {"u": URGENT}}).usage is None
