"""Calibration the engine applies: a temperature per question id (or per type).

``p_i ∝ p̃_i^(1/T)`` where ``p̃`` are the reader's label probabilities; ``T > 1``
flattens an over-confident reader, ``T < 1`` sharpens an under-confident one. Fitting
lives in ``agentbranch.calibration``; this module is what a saved file (a JSON object
with a format ``version``) loads into, every field checked.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from agentbranch.core.errors import ConfigurationError, InvalidFileError, temperature, unit
from agentbranch.core.files import check_regular

__all__ = ["CALIBRATION_VERSION", "Calibration", "Temperature", "Threshold"]

logger = logging.getLogger("agentbranch.calibration")

#: The file format this version of agentbranch writes and reads.
CALIBRATION_VERSION = 1


def _version(v: int) -> int:
    if v != CALIBRATION_VERSION:
        raise ValueError(
            f"format version {v!r} is not {CALIBRATION_VERSION}, the one this agentbranch "
            "reads; re-run `agentbranch calibrate` with this version"
        )
    return v


# strict: a bool or a string is not a number here (ints are).
Temperature = Annotated[float, Field(strict=True), AfterValidator(temperature)]
Threshold = Annotated[float, Field(strict=True), AfterValidator(unit)]


class Calibration(BaseModel):
    """Temperatures by question id, then by question type, else ``default``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    #: The file format version (``CALIBRATION_VERSION``).
    version: Annotated[int, Field(strict=True), AfterValidator(_version)] = CALIBRATION_VERSION
    temperatures: dict[str, Temperature] = Field(default_factory=dict)
    by_type: dict[Literal["choice", "noul", "score"], Temperature] = Field(default_factory=dict)
    default: Temperature = 1.0
    #: Suggested confidence thresholds by question id (from ``agentbranch calibrate``).
    thresholds: dict[str, Threshold] = Field(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise ConfigurationError(f"invalid calibration: {_describe(e)}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except ValidationError as e:
            raise ConfigurationError(f"invalid calibration: {_describe(e)}") from None

    def temperature(self, question_id: str, question_type: str) -> float:
        """The temperature for one question."""
        if question_id in self.temperatures:
            return self.temperatures[question_id]
        return self.by_type.get(question_type, self.default)  # type: ignore[call-overload]

    def check(self, question_ids: Iterable[str], *, strict: bool = False) -> list[str]:
        """The question ids this calibration has temperatures or thresholds for that are
        not among ``question_ids`` (the questions your graph asks): a renamed question
        would silently go uncalibrated. They are logged as a warning on the
        ``agentbranch.calibration`` logger, or raise ``ConfigurationError`` when
        ``strict``."""
        asked = set(question_ids)
        unknown = sorted((set(self.temperatures) | set(self.thresholds)) - asked)
        if unknown:
            message = (
                f"the calibration has temperatures or thresholds for question ids that are "
                f"never asked: {unknown} (asked: {sorted(asked)}); rename the questions or "
                "re-run `agentbranch calibrate` on labels with the current ids"
            )
            if strict:
                raise ConfigurationError(message)
            logger.warning(message)
        return unknown

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write as JSON (with the format version), atomically; a symlink's target is
        replaced. A missing folder or a directory at ``path`` is an ``InvalidFileError``."""
        path = Path(path)
        target = path.resolve() if path.is_symlink() else path
        if target.is_dir():
            raise InvalidFileError(f"cannot save the calibration to {path}: it is a directory")
        if not target.parent.is_dir():
            raise InvalidFileError(
                f"cannot save the calibration to {path}: folder {target.parent} does not exist"
            )
        text = json.dumps(self.model_dump(), indent=2) + "\n"
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise InvalidFileError(
                f"cannot save the calibration to {path}: {e.strerror or e}"
            ) from None
        return path

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        question_ids: Iterable[str] | None = None,
        strict: bool = False,
    ) -> Calibration:
        """Read a file written by ``save`` (or ``agentbranch calibrate``); a missing,
        unreadable or malformed file raises ``InvalidFileError`` naming it. With
        ``question_ids``, ids the file calibrates but never asked are reported (``check``)."""
        path = Path(path)
        data = _read_json(path)
        if not isinstance(data, dict):
            raise InvalidFileError(
                f"calibration file {path}: expected a JSON object, got {type(data).__name__}"
            )
        if "version" not in data:
            raise InvalidFileError(
                f"calibration file {path} has no format version; re-run `agentbranch "
                f'calibrate` to write a current one (or add "version": {CALIBRATION_VERSION} '
                "if it was written by this version)"
            )
        try:
            calibration = cls(**data)
            if question_ids is not None:
                calibration.check(question_ids, strict=strict)
        except ConfigurationError as e:
            raise InvalidFileError(f"calibration file {path}: {e}") from None
        return calibration


def _read_json(path: Path) -> Any:
    """The JSON in ``path``, or ``InvalidFileError`` saying what is wrong with it."""
    hint = f"write one with `agentbranch calibrate labelled.jsonl --out {path}`"
    check_regular(path, "calibration file", hint)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InvalidFileError(f"calibration file {path} cannot be read: {e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidFileError(
            f"calibration file {path} is not UTF-8 text (byte {e.start}); is it the JSON "
            "file `agentbranch calibrate` wrote?"
        ) from None
    if not text.strip():
        raise InvalidFileError(f"calibration file {path} is empty")
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidFileError(
            f"calibration file {path}: JSON nested too deeply to read; it is not a file "
            "`agentbranch calibrate` wrote"
        ) from None
    except json.JSONDecodeError as e:
        raise InvalidFileError(
            f"calibration file {path}, line {e.lineno} column {e.colno}: not valid JSON "
            f"({e.msg}); the file may be truncated or hand-edited"
        ) from None


def _describe(error: ValidationError) -> str:
    """Pydantic's errors as ``field.path: message; ...``."""
    parts = []
    for err in error.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown field (another format or a typo)"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def golden_section(
    f: Callable[[float], float], a: float, b: float, *, tol: float = 0.0, steps: int | None = None
) -> tuple[float, float]:
    """The bracket ``(a, b)`` golden-section search narrows around a minimum of the
    unimodal ``f`` on ``[a, b]``: until it is at most ``tol`` wide, or after ``steps``."""
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    done = 0
    while b - a > tol and (steps is None or done < steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
        done += 1
    return a, b
