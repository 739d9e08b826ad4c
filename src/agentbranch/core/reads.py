"""The plain dataclasses that cross the reader boundary (docs/design.md): ``ReadRequest``
→ ``LabelRead`` (one per question, in order) is what every reader implements;
``TokenRead`` → ``SlotLogprobs`` is what token-level readers run once the canvas planner
turned a request into token ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["LabelRead", "QuestionSpec", "ReadRequest", "Slot", "SlotLogprobs", "TokenRead"]


@dataclass(frozen=True)
class QuestionSpec:
    """One question as a reader sees it: labels already assigned, options in order.

    ``labels[i]`` is the single-token label the model answers with for ``options[i]``;
    ``descriptions[i]`` may be ``None``.
    """

    id: str
    type: str  # "choice" | "noul" | "score"
    instructions: str
    options: tuple[str, ...]
    descriptions: tuple[str | None, ...]
    labels: tuple[str, ...]
    #: Example states per option, in option order (``()`` when the question has none).
    examples: tuple[tuple[str, ...], ...] = ()
    #: A learned head (``agentbranch.core.heads.LinearHead``) the embedded reader reads
    #: the question with (``Earned(..., learn=True)``); other readers ignore it.
    head: Any = None


@dataclass(frozen=True)
class ReadRequest:
    """One state and the questions to read on it.

    ``draws`` asks token readers for that many independent noise draws per slot
    (averaged, agreement reported); other readers may ignore it. ``joint`` asks canvas
    readers to put all questions on one canvas when they fit.
    """

    state: str
    questions: tuple[QuestionSpec, ...]
    instructions: str | None = None
    draws: int = 1
    joint: bool = False


@dataclass(frozen=True)
class LabelRead:
    """The read of one question.

    ``logprobs[i]`` is the log-score of ``labels[i]`` (for model readers the
    full-vocabulary log probability at the answer slot); the engine softmaxes them.
    ``label_mass`` is the labels' total probability over the vocabulary (1.0 for readers
    with none), ``None`` when unknown: nothing is made up, and a ``min_label_mass`` floor
    takes nothing on such a read. ``agreement``: the share of noise draws whose top label
    matched the averaged one.

    ``extras``: diagnostics, plus keys the engine reads, on the FIRST read of a request
    only: ``"usage"`` (``{"input_tokens", "output_tokens"}``), ``"request_id"``, and
    ``"calibrated": True`` when the reader scaled the read with a fitted temperature.
    """

    logprobs: tuple[float, ...]
    label_mass: float | None = 1.0
    argmax_is_label: bool = True
    agreement: float = 1.0
    extras: dict[str, object] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Slot:
    """An answer slot on a canvas (or the first reply token for next-token reads).

    ``label_ids[i]`` holds every token id that counts for label ``i`` (a label scores
    its best one), e.g. ``(id(" A"), id("A"))`` in a joint read.
    """

    position: int
    label_ids: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class TokenRead:
    """One model pass: prompt ids (thought block included), the seeded canvas (empty
    for next-token reads) and the slots to read."""

    prompt_ids: tuple[int, ...]
    canvas: tuple[int, ...]
    slots: tuple[Slot, ...]
    #: How many leading canvas positions the read returns (vLLM's ``max_tokens``):
    #: 2 for a single canvas read, last slot + 1 for a joint read, 1 for next-token.
    read_length: int = 1


@dataclass(frozen=True)
class SlotLogprobs:
    """Label logprobs at one slot.

    ``logprobs[i]``: max over label ``i``'s ids of the full-vocabulary log probability;
    ``label_mass``: Σ exp(logprob) over the distinct ids of all labels;
    ``argmax_is_label``: whether the full-vocabulary argmax is one of those ids.
    """

    logprobs: tuple[float, ...]
    label_mass: float
    argmax_is_label: bool
