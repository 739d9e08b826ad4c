"""Labelled examples: reading and checking labelled JSON Lines files, and splitting them.

``parse_labelled`` and ``load_labelled`` read the format (docs/calibration.md; in full:
``parse_labelled``'s docstring) into ``Example``s, checked line by line; ``split``
makes a deterministic stratified (fit, held-out) split.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from agentbranch.core.errors import ConfigurationError, InvalidFileError, InvalidQuestionError
from agentbranch.core.files import json_lines, loads, short_repr
from agentbranch.core.questions import Question, coerce_question, to_spec

__all__ = [
    "EXPECTED_SHAPES",
    "STATE_KEYS",
    "Example",
    "ExampleLine",
    "HeaderLine",
    "Label",
    "load_labelled",
    "parse_labelled",
    "split",
]


@dataclass(frozen=True)
class Example:
    """One labelled question about one state."""

    state: Any
    question_id: str
    question: Question
    label: str
    #: Line number in the source file (1-based), for error messages and grouping.
    line: int = 0


def _label_for(qid: str, question: Question, raw: Any, where: str) -> str:
    spec = to_spec(qid, question)
    options = list(spec.options)
    if spec.type == "noul":
        text = str(raw).strip().lower()
        mapped = {"yes": "yes", "true": "yes", "1": "yes", "no": "no", "false": "no", "0": "no"}
        if text in mapped:
            return mapped[text]
    elif (
        spec.type in ("score", "choice")  # integer class labels, as most datasets ship
        and not isinstance(raw, bool)
        and (isinstance(raw, int) or _DIGITS.fullmatch(str(raw)))
        and str(raw) not in options
        and 0 <= int(raw) < len(options)
    ):
        return options[int(raw)]
    if str(raw) in options:
        return str(raw)
    raise InvalidQuestionError(
        f"{where}: label {short_repr(raw)} is not an option of question {qid!r}; options: {options}"
    )


_DIGITS = re.compile(r"[0-9]+")

#: Keys a labelled line may hold its state under, in order of preference.
STATE_KEYS = ("state", "text", "input")

EXPECTED_SHAPES = (
    'expected JSON Lines, one object per line, such as {"state": "...", "question": "<id>", '
    '"label": "<option>"}, {"state": "...", "labels": {"<id>": "<option>"}}, or '
    '{"text": "...", "label": "<option>"} with the question named by --question ID '
    '(questions defined in a header line {"questions": {...}} or --questions FILE.json); '
    "see docs/calibration.md"
)


def _label(value: Any) -> Any:
    # An option's name or its 0-based index (yes/no also true/false): a list, an object
    # or 1.5 is refused rather than turned into a string.
    if not isinstance(value, str | int):  # bool is an int
        raise ValueError(
            f"a label is an option name (a string) or its 0-based index, got {short_repr(value)}"
        )
    return value


def _question_ref(value: Any) -> Any:
    if not isinstance(value, str | dict):
        raise ValueError(
            "a question is an id (a string) or an inline question object, got " + short_repr(value)
        )
    return value


Label = Annotated[Any, AfterValidator(_label)]


class HeaderLine(BaseModel):
    """``{"questions": {"<id>": <wire question>, ...}}``: names the questions."""

    model_config = ConfigDict(extra="forbid", strict=True)
    questions: dict[str, dict[str, Any]]


class ExampleLine(BaseModel):
    """One labelled line, its state already under ``state``. Other keys (a dataset's own
    columns) are ignored."""

    model_config = ConfigDict(extra="allow", strict=True)
    state: Any
    question: Annotated[Any, AfterValidator(_question_ref)] = None
    label: Label | None = None
    labels: dict[str, Label] | None = None


def _validated(model: type[BaseModel], obj: dict[str, Any], where: str) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        from agentbranch.core.audit_records import describe

        raise ConfigurationError(f"{where}: {describe(e)}; {EXPECTED_SHAPES}") from None


def _examples_from(
    numbered: Iterable[tuple[int, Any]],
    questions: Mapping[str, Any] | None,
    source: str,
    default_question: str | None,
) -> list[Example]:
    named: dict[str, Question] = {
        qid: coerce_question(qid, q) for qid, q in (questions or {}).items()
    }
    examples: list[Example] = []
    for number, obj in numbered:
        where = f"{source}:{number}"
        if not isinstance(obj, dict):
            raise ConfigurationError(f"{where}: each line must be a JSON object; {EXPECTED_SHAPES}")
        key = next((k for k in STATE_KEYS if k in obj), None)
        if "questions" in obj and key is None:
            for qid, q in _validated(HeaderLine, obj, where).questions.items():
                named[qid] = _question(qid, q, where)
            continue
        if key is None:
            raise ConfigurationError(
                f"{where}: no state ('state', 'text' or 'input'); found keys {sorted(obj)}; "
                + EXPECTED_SHAPES
            )
        line = _validated(ExampleLine, {**obj, "state": obj[key]}, where)
        if line.labels is not None:
            pairs: list[tuple[Any, Any]] = list(line.labels.items())
        elif line.question is not None and line.label is not None:
            pairs = [(line.question, line.label)]
        elif line.label is not None and default_question:
            pairs = [(default_question, line.label)]
        elif line.label is not None:
            raise ConfigurationError(
                f"{where}: a label without a question; name the question these lines answer "
                '(--question ID, or default_question=) or add "question": "<id>" to each line'
            )
        else:
            raise ConfigurationError(f"{where}: no label; {EXPECTED_SHAPES}")
        for ref, raw in pairs:
            if isinstance(ref, Mapping):
                qid = obj.get("id") or ref.get("id") or ""
                if not isinstance(qid, str) or not qid.strip():
                    raise ConfigurationError(
                        f"{where}: an inline question needs an 'id' (a non-empty string)"
                    )
                question = _question(qid, {k: v for k, v in ref.items() if k != "id"}, where)
                named.setdefault(qid, question)
            else:
                qid = str(ref)
                if qid not in named:
                    raise ConfigurationError(
                        f"{where}: unknown question {qid!r}; define it in a header line "
                        '{"questions": {...}} or pass --questions FILE.json'
                    )
                question = named[qid]
            examples.append(
                Example(line.state, qid, question, _label_for(qid, question, raw, where), number)
            )
    if not examples:
        raise ConfigurationError(f"{source}: no labelled examples found")
    return examples


def _question(qid: str, spec: Any, where: str) -> Question:
    try:
        return coerce_question(qid, spec)
    except InvalidQuestionError as e:
        raise InvalidQuestionError(f"{where}: {e}") from None


def parse_labelled(
    lines: Iterable[str],
    questions: Mapping[str, Any] | None = None,
    *,
    source: str = "<data>",
    default_question: str | None = None,
) -> list[Example]:
    """Examples from JSON Lines text (the format: below). Every line is
    checked (``HeaderLine``, ``ExampleLine``); errors name ``source``, the line and the
    field.

    Format (JSON Lines, one object per line; see docs/calibration.md):

    * an optional header line ``{"questions": {"<id>": <wire question>, ...}}`` defining
      named questions (wire questions are ``{"type": "choice"|"noul"|"score",
      "instructions": ..., "criteria": ...}`` as in ``/v1/systemone``);
    * example lines ``{"state": <text or JSON>, "question": "<id>", "label": "<option>"}``;
      ``question`` may also be a wire question inline, with ``"id"`` naming it; or
      ``{"state": ..., "labels": {"<id>": "<option>", ...}}`` for several questions about
      one state (read in one request).

    Common shapes work too: ``"text"`` or ``"input"`` instead of ``"state"``, and lines
    without a question (``{"text": ..., "label": ...}``, as most labelled sets come) when a
    ``default_question`` id names the question they answer (``--question`` on the CLI).

    Labels are option names; yes/no labels may be ``yes``/``no``/``true``/``false``; choice
    and score labels may be the option (level) name or its 0-based index.
    """

    def numbered() -> Iterator[tuple[int, Any]]:
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if line and not line.startswith("//"):
                yield number, loads(line, f"{source}:{number}")

    try:
        return _examples_from(numbered(), questions, source, default_question)
    except InvalidFileError as e:
        raise ConfigurationError(f"{e}; {EXPECTED_SHAPES}") from None


def load_labelled(
    path: str | Path,
    questions: Mapping[str, Any] | None = None,
    *,
    default_question: str | None = None,
) -> list[Example]:
    """Examples from a labelled JSON Lines file, streamed and checked line by line; a
    file that cannot be read as one is an ``InvalidFileError`` naming it."""
    path = Path(path)
    if path.suffix.lower() in (".csv", ".tsv", ".parquet", ".xlsx"):
        raise InvalidFileError(f"{path}: {path.suffix} is not read; {EXPECTED_SHAPES}")
    return _examples_from(json_lines(path, "labelled file"), questions, str(path), default_question)


def split(
    examples: Sequence[Example], holdout: float, *, seed: int = 0
) -> tuple[list[Example], list[Example]]:
    """A deterministic (fit, held-out) split, stratified by question id and label.
    Examples from one source line stay on one side."""
    if not (isinstance(holdout, int | float) and 0.0 <= holdout < 1.0):
        raise ConfigurationError(f"holdout must be in [0, 1), got {holdout!r}")
    if holdout == 0.0:
        return list(examples), []
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    lines: dict[int, list[Example]] = defaultdict(list)
    for i, ex in enumerate(examples):
        key = ex.line or -(i + 1)
        if key not in lines:
            groups[(ex.question_id, ex.label)].append(key)
        lines[key].append(ex)
    rng = random.Random(seed)
    held: set[int] = set()
    for key in sorted(groups):
        keys = sorted(set(groups[key]) - held)
        rng.shuffle(keys)
        held.update(keys[: round(len(keys) * holdout)])
    fit = [ex for k, exs in lines.items() if k not in held for ex in exs]
    test = [ex for k, exs in lines.items() if k in held for ex in exs]
    return fit, test
