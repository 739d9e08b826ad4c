"""Fake teachers for the audit tests: chat models called through their normal interface."""

from __future__ import annotations

import random
import threading
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class Teacher(BaseChatModel):
    """Answers ``{"label": ...}``: ``label`` with probability ``agree_p`` (seeded), else
    ``other``; or ``rule(prompt_text)`` when given. ``block`` (an Event) makes every call
    wait for it; ``error`` makes every call raise; ``calls`` counts calls."""

    label: str = "billing"
    other: str = "outage"
    agree_p: float = 1.0
    seed: int = 0
    rule: Any = None
    block: Any = None
    entered: Any = None
    error: str | None = None
    calls: int = 0
    rng: Any = None

    @property
    def _llm_type(self) -> str:
        return "audit-teacher"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls += 1
        if self.entered is not None:
            self.entered.set()
        if self.block is not None:
            self.block.wait()
        if self.error:
            raise RuntimeError(self.error)
        prompt = "\n".join(str(m.content) for m in messages)
        if self.rule is not None:
            reply = self.rule(prompt)
        else:
            if self.rng is None:
                self.rng = random.Random(self.seed)
            pick = self.label if self.rng.random() < self.agree_p else self.other
            reply = f'{{"label": "{pick}"}}'
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def blocking_teacher() -> Teacher:
    return Teacher(block=threading.Event(), entered=threading.Event())
