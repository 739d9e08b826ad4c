"""The engine above the reader, on the scripted reader (the mock transport)."""

import asyncio
import math

import pytest

import agentbranch as ab
from agentbranch.core.reads import LabelRead
from agentbranch.engine.readers.base import Reader

QUESTIONS = {
    "team": ab.choice("Which team?", {"billing": "Invoices", "outage": "Service down"}),
    "urgent": ab.yes_no("Is this urgent?"),
    "anger": ab.score("How angry?", ["calm", "annoyed", "angry"]),
}


def scripted(**kw):
    return ab.ScriptedReader(
        {
            "team": lambda state, q: (
                {"outage": 0.8, "billing": 0.2}
                if "down" in state
                else {"billing": 0.9, "outage": 0.1}
            ),
            "urgent": {"yes": 0.7, "no": 0.3},
            "anger": {"calm": 0.1, "annoyed": 0.3, "angry": 0.6},
        },
        **kw,
    )


def test_decide_returns_one_decision_per_question():
    d = ab.DecisionEngine(scripted()).decide("The site is down", QUESTIONS)
    assert list(d) == ["team", "urgent", "anger"]
    assert d["team"].label == "outage"
    assert d["team"].probabilities == pytest.approx({"outage": 0.8, "billing": 0.2})
    assert sum(d["anger"].probabilities.values()) == pytest.approx(1.0)
    assert d["anger"].expected == pytest.approx(0.3 + 1.2)
    assert d["urgent"].reader == "scripted"
    response = d.to_langchain()
    assert response.choices["team"].choice == "outage"


def test_decide_many_is_one_batched_read():
    reader = scripted()
    results = ab.DecisionEngine(reader).decide_many(["down!", "invoice"], QUESTIONS)
    assert len(reader.calls) == 1 and len(reader.calls[0]) == 2
    assert [r["team"].label for r in results] == ["outage", "billing"]


async def test_adecide_matches_decide():
    engine = ab.DecisionEngine(scripted())
    a = await engine.adecide("The site is down", QUESTIONS)
    s = engine.decide("The site is down", QUESTIONS)
    assert a["team"].probabilities == s["team"].probabilities


def test_many_options_are_chunked_and_combined():
    options = [f"team{i}" for i in range(60)]
    weights = {o: (i + 1) for i, o in enumerate(options)}
    total = sum(weights.values())
    reader = ab.ScriptedReader({"t": {o: w / total for o, w in weights.items()}})
    d = ab.DecisionEngine(reader).decide("x", {"t": ab.choice("?", options)})["t"]
    # three reads of 20 options (<= 26 labels each) in one batch
    specs = reader.calls[0][0].questions
    assert [len(s.options) for s in specs] == [20, 20, 20]
    assert all(len(s.labels) == len(s.options) for s in specs)
    assert d.label == "team59"
    assert d.probabilities["team0"] == pytest.approx(1 / total)


def test_permutations_cancel_position_bias():
    class FirstLabelBias(Reader):
        name = "biased"

        def read(self, requests):
            # prefers whatever option is shown first, regardless of content
            return [
                [
                    LabelRead(
                        tuple(
                            math.log(0.6 if i == 0 else 0.4 / (len(q.options) - 1))
                            for i in range(len(q.options))
                        )
                    )
                    for q in r.questions
                ]
                for r in requests
            ]

    q = {"t": ab.choice("?", ["a", "b", "c"])}
    biased = ab.DecisionEngine(FirstLabelBias()).decide("x", q)["t"]
    assert biased.probabilities["a"] == pytest.approx(0.6)
    debiased = ab.DecisionEngine(FirstLabelBias(), permutations=3).decide("x", q)["t"]
    assert debiased.probabilities == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


def test_calibration_temperature_flattens():
    cal = ab.Calibration(temperatures={"urgent": 2.0})
    d = ab.DecisionEngine(scripted(), calibration=cal).decide("x", QUESTIONS)
    p = (0.7**0.5) / (0.7**0.5 + 0.3**0.5)
    assert d["urgent"].probabilities["yes"] == pytest.approx(p)
    assert d["urgent"].calibrated and not d["team"].calibrated


def test_calibration_loads_from_path(tmp_path):
    path = ab.Calibration(by_type={"noul": 0.5}).save(tmp_path / "cal.json")
    d = ab.DecisionEngine(scripted(), calibration=str(path)).decide("x", QUESTIONS)
    assert d["urgent"].probabilities["yes"] == pytest.approx(0.49 / (0.49 + 0.09))


def test_reader_failure_is_an_error_not_low_confidence():
    engine = ab.DecisionEngine(scripted(error=ConnectionError("refused")))
    with pytest.raises(ab.ReaderError, match="refused"):
        engine.decide("x", QUESTIONS)


def test_reader_timeout_sync_and_async():
    engine = ab.DecisionEngine(scripted(delay_s=0.5), timeout_s=0.05)
    with pytest.raises(ab.ReaderTimeoutError):
        engine.decide("x", QUESTIONS)
    with pytest.raises(ab.ReaderTimeoutError):
        asyncio.run(engine.adecide("x", QUESTIONS))


def test_reader_that_gives_no_mass_is_an_error():
    reader = ab.ScriptedReader({"urgent": {"yes": 0.0, "no": 0.0}})
    with pytest.raises(ab.ReaderError, match="no probability"):
        ab.DecisionEngine(reader).decide("x", {"urgent": ab.yes_no("?")})


def test_state_may_be_messages_or_json():
    from langchain_core.messages import AIMessage, HumanMessage

    reader = scripted()
    engine = ab.DecisionEngine(reader)
    engine.decide([HumanMessage("site is down"), AIMessage("on it")], QUESTIONS)
    assert reader.calls[-1][0].state == "human: site is down\nai: on it"
    engine.decide({"ticket": "down", "n": 1}, QUESTIONS)
    assert reader.calls[-1][0].state == '{"ticket": "down", "n": 1}'


def test_from_env_prefers_remote_when_configured(monkeypatch):
    engine = ab.DecisionEngine.from_env(
        {"AGENTBRANCH_REMOTE_URL": "http://127.0.0.1:9", "AGENTBRANCH_REMOTE_MODEL": "m"}
    )
    assert engine.reader.name == "remote"
    assert "AGENTBRANCH_REMOTE_URL" in engine.selection_reason


def test_a_question_is_planned_once_and_again_when_changed_in_place():
    from agentbranch.engine.plan import QuestionPlans

    seen: list[tuple[str, ...]] = []

    class Recording(ab.ScriptedReader):
        def read(self, requests):
            seen.extend(tuple(q.options) for r in requests for q in r.questions)
            return super().read(requests)

    team = ab.choice("Which team?", {"billing": "Invoices", "outage": "Service down"})
    reader = Recording({"team": lambda state, q: {o: 1 / len(q.options) for o in q.options}})
    engine = ab.DecisionEngine(reader, batching=False)
    first = engine._prepare("a", {"team": team}, 1).request.questions[0]
    assert engine._prepare("b", {"team": team}, 1).request.questions[0] is first  # reused
    team.criteria["refund"] = "Money back"  # mutated in place: planned again
    d = engine.decide("c", {"team": team})
    assert seen[-1] == ("billing", "outage", "refund")
    assert set(d["team"].probabilities) == {"billing", "outage", "refund"}
    engine.permutations = 2  # a setting the plan depends on
    engine.decide("d", {"team": team})
    assert len(seen) == 1 + 2
    plans = QuestionPlans(size=4)
    for i in range(10):  # questions built on every call: the cache stays bounded
        plans.plan("q", ab.yes_no(f"Question {i}?"), max_options=26, permutations=1)
        assert len(plans._plans) <= 4


def test_a_question_that_cannot_be_snapshot_is_planned_every_time(monkeypatch):
    from agentbranch.engine import plan

    def refuse(value):
        raise TypeError("cannot copy")

    monkeypatch.setattr(plan.copy, "deepcopy", refuse)
    plans = plan.QuestionPlans()
    q = ab.yes_no("Urgent?")
    spec, units = plans.plan("u", q, max_options=26, permutations=1)
    assert spec.options == ("yes", "no") and len(units) == 1 and not plans._plans
