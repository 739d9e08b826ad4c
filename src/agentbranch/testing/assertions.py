"""Assertions for decision tests: a label with a minimum probability or confidence, or a
band, of a ``Decision`` or a decision record (``state["decisions"]["team"]``). A failure
prints the whole decision, so a test that breaks says why::

    assert_decision(record, label="billing", min_probability=0.7)
    assert_band(record, "take")
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from agentbranch.core.decisions import Decision

__all__ = ["assert_band", "assert_decision", "describe_decision"]

BANDS = ("take", "fallback", "review", "error")


def _fields(decision: Any) -> dict[str, Any]:
    if isinstance(decision, Decision):
        return decision.model_dump()
    if isinstance(decision, Mapping) and "probabilities" in decision:
        return dict(decision)
    raise TypeError(
        "expected a Decision (engine.decide(...)[question_id]) or a decision record "
        f"(state['decisions'][question_id]), got {type(decision).__name__}"
    )


def describe_decision(decision: Decision | Mapping[str, Any]) -> str:
    """The whole decision as text: each option's probability (most likely first), the
    entropy and confidence, the band and what decided it."""
    d = _fields(decision)
    lines = [f"decision {d.get('question_id')!r}: label {d.get('label')!r}"]
    probs = d.get("probabilities")
    if probs:
        width = max(len(str(o)) for o in probs)
        for option, p in sorted(probs.items(), key=lambda kv: -kv[1]):
            bar = "#" * round(20 * p) if math.isfinite(p) else "?"
            lines.append(f"  {option:<{width}}  {p:6.3f}  {bar}")
    else:
        lines.append("  no distribution (the engine gave no read)")
    numbers = [
        f"{name} {d[name]:.3f}"
        for name in ("entropy", "confidence", "margin", "label_mass")
        if isinstance(d.get(name), int | float)
    ]
    if numbers:
        lines.append("  " + ", ".join(numbers))
    band = d.get("band")
    if band is not None:
        take_at = d.get("take_at")
        at = "nothing taken" if take_at is None else f"take_at {take_at:.3f}"
        lines.append(f"  band {band!r} ({at}, trust {d.get('trust')!r})")
    by = d.get("decided_by")
    if by is not None:
        said = f"  decided by {by!r}"
        if d.get("engine_label") is not None and d.get("engine_label") != d.get("label"):
            said += f" (the engine said {d['engine_label']!r})"
        fallback = d.get("fallback") or {}
        if fallback.get("model"):
            said += f", fallback {fallback.get('kind')} {fallback['model']!r}"
        if d.get("goto"):
            said += f", goto {d['goto']!r}"
        if d.get("error"):
            said += f", error {d['error']}"
        lines.append(said)
    lines.append(f"  reader {d.get('reader')!r}, model {d.get('model')!r}")
    return "\n".join(lines)


def _number(name: str, value: Any) -> float | None:
    if value is None:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1
    if not ok:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def assert_decision(
    decision: Decision | Mapping[str, Any],
    label: str | None = None,
    *,
    min_probability: float | None = None,
    min_confidence: float | None = None,
) -> None:
    """Assert the decision's label is ``label`` (when given), that ``label`` (else the
    decision's own label) has at least ``min_probability``, and that its confidence is
    at least ``min_confidence``. A failure's message holds the whole decision."""
    d = _fields(decision)
    min_p = _number("min_probability", min_probability)
    min_c = _number("min_confidence", min_confidence)
    options = d.get("options") or list(d.get("probabilities") or {})
    if label is not None and options and label not in options:
        raise ValueError(f"label {label!r} is not an option of this decision: {options}")
    problems = []
    if label is not None and d.get("label") != label:
        problems.append(f"label is {d.get('label')!r}, expected {label!r}")
    if min_p is not None:
        wanted = label if label is not None else d.get("label")
        p = (d.get("probabilities") or {}).get(wanted)
        if p is None or not p >= min_p:
            problems.append(f"P({wanted!r}) is {_show(p, min_p)}, expected at least {min_p:g}")
    if min_c is not None:
        c = d.get("confidence")
        if c is None or not c >= min_c:
            problems.append(f"confidence is {_show(c, min_c)}, expected at least {min_c:g}")
    if problems:
        raise AssertionError("; ".join(problems) + "\n" + describe_decision(decision))


def assert_band(
    decision: Decision | Mapping[str, Any], band: str, *, take_at: float | None = None
) -> None:
    """Assert the decision's band (``"take"``, ``"fallback"``, ``"review"``,
    ``"error"``). A record carries its band; a bare ``Decision`` has none until a policy
    bands it, so give ``take_at``: at or above it is ``"take"``, below ``"fallback"``."""
    if band not in BANDS:
        raise ValueError(f"band must be one of {list(BANDS)}, got {band!r}")
    d = _fields(decision)
    if isinstance(decision, Decision):
        at = _number("take_at", take_at)
        if at is None:
            raise ValueError(
                "a Decision has no band until a policy bands it: give take_at= (the "
                "threshold), or assert on the decision record a router or node wrote"
            )
        got = "take" if decision.confidence >= at else "fallback"
        d["band"], d["take_at"], d["trust"] = got, at, "fixed"
    elif take_at is not None:
        raise ValueError("a decision record carries its band and take_at; give no take_at=")
    if d.get("band") != band:
        raise AssertionError(
            f"band is {d.get('band')!r}, expected {band!r}\n" + describe_decision(d)
        )


def _show(value: Any, bound: float) -> str:
    """``value`` to 3 decimals, or in full where rounding would hide that it is below
    ``bound`` (0.8999999 is not "0.900")."""
    if value is None:
        return "missing"
    shown = f"{value:.3f}"
    return repr(float(value)) if float(shown) >= bound else shown
