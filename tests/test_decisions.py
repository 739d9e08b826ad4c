import math

import pytest
from langchain_core.decisions import ChoiceAnswer, NoulAnswer, ScoreAnswer

from agentbranch.core.decisions import Decision, confidence_from, entropy


def make(type_, options, probs):
    return Decision.from_probs(
        question_id="q",
        type=type_,
        options=options,
        probs=probs,
        label_mass=0.8,
        argmax_is_label=True,
        agreement=1.0,
        reader="r",
        model="m",
        latency_s=0.01,
    )


def test_entropy_and_confidence_formulas():
    probs = [0.7, 0.2, 0.1]
    h = -sum(p * math.log(p) for p in probs)
    d = make("choice", ["a", "b", "c"], probs)
    assert d.entropy == pytest.approx(h)
    assert d.confidence == pytest.approx(1 - h / math.log(3))
    assert d.margin == pytest.approx(0.5)
    assert d.label == "a" and d.index == 0
    assert confidence_from([0.5, 0.5]) == pytest.approx(0.0)
    assert confidence_from([1.0, 0.0]) == pytest.approx(1.0)
    assert entropy([1.0, 0.0]) == 0.0


def test_score_expected_level_and_langchain_conversion():
    d = make("score", ["calm", "annoyed", "angry"], [0.2, 0.3, 0.5])
    assert d.expected == pytest.approx(0.3 + 1.0)
    answer = d.to_langchain()
    assert isinstance(answer, ScoreAnswer)
    assert answer.legend == {0: "calm", 1: "annoyed", 2: "angry"}
    assert answer.probabilities[2] == pytest.approx(0.5)


def test_noul_and_choice_conversion():
    n = make("noul", ["yes", "no"], [0.9, 0.1]).to_langchain()
    assert isinstance(n, NoulAnswer) and n.noul == pytest.approx(0.9)
    c = make("choice", ["a", "b"], [0.4, 0.6]).to_langchain()
    assert isinstance(c, ChoiceAnswer) and c.choice == "b"


def test_record_is_plain_json():
    import json

    record = make("choice", ["a", "b"], [0.4, 0.6]).to_record()
    assert json.loads(json.dumps(record)) == record
