"""Labelled examples: labelled JSON Lines files read and checked into ``Example``s
(``parse_labelled``, ``load_labelled``), and a deterministic stratified ``split``.
"""

from __future__ import annotations

import random
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


def _label_for(question_id: str, question: Question, raw: Any, where: str) -> str:
    spec = to_spec(question_id, question)
    options = list(spec.options)
    if spec.type == "noul":
        text = str(raw).strip().lower()
        mapped = {"yes": "yes", "true": "yes", "1": "yes", "no": "no", "false": "no", "0": "no"}
        if text in mapped:
            return mapped[text]
    elif (
        spec.type in ("score", "choice")  # integer class labels, as most datasets ship
        and not isinstance(raw, bool)
        and (isinstance(raw, int) or (str(raw).isascii() and str(raw).isdigit()))
        and str(raw) not in options
        and 0 <= int(raw) < len(options)
    ):
        return options[int(raw)]
    if str(raw) in options:
        return str(raw)
    raise InvalidQuestionError(
        f"{where}: label {short_repr(raw)} is not an option of question {question_id!r}; "
        f"options: {options}"
    )


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
    # A list, an object or 1.5 is refused rather than turned into a string.
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
        question_id: coerce_question(question_id, q) for question_id, q in (questions or {}).items()
    }
    examples: list[Example] = []
    for number, obj in numbered:
        where = f"{source}:{number}"
        if not isinstance(obj, dict):
            raise ConfigurationError(f"{where}: each line must be a JSON object; {EXPECTED_SHAPES}")
        key = next((k for k in STATE_KEYS if k in obj), None)
        if "questions" in obj and key is None:
            for question_id, q in _validated(HeaderLine, obj, where).questions.items():
                named[question_id] = _question(question_id, q, where)
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
                question_id = obj.get("id") or ref.get("id") or ""
                if not isinstance(question_id, str) or not question_id.strip():
                    raise ConfigurationError(
                        f"{where}: an inline question needs an 'id' (a non-empty string)"
                    )
                spec = {k: v for k, v in ref.items() if k != "id"}
                question = _question(question_id, spec, where)
                named.setdefault(question_id, question)
            else:
                question_id = str(ref)
                if question_id not in named:
                    raise ConfigurationError(
                        f"{where}: unknown question {question_id!r}; define it in a header line "
                        '{"questions": {...}} or pass --questions FILE.json'
                    )
                question = named[question_id]
            label = _label_for(question_id, question, raw, where)
            examples.append(Example(line.state, question_id, question, label, number))
    if not examples:
        raise ConfigurationError(f"{source}: no labelled examples found")
    return examples


def _question(question_id: str, spec: Any, where: str) -> Question:
    try:
        return coerce_question(question_id, spec)
    except InvalidQuestionError as e:
        raise InvalidQuestionError(f"{where}: {e}") from None


def parse_labelled(
    lines: Iterable[str],
    questions: Mapping[str, Any] | None = None,
    *,
    source: str = "<data>",
    default_question: str | None = None,
) -> list[Example]:
    """Examples from labelled JSON Lines text (the format: docs/calibration.md, "The
    labelled file"). Every line is checked (``HeaderLine``, ``ExampleLine``); errors name
    ``source``, the line and the field. ``default_question`` names the question of lines
    that name none (``--question`` on the CLI)."""

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
