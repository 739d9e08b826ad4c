"""``TokenReader``: the shared half of every model reader (transformers, vLLM).

A subclass owns a planner (``CanvasPlanner`` or ``NextTokenPlanner``) and implements
``read_tokens``: token ids and label ids in, label logprobs out. ``read`` plans every
request, runs the whole batch through ONE ``read_tokens`` call and folds noise draws
back into one ``LabelRead`` per question.
"""

from __future__ import annotations

import dataclasses
import math
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from agentbranch.core.errors import ReaderError
from agentbranch.core.reads import LabelRead, ReadRequest, SlotLogprobs, TokenRead
from agentbranch.engine.canvas import CanvasPlanner, NextTokenPlanner, ReadPlan
from agentbranch.engine.readers.base import Reader

__all__ = ["PLANNER_SETTINGS", "TokenReader", "fold_draws"]

#: Settings of a token reader's chat prompt (``ChatPrompt`` attributes) that reshape what
#: the model reads, with their defaults.
PLANNER_SETTINGS: dict[str, Any] = {
    "chat_template": None,
    "template_kwargs": {},
    "special_tokens": "reject",
}


def fold_draws(draws: Sequence[SlotLogprobs]) -> LabelRead:
    """One read from several noise draws of the same slot: the label probabilities
    (full-vocabulary) averaged over draws, and the share of draws that agree with the
    averaged top label."""
    if len(draws) == 1:
        d = draws[0]
        return LabelRead(d.logprobs, d.label_mass, d.argmax_is_label, 1.0)
    k = len(draws[0].logprobs)
    mean = [sum(math.exp(d.logprobs[i]) for d in draws) / len(draws) for i in range(k)]
    top = max(range(k), key=mean.__getitem__)
    agree = sum(max(range(k), key=d.logprobs.__getitem__) == top for d in draws)
    return LabelRead(
        logprobs=tuple(math.log(m) if m > 0 else -math.inf for m in mean),
        label_mass=sum(d.label_mass for d in draws) / len(draws),
        argmax_is_label=sum(d.argmax_is_label for d in draws) * 2 > len(draws),
        agreement=agree / len(draws),
        extras={"draws": len(draws)},
    )


class TokenReader(Reader):
    """A reader that runs token reads on a model. Set ``self.planner``."""

    planner: CanvasPlanner | NextTokenPlanner

    @abstractmethod
    def read_tokens(self, reads: Sequence[TokenRead]) -> list[list[SlotLogprobs]]:
        """``result[i][j]`` is slot ``j`` of ``reads[i]``. One batch, one model call
        (or as few as the backend allows)."""

    def reading_settings(self) -> dict[str, Any]:
        """``Reader.reading_settings`` and the chat prompt's settings that differ from
        their defaults (``PLANNER_SETTINGS``), as ``planner.<name>``."""
        out = super().reading_settings()
        for name, default in PLANNER_SETTINGS.items():
            if (value := getattr(self.planner.chat, name)) != default:
                out[f"planner.{name}"] = value
        return out

    def plan(self, requests: Sequence[ReadRequest]) -> tuple[list[TokenRead], list[ReadPlan]]:
        """Every request's plan, and all their token reads in one flat batch."""
        plans = [self.planner.plan(r) for r in requests]
        return [t for p in plans for t in p.token_reads], plans

    def assemble(
        self, plans: Sequence[ReadPlan], slot_reads: Sequence[Sequence[SlotLogprobs]]
    ) -> list[list[LabelRead]]:
        """Fold the flat batch's slot reads back into one ``LabelRead`` per question."""
        out: list[list[LabelRead]] = []
        offset = 0
        for plan in plans:
            answers = [fold_draws([slot_reads[offset + t][s] for t, s in sp]) for sp in plan.where]
            offset += len(plan.token_reads)
            if answers:  # the request's token usage, as vLLM counts it (prompt, max_tokens)
                usage = {
                    "input_tokens": sum(len(t.prompt_ids) for t in plan.token_reads),
                    "output_tokens": sum(t.read_length for t in plan.token_reads),
                }
                answers[0] = dataclasses.replace(
                    answers[0], extras={**answers[0].extras, "usage": usage}
                )
            out.append(answers)
        return out

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        batch, plans = self.plan(requests)
        if not batch:
            return [[] for _ in requests]
        slot_reads = self.read_tokens(batch)
        if len(slot_reads) != len(batch):
            raise ReaderError(
                f"{self.name} returned {len(slot_reads)} reads for {len(batch)} requests"
            )
        return self.assemble(plans, slot_reads)
