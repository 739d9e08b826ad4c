"""Question expansion: one user question → the question reads that answer it.

A choice with more options than one read's label set (the reader's ``max_options``) is
split into balanced chunks whose full-vocabulary scores renormalise over all options;
with ``permutations=P`` a choice is also read in ``P`` cyclic option orders, averaged,
which cancels the model's preference for early letters. All in one batched read;
``combine`` folds the reads back.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentbranch.core.errors import InvalidReadError
from agentbranch.core.question_types import question_type
from agentbranch.core.questions import to_spec
from agentbranch.core.reads import LabelRead, QuestionSpec

__all__ = [
    "ROUNDING",
    "Combined",
    "QuestionPlans",
    "Unit",
    "check_read",
    "combine",
    "expand",
    "normalise",
]

#: How far above 0 a log-probability (and above 1 a label mass) may sit from float
#: rounding (float32 softmax) before the read counts as invalid.
ROUNDING = 1e-4


@dataclass(frozen=True)
class Unit:
    """One question read and where its options sit in the user's question."""

    spec: QuestionSpec
    option_indices: tuple[int, ...]


@dataclass(frozen=True)
class Combined:
    """The folded read of one user question: scores over all its options."""

    scores: list[float]  # full-vocabulary probabilities, not normalised
    label_mass: float | None  # None: a read did not know it
    argmax_is_label: bool
    agreement: float


def _balanced(n: int, size: int) -> list[range]:
    count = -(-n // size)
    step, extra = divmod(n, count)
    bounds = [i * step + min(i, extra) for i in range(count + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


def expand(spec: QuestionSpec, *, max_options: int, permutations: int = 1) -> list[Unit]:
    """The reads for ``spec`` (whose ``labels`` may be empty when it is too large)."""
    label_set = question_type(spec.type).label_set
    orders = max(1, permutations) if spec.type == "choice" else 1
    units = []
    # Readers without label tokens (embedded, scripted) may take more options per read
    # than the label set has; those reads carry no labels.
    for chunk in _balanced(len(spec.options), max_options):
        idx = list(chunk)
        for p in range(orders if len(idx) > 1 else 1):
            shift = (p * len(idx)) // orders
            order = idx[shift:] + idx[:shift]
            read = replace(
                spec,
                options=tuple(spec.options[i] for i in order),
                descriptions=tuple(spec.descriptions[i] for i in order),
                labels=label_set[: len(order)] if len(order) <= len(label_set) else (),
                examples=tuple(spec.examples[i] for i in order) if spec.examples else (),
            )
            units.append(Unit(read, tuple(order)))
    return units


class QuestionPlans:
    """Each question's spec and reads (``to_spec`` then ``expand``), kept per question
    object (a node asks the same questions on every call). An entry is used only while
    its question still holds what it held when planned, and keeps the question alive,
    so its ``id`` cannot name another. At most ``size`` entries, then it starts over."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        # (qid, id(question), max_options, permutations) -> the question, a snapshot of
        # its fields, its spec and its reads
        self._plans: dict[tuple[Any, ...], tuple[Any, Any, QuestionSpec, list[Unit]]] = {}

    def plan(
        self, qid: str, question: Any, *, max_options: int, permutations: int
    ) -> tuple[QuestionSpec, list[Unit]]:
        """``question``'s spec and the reads that answer it."""
        key = (qid, id(question), max_options, permutations)
        held = getattr(question, "__dict__", None)
        hit = self._plans.get(key)
        if hit is not None and hit[0] is question and hit[1] == held:
            return hit[2], hit[3]
        spec = to_spec(qid, question)
        units = expand(spec, max_options=max_options, permutations=permutations)
        if held is not None:
            try:
                snapshot = copy.deepcopy(held)
            except Exception:  # noqa: BLE001 - a question we cannot snapshot is not kept
                return spec, units
            if len(self._plans) >= self.size:
                self._plans = {}  # (a new dict: another thread may be reading the old)
            self._plans[key] = (question, snapshot, spec, units)
        return spec, units


def check_read(qid: str, read: object, n_options: int) -> LabelRead:
    """``read`` if it is a valid read with ``n_options`` options: one log-probability per
    option in ``[-inf, 0]`` (up to ``ROUNDING`` above), ``label_mass`` in ``[0, 1]`` or
    ``None`` and ``agreement`` in ``[0, 1]``; else ``InvalidReadError`` for question
    ``qid`` (a NaN or +inf must never become a confident answer)."""

    def bad(what: str) -> InvalidReadError:
        return InvalidReadError(
            f"the reader's answer to question {qid!r} is invalid: {what}. The decision was "
            "not made; the reader or server is faulty (on_error applies)."
        )

    if not isinstance(read, LabelRead):
        raise bad(f"expected a LabelRead, got {type(read).__name__}")
    logprobs = read.logprobs
    if not isinstance(logprobs, tuple | list) or len(logprobs) != n_options:
        got = len(logprobs) if isinstance(logprobs, tuple | list) else type(logprobs).__name__
        raise bad(f"{got} log-probabilities for {n_options} options")
    for lp in logprobs:
        if isinstance(lp, bool) or not isinstance(lp, int | float):
            raise bad(f"log-probability {lp!r} is not a number")
        if math.isnan(lp) or lp > ROUNDING:
            raise bad(f"log-probability {lp!r} is not in [-inf, 0]")
    for name, value in (("label_mass", read.label_mass), ("agreement", read.agreement)):
        if name == "label_mass" and value is None:
            continue  # unknown: carried as unknown, never as a number
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not -ROUNDING <= value <= 1 + ROUNDING  # False for NaN too
        ):
            raise bad(f"{name} {value!r} is not in [0, 1]")
    return read


def combine(n_options: int, units: Sequence[Unit], reads: Sequence[LabelRead]) -> Combined:
    """Fold unit reads (each checked first) into scores over the ``n_options`` options.
    Chunks combine through their label mass, so chunks of reads with unknown label mass
    are refused (``InvalidReadError``) rather than recombined on a guess; permutations
    average as they are."""
    total = [0.0] * n_options
    count = [0] * n_options
    for unit, read in zip(units, reads):
        check_read(unit.spec.id, read, len(unit.option_indices))
    unknown = any(r.label_mass is None for r in reads)
    if unknown and any(len(u.option_indices) != n_options for u in units):
        raise InvalidReadError(
            f"question {units[0].spec.id!r} has {n_options} options, more than the reader "
            "reads at once, and its reads do not report their label mass, so the parts "
            "cannot be combined into one answer. Ask with fewer options (a server that "
            "speaks the System One spec reads up to 255 in one read)."
        )
    for unit, read in zip(units, reads):
        for i, lp in zip(unit.option_indices, read.logprobs):
            total[i] += math.exp(min(lp, 0.0))
            count[i] += 1
    return Combined(
        scores=[t / c if c else 0.0 for t, c in zip(total, count)],
        label_mass=None if unknown else min(1.0, max(0.0, _mean(r.label_mass for r in reads))),
        argmax_is_label=all(r.argmax_is_label for r in reads),
        agreement=min(1.0, max(0.0, _mean(r.agreement for r in reads))),
    )


def _mean(values: Iterable[float | None]) -> float:
    got = list(values)
    return sum(v or 0.0 for v in got) / len(got)


def normalise(scores: Sequence[float], temperature: float = 1.0) -> list[float] | None:
    """``p_i ∝ score_i^(1/T)``, relative to the top score so any finite ``T > 0`` gives a
    valid distribution; ``None`` when no option has any probability."""
    if not all(s >= 0 and math.isfinite(s) for s in scores):
        raise ValueError(f"scores must be finite and >= 0, got {list(scores)}")
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    positive = [s for s in scores if s > 0]
    if not positive:
        return None
    top = math.log(max(positive))
    # log(s) - top <= 0, so the exponent is in [-inf, 0]: no overflow, z >= 1.
    weights = [math.exp((math.log(s) - top) / temperature) if s > 0 else 0.0 for s in scores]
    z = sum(weights)
    return [w / z for w in weights]
