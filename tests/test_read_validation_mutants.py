"""What the engine refuses from a reader (issue 42's surviving mutants of the read
validation): a batch answered short, a boolean log-probability, a label mass or an
agreement outside [0, 1]. Each test states the behaviour through ``DecisionEngine``,
with readers that answer exactly what a faulty reader or server would."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

import agentbranch as ab
from agentbranch.core.errors import InvalidReadError, ReaderError
from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine.readers.base import Reader

URGENT = ab.yes_no("Is the ticket urgent?")
SURE_YES = (math.log(0.99), math.log(0.01))


class Answers(Reader):
    """Answers every question of every request with ``read``; ``drop`` leaves that
    many requests of each batch unanswered (a reader that loses part of a batch)."""

    name = "answers"
    model = "answers-model"

    def __init__(self, read: LabelRead | None = None, *, drop: int = 0) -> None:
        self.answer = read or LabelRead(logprobs=SURE_YES)
        self.drop = drop

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        out = [[self.answer for _ in r.questions] for r in requests]
        return out[: len(out) - self.drop]


@pytest.mark.parametrize("batching", [False, True])
@pytest.mark.parametrize("drop", [1, 2])
def test_a_reader_answering_fewer_requests_than_sent_is_an_error_not_fewer_decisions(
    batching, drop
):
    # The engine checks the answer count (InvalidReadError); its coalescer checks the
    # batch it forwarded first (a ReaderError: the reader failed the whole batch).
    engine = ab.DecisionEngine(Answers(drop=drop), batching=batching)
    states = [f"ticket {i}" for i in range(3)]
    error, match = (ReaderError, "answered .* batched requests") if batching else (
        InvalidReadError,
        rf"answered {3 - drop} of 3 requests",
    )
    with pytest.raises(error, match=match):
        engine.decide_many(states, {"urgent": URGENT})


@pytest.mark.parametrize("batching", [False, True])
def test_a_reader_answering_every_request_gives_one_decision_per_state(batching):
    engine = ab.DecisionEngine(Answers(), batching=batching)
    out = engine.decide_many([f"ticket {i}" for i in range(3)], {"urgent": URGENT})
    assert [d["urgent"].label for d in out] == ["yes"] * 3


async def test_async_decide_many_refuses_a_short_answer_too():
    engine = ab.DecisionEngine(Answers(drop=1), batching=False)
    with pytest.raises(InvalidReadError, match="answered 1 of 2 requests"):
        await engine.adecide_many(["a", "b"], {"urgent": URGENT})


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("where", [0, 1])
def test_a_boolean_log_probability_is_refused_not_read_as_certainty(flag, where):
    # False == 0 == log(1): taken as a number it would be certainty for that option.
    logprobs = [math.log(0.5), math.log(0.5)]
    logprobs[where] = flag
    engine = ab.DecisionEngine(Answers(LabelRead(logprobs=tuple(logprobs))), batching=False)
    with pytest.raises(InvalidReadError, match=rf"log-probability {flag!r} is not a number"):
        engine.decide("ticket", {"urgent": URGENT})


@pytest.mark.parametrize("name", ["label_mass", "agreement"])
@pytest.mark.parametrize("value", [-0.5, -0.01, 1.01, 2.0, float("nan"), float("inf"), True])
def test_label_mass_and_agreement_outside_0_1_are_refused(name, value):
    read = LabelRead(logprobs=SURE_YES, **{name: value})
    engine = ab.DecisionEngine(Answers(read), batching=False)
    with pytest.raises(InvalidReadError, match=rf"{name} .* is not in \[0, 1\]"):
        engine.decide("ticket", {"urgent": URGENT})


@pytest.mark.parametrize("value", [0.0, 1e-5, 0.5, 1.0])
def test_label_mass_in_range_is_kept(value):
    read = LabelRead(logprobs=SURE_YES, label_mass=value)
    d = ab.DecisionEngine(Answers(read), batching=False).decide("ticket", {"urgent": URGENT})
    assert d["urgent"].label_mass == pytest.approx(value)


@pytest.mark.parametrize(
    "logprobs", [(float("nan"), -1.0), (0.5, -1.0), (float("inf"), -1.0), ("-1", -1.0)]
)
def test_log_probabilities_must_be_numbers_in_minus_inf_0(logprobs):
    engine = ab.DecisionEngine(Answers(LabelRead(logprobs=logprobs)), batching=False)
    with pytest.raises(InvalidReadError, match="log-probability"):
        engine.decide("ticket", {"urgent": URGENT})


def test_minus_infinity_is_probability_zero():
    read = LabelRead(logprobs=(-math.inf, 0.0))
    d = ab.DecisionEngine(Answers(read), batching=False).decide("ticket", {"urgent": URGENT})
    assert (d["urgent"].label, d["urgent"].confidence) == ("no", 1.0)
