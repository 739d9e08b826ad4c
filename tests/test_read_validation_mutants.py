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
    error, match = (
        (ReaderError, "answered .* batched requests")
        if batching
        else (
            InvalidReadError,
            rf"answered {3 - drop} of 3 requests",
        )
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


# -- check_read, combine and normalise directly (engine/plan.py) --------------------------

from types import SimpleNamespace  # noqa: E402

from agentbranch.engine.plan import ROUNDING, check_read, combine, normalise  # noqa: E402


def test_an_invalid_read_names_the_question_what_is_wrong_and_what_happens():
    with pytest.raises(InvalidReadError) as err:
        check_read("urgent", "yes", 2)
    assert str(err.value) == (
        "the reader's answer to question 'urgent' is invalid: expected a LabelRead, got "
        "str. The decision was not made; the reader or server is faulty (on_error applies)."
    )


@pytest.mark.parametrize(
    ("logprobs", "got"),
    [((-1.0, -2.0, -3.0), "3"), ([-1.0], "1"), ({"yes": -1.0, "no": -2.0}, "dict")],
)
def test_a_read_with_the_wrong_number_of_log_probabilities_says_how_many(logprobs, got):
    with pytest.raises(InvalidReadError, match=rf": {got} log-probabilities for 2 options\."):
        check_read("q", LabelRead(logprobs), 2)


def test_values_within_rounding_of_the_bounds_are_accepted():
    """Up to ``ROUNDING`` above 0 (a log-probability) or outside [0, 1] (label mass,
    agreement) is float rounding, not a faulty reader."""
    read = LabelRead((ROUNDING, -1.0), label_mass=1 + ROUNDING, agreement=-ROUNDING)
    assert check_read("q", read, 2) is read
    assert check_read("q", LabelRead((-1.0, -2.0), label_mass=-ROUNDING), 2)
    with pytest.raises(InvalidReadError):
        check_read("q", LabelRead((ROUNDING * 1.01, -1.0)), 2)


def _unit(*options: int):
    return SimpleNamespace(spec=SimpleNamespace(id="q"), option_indices=options)


def test_combine_averages_each_option_over_the_reads_that_saw_it():
    """Two reads over options (0, 1) and (1, 2) of four: option 1 is the mean of its
    two probabilities, an option no read saw scores 0; label mass and agreement are
    the reads' means; a log-probability within rounding above 0 counts as 1."""
    reads = [
        LabelRead((math.log(0.6), math.log(0.4)), label_mass=0.5, agreement=1.0),
        LabelRead((math.log(0.3), ROUNDING / 2), label_mass=0.7, agreement=0.5),
    ]
    out = combine(4, [_unit(0, 1), _unit(1, 2)], reads)
    assert out.scores == pytest.approx([0.6, 0.35, 1.0, 0.0])
    assert out.scores[2] == 1.0 and out.scores[3] == 0.0
    assert (out.label_mass, out.agreement) == (pytest.approx(0.6), 0.75)
    over = LabelRead((0.0,), label_mass=1 + ROUNDING, agreement=1 + ROUNDING)
    clamped = combine(1, [_unit(0)], [over])
    assert (clamped.label_mass, clamped.agreement) == (1.0, 1.0)


def test_combine_checks_every_read_for_its_question():
    with pytest.raises(InvalidReadError, match="question 'q' is invalid"):
        combine(2, [_unit(0, 1)], [LabelRead((math.nan, -1.0))])


@pytest.mark.parametrize("scores", [[-1.0, 1.0], [math.inf, 1.0], [math.nan, 1.0]])
def test_normalise_refuses_scores_that_are_not_finite_and_non_negative(scores):
    with pytest.raises(ValueError, match=r"scores must be finite and >= 0, got \["):
        normalise(scores)


@pytest.mark.parametrize("temperature", [0.0, -1.0, math.inf, math.nan])
def test_normalise_refuses_a_temperature_that_is_not_finite_and_positive(temperature):
    with pytest.raises(ValueError, match="temperature must be finite and > 0, got"):
        normalise([0.5, 0.25], temperature)


def test_normalise_is_a_distribution_at_any_temperature():
    assert normalise([0.5, 0.25]) == pytest.approx([2 / 3, 1 / 3])
    assert normalise([0.5, 0.25], 1e-4) == [1.0, 0.0]  # all mass on the top option
    assert normalise([0.5, 0.25], 1e6) == pytest.approx([0.5, 0.5])
    assert normalise([0.0, 0.0]) is None


# -- expand: how a question becomes its reads (each checked against a surviving mutant) --

from agentbranch.core.reads import QuestionSpec  # noqa: E402
from agentbranch.engine.plan import expand  # noqa: E402


def _choice(n: int, *, head: object = None) -> QuestionSpec:
    return QuestionSpec(
        id="q",
        type="choice",
        instructions="Which team should handle it?",
        options=tuple(f"opt{i}" for i in range(n)),
        descriptions=tuple(f"about opt{i}" if i % 2 else None for i in range(n)),
        labels=(),
        examples=tuple((f"an example of opt{i}",) for i in range(n)),
        head=head,
    )


def test_a_choice_split_into_parts_reads_every_option_once_and_keeps_its_wording():
    """More options than a read holds: balanced parts that cover every option exactly once,
    each part carrying the question's type, instructions, head and its options' own
    descriptions and examples (a part without them reads a different question)."""
    head = object()
    spec = _choice(7, head=head)
    units = expand(spec, max_options=3)  # one order per part unless asked
    assert [u.option_indices for u in units] == [(0, 1, 2), (3, 4), (5, 6)]
    for u in units:
        part = u.spec
        assert part.type == "choice" and part.instructions == spec.instructions
        assert part.head is head
        assert part.options == tuple(spec.options[i] for i in u.option_indices)
        assert part.descriptions == tuple(spec.descriptions[i] for i in u.option_indices)
        assert part.examples == tuple(spec.examples[i] for i in u.option_indices)
        assert part.labels == tuple("ABC"[: len(u.option_indices)])


def test_only_choices_are_read_in_several_orders():
    yes_no = QuestionSpec(id="q", type="noul", instructions="Is it urgent?",
                          options=("yes", "no"), descriptions=(None, None), labels=())  # fmt: skip
    assert len(expand(yes_no, max_options=26, permutations=3)) == 1
    assert len(expand(_choice(4), max_options=26, permutations=3)) == 3


def test_labels_cover_a_part_exactly_the_size_of_the_label_set_and_none_past_it():
    assert expand(_choice(26), max_options=26)[0].spec.labels == tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    # Readers without label tokens (embedded) take more options per read: no labels.
    assert expand(_choice(30), max_options=30)[0].spec.labels == ()
