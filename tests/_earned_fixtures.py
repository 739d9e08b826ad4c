"""Helpers for the earned-threshold tests: a scripted engine whose confidence and label
come from the state text, and a teacher that knows the truth written in the state.

A state reads ``"item 7 said=yes p=0.97 truth=no"``: the engine answers ``said`` with
probability ``p`` (so its confidence follows ``p``), the teacher answers ``truth``.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import agentbranch as ab

URGENT = ab.yes_no("Is the ticket urgent?")


def state(i: int, said: str, p: float, truth: str) -> str:
    return f"item {i} said={said} p={p:.4f} truth={truth}"


def scripted(state_text: str, q: Any) -> dict[str, float]:
    said = re.search(r"said=(\w+)", state_text).group(1)
    p = float(re.search(r"p=([0-9.]+)", state_text).group(1))
    rest = (1 - p) / (len(q.options) - 1)
    return {o: (p if o == said else rest) for o in q.options}


def engine(qid: str = "urgent", model: str = "scripted-model") -> ab.DecisionEngine:
    reader = ab.ScriptedReader({qid: scripted})
    reader.model = model
    return ab.DecisionEngine(reader)


class Oracle(BaseChatModel):
    """A teacher that answers the ``truth=`` written in the input (or ``answer``)."""

    answer: str | None = None
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "oracle"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        with _lock:
            self.calls += 1
        text = str(messages[-1].content)
        label = self.answer or re.search(r"truth=(\w+)", text).group(1)
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(f'{{"label": "{label}"}}'))]
        )


_lock = threading.Lock()
