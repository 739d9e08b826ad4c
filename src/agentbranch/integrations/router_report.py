"""``ShadowReport``: what the engine did in front of a router (``decide_first``): how
often it agreed with the router, what it took or would have taken, and the router calls
(and money) that saves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Mode", "ShadowReport"]

Mode = Literal["shadow", "live"]


@dataclass
class ShadowReport:
    """What the engine did in front of the router (``DecideFirst.report()``; ``print`` it).

    ``decisions``: decisions made; ``taken``: those the engine was sure of (in shadow
    mode: would have taken); ``compared``: decisions where both the engine and the
    router answered, ``agreed`` of them the same; ``taken_compared``/``taken_agreed``
    the same among the taken ones (how right the take band is against the router);
    ``router_calls``: calls of the router made; ``calls_saved``: router calls not made
    (in shadow mode: the takes, which live mode would not send to the router, less the
    audited share); ``price_per_call`` turns them into money. ``take_at`` and ``trust``:
    the threshold in force at the last decision (``None``: nothing is taken yet)."""

    question_id: str
    mode: Mode
    decisions: int = 0
    taken: int = 0
    compared: int = 0
    agreed: int = 0
    taken_compared: int = 0
    taken_agreed: int = 0
    router_calls: int = 0
    engine_errors: int = 0
    audit_rate: float = 0.0
    price_per_call: float | None = None
    take_at: float | None = None
    trust: str | None = None

    @property
    def calls_saved(self) -> float:
        if self.mode == "live":
            return float(self.decisions - self.router_calls)
        return self.taken * (1.0 - self.audit_rate)

    @property
    def money_saved(self) -> float | None:
        if self.price_per_call is None:
            return None
        return self.calls_saved * self.price_per_call

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.compared if self.compared else None

    @property
    def take_agreement(self) -> float | None:
        return self.taken_agreed / self.taken_compared if self.taken_compared else None

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for name in ("calls_saved", "money_saved", "agreement", "take_agreement"):
            out[name] = getattr(self, name)
        return out

    def __str__(self) -> str:
        def share(n: int, d: int) -> str:
            return f"{n}/{d} ({n / d:.0%})" if d else f"{n}/0"

        would = "would have taken" if self.mode == "shadow" else "taken"
        lines = [
            f"{self.question_id} ({self.mode}): {self.decisions} decisions",
            f"  engine agreed with the router: {share(self.agreed, self.compared)}",
            f"  {would} without the router: {share(self.taken, self.decisions)}, "
            f"right on {share(self.taken_agreed, self.taken_compared)} checked",
            f"  router calls made: {self.router_calls}",
        ]
        if self.decisions:
            at = "nothing taken yet" if self.take_at is None else f"take_at {self.take_at:.2f}"
            lines.insert(1, f"  threshold in force now: {at} ({self.trust})")
        if self.mode == "shadow":
            saved = f"  router calls live mode would save: {self.calls_saved:.4g}"
            if self.audit_rate:
                saved += f" (it would still audit {self.audit_rate:.0%} of the takes)"
        else:
            saved = f"  router calls saved: {self.calls_saved:.4g}"
        if self.money_saved is not None:
            saved += f", {self.money_saved:.4g} at {self.price_per_call:g} a call"
        lines.append(saved)
        if self.engine_errors:
            lines.append(f"  engine errors (the router decided): {self.engine_errors}")
        return "\n".join(lines)
