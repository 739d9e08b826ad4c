"""The reading fingerprint: which settings shaped a decision's confidence.

A threshold earned on one confidence scale means nothing on another, so ``fingerprint``
hashes every setting that moves confidences and differs from its default into
``Decision.reading`` (what counts and why: its docstring), and ``Earned`` keys its
evidence by it; ``reader_settings`` collects a reader's own.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from typing import Any

__all__ = ["PLANNER_SETTINGS", "READER_SETTINGS", "fingerprint", "reader_settings"]

#: Reader attributes that reshape confidences (compared with the constructor default).
READER_SETTINGS: tuple[str, ...] = (
    "temperature",
    "top_k",
    "example_weight",
    "prototype_weight",
    "full_weight_examples",
    "max_length",
    "constrained",
    "max_steps",
)

#: Settings of a canvas reader's chat prompt (``reader.planner.chat``) that reshape what
#: the model reads, with their defaults.
PLANNER_SETTINGS: dict[str, Any] = {
    "chat_template": None,
    "template_kwargs": {},
    "special_tokens": "reject",
}


def _innermost(reader: Any) -> Any:
    seen = 0
    while getattr(reader, "inner", None) is not None and seen < 16:
        reader, seen = reader.inner, seen + 1
    return reader


def _plain(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def reader_settings(reader: Any) -> dict[str, Any]:
    """The reader's confidence-shaping settings that differ from their defaults."""
    reader = _innermost(reader)
    own = getattr(reader, "reading_settings", None)
    if callable(own):
        return {str(k): _plain(v) for k, v in dict(own()).items()}
    try:
        params = inspect.signature(type(reader).__init__).parameters
    except (TypeError, ValueError):
        return {}
    out: dict[str, Any] = {}
    for name in READER_SETTINGS:
        if name not in params or not hasattr(reader, name):
            continue
        value, default = getattr(reader, name), params[name].default
        try:
            same = default is not inspect.Parameter.empty and bool(value == default)
        except Exception:  # noqa: BLE001 - an odd value counts as changed
            same = False
        if not same:
            out[name] = _plain(value)
    chat = getattr(getattr(reader, "planner", None), "chat", None)
    for name, default in PLANNER_SETTINGS.items():
        value = getattr(chat, name, default) if chat is not None else default
        if value != default:
            out[f"planner.{name}"] = _plain(value)
    return out


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
    question. Reader: the scoring settings named in ``READER_SETTINGS`` that the reader
    holds with a value other than its constructor's default (the embedded reader's
    temperature and weights, a vLLM reader's denoising steps and constraint ...), a canvas
    reader's chat template, template arguments and special-token handling
    (``PLANNER_SETTINGS``), or whatever a reader's own ``reading_settings()`` returns.
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
