"""The reading fingerprint: which settings shaped a decision's confidence.

A threshold earned on one confidence scale means nothing on another, so ``fingerprint``
hashes every setting that moves confidences and differs from its default into
``Decision.reading`` (what counts and why: its docstring), and ``Earned`` keys its
evidence by it; ``reader_settings`` collects a reader's own.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agentbranch.engine.readers.base import Reader

__all__ = ["fingerprint", "reader_settings"]


def _plain(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def reader_settings(reader: Reader) -> dict[str, Any]:
    """The confidence-shaping settings (``Reader.reading_settings``) of the reader that
    does the reading: the innermost of the readers ``reader`` reads through."""
    *_, innermost = reader.chain()
    return {str(k): _plain(v) for k, v in dict(innermost.reading_settings()).items()}


def fingerprint(
    *,
    instructions: str | None,
    joint: bool,
    draws: int,
    permutations: int,
    temperature: float,
    reader: dict[str, Any],
) -> str | None:
    """``Decision.reading`` for these settings: ``None`` when every one
    is its default, else a short hash of those that are not.

    A confidence is compared with a threshold, and a threshold earned on one confidence
    scale means nothing on another: sharper temperatures, more draws or permutations, a
    joint canvas, other instructions or another scoring setup of the reader all move the
    same answer to another confidence. ``fingerprint`` hashes every such setting that
    differs from its default into ``Decision.reading`` (``None`` when none does), and
    ``Earned`` keys its evidence by it: a changed scale starts learning again.

    What counts (engine): ``instructions``, ``joint``, the draws of the read (``draws``, or
    a call's ``draws=``), ``permutations``, and the temperature the calibration gives this
    question. Reader: what its ``reading_settings()`` returns (``Reader`` declares the
    default: the constructor arguments it holds with a value other than their default,
    but those it declares in ``reading_ignores``): the embedded reader's temperature
    and weights, a vLLM reader's denoising steps and constraint, a token reader's chat
    template, template arguments and special-token handling ...
    Question wording, options and examples are in the evidence key already; reader name
    and model too.
    """
    settings: dict[str, Any] = {}
    if instructions is not None:
        settings["instructions"] = instructions
    if joint:
        settings["joint"] = True
    if draws != 1:
        settings["draws"] = int(draws)
    if permutations != 1:
        settings["permutations"] = int(permutations)
    if temperature != 1.0:
        settings["temperature"] = repr(float(temperature))
    if reader:
        settings["reader"] = reader
    if not settings:
        return None
    blob = json.dumps(settings, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
