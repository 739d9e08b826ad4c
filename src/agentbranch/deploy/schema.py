"""The canvas a question schema needs, with the chunking the engine does: a single read
sends one 16-token canvas per question; a joint read writes one ``"k: <slot>\\n"`` line
per question on one canvas, rounded up to 16, split into the fewest even runs that fit
the served canvas (``agentbranch.engine.canvas.joint_spans``). Line ``k`` takes
``digits(k) + 3`` tokens with Gemma's tokenizer; pass another's ``encode`` to count with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.core.question_types import question_type
from agentbranch.core.questions import to_spec, validate_questions
from agentbranch.engine.canvas import CANVAS_STEP, MAX_JOINT_QUESTIONS, joint_spans, joint_width

__all__ = ["SchemaCanvas", "load_questions", "schema_canvas"]

Encode = Callable[[str], Sequence[int]]


@dataclass(frozen=True)
class SchemaCanvas:
    """The canvas a question schema is read on."""

    questions: int
    joint: bool
    #: The canvas vLLM must serve (``diffusion_config={"canvas_length": ...}``).
    canvas_length: int
    #: Requests (vLLM sequences) one decision takes: one per question for single reads,
    #: one per chunk for joint reads.
    reads_per_decision: int
    #: Each request's canvas width (``diffusion_canvas_length``).
    widths: tuple[int, ...]


def load_questions(path: str | Path) -> dict[str, Any]:
    """A questions file: JSON ``{id: wire question}`` (docs/questions.md), as every
    ``--questions`` flag reads it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InvalidFileError(f"cannot read questions file {path}: {e}") from None
    if not isinstance(data, Mapping):
        raise InvalidFileError(
            f"{path}: expected a JSON object {{id: question}} (docs/questions.md)"
        )
    return dict(data)


def schema_canvas(
    questions: Mapping[str, Any],
    *,
    joint: bool = True,
    max_canvas: int = 256,
    encode: Encode | None = None,
) -> SchemaCanvas:
    """The served canvas and the reads one decision over ``questions`` takes.

    Joint: the narrowest canvas (a multiple of 16, at most ``max_canvas``) that holds all
    the answer lines on one canvas; when even ``max_canvas`` cannot, the engine's chunks
    at ``max_canvas``. Single (or one question): 16.
    """
    specs = [to_spec(question_id, q) for question_id, q in validate_questions(questions).items()]
    rows = []  # tokens of each joint answer line: the "k: " prefix, the slot, the newline
    for k, spec in enumerate(specs, 1):
        if encode is None:  # Gemma's: a token per digit of k, and ":"
            prefix = len(str(k)) + 1
        else:
            label = question_type(spec.type).label_set[0]
            prefix = len(list(encode(f"{k}: {label}"))) - 1
        rows.append(prefix + 2)
    n = len(rows)
    if not joint or n == 1:
        return SchemaCanvas(n, False, CANVAS_STEP, n, (CANVAS_STEP,) * n)
    if n > MAX_JOINT_QUESTIONS:
        raise ConfigurationError(
            f"a joint read holds at most {MAX_JOINT_QUESTIONS} questions, got {n}; "
            "split the schema or read it single"
        )
    if max_canvas < CANVAS_STEP:
        raise ConfigurationError(f"the canvas must be at least {CANVAS_STEP} tokens")
    # The whole schema on one canvas: its lines, <turn|>, and a pad row.
    one = joint_width(sum(rows) + 1)
    served = min(one, max_canvas - max_canvas % CANVAS_STEP)
    spans = joint_spans(rows, served)
    widths = tuple(min(joint_width(sum(rows[a:b]) + 1), served) for a, b in spans)
    return SchemaCanvas(n, True, max(widths), len(spans), widths)
