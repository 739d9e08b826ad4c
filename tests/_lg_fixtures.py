"""Helpers for the LangGraph / LangChain / policy tests (import what you use)."""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from agentbranch.core.reads import LabelRead, ReadRequest
from agentbranch.engine.readers.base import Reader


class StrictFakeChat(BaseChatModel):
    """A chat model that answers with exactly ``replies``, in order, and FAILS on any
    call beyond them. ``prompts`` records what it was asked."""

    replies: list[str]
    prompts: list[list[BaseMessage]] = []
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "strict-fake"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.calls >= len(self.replies):
            raise AssertionError(
                f"fallback model called {self.calls + 1} times; expected {len(self.replies)}"
            )
        reply = self.replies[self.calls]
        self.calls += 1
        self.prompts = [*self.prompts, list(messages)]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


class LabelTeacher(BaseChatModel):
    """A teacher answering ``{"label": ...}`` with ``label_of`` its last message's text
    (a subclass says how), counting its ``calls`` (under a lock: audits call teachers
    from worker threads); ``llm_type`` names it to LangChain."""

    llm_type: ClassVar[str] = "label-teacher"
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return self.llm_type

    def label_of(self, text: str) -> str:
        raise NotImplementedError(f"{type(self).__name__} must say how it labels a message")

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        with _teacher_lock:
            self.calls += 1
        label = self.label_of(str(messages[-1].content))
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(f'{{"label": "{label}"}}'))]
        )


_teacher_lock = threading.Lock()


class DrawsReader(Reader):
    """Uncertain (0.5/0.3/0.2) with one draw; confident (0.95 ...) with ``sure_at`` draws
    or more. Records the ``draws`` of every request."""

    name = "draws"
    model = "draws-model"

    def __init__(self, sure_at: int = 8) -> None:
        self.sure_at = sure_at
        self.draws_seen: list[int] = []
        self._lock = threading.Lock()

    def read(self, requests: Sequence[ReadRequest]) -> list[list[LabelRead]]:
        out = []
        for r in requests:
            with self._lock:
                self.draws_seen.append(r.draws)
            reads = []
            for q in r.questions:
                k = len(q.options)
                if r.draws >= self.sure_at:
                    probs = [0.95] + [0.05 / (k - 1)] * (k - 1)
                else:
                    probs = [0.4] + [0.6 / (k - 1)] * (k - 1)
                reads.append(LabelRead(logprobs=tuple(math.log(p) for p in probs)))
            out.append(reads)
        return out


def sure(option: str, p: float = 0.97):
    """A script entry: ``option`` gets ``p``, the rest share ``1 - p``."""

    def dist(state: str, q: Any) -> dict[str, float]:
        rest = (1 - p) / (len(q.options) - 1)
        return {o: (p if o == option else rest) for o in q.options}

    return dist


def unsure(option: str):
    """A script entry: ``option`` on top with a flat-ish distribution (low confidence)."""

    def dist(state: str, q: Any) -> dict[str, float]:
        k = len(q.options)
        top = 1.5 / k
        rest = (1 - top) / (k - 1)
        return {o: (top if o == option else rest) for o in q.options}

    return dist


def by_keyword(mapping: dict[str, Any], default: Any):
    """Pick a script entry by a keyword in the state."""

    def dist(state: str, q: Any) -> dict[str, float]:
        for word, entry in mapping.items():
            if word in state:
                return entry(state, q)
        return default(state, q)

    return dist


def fan_out(state: type, node: Any) -> Any:
    """A compiled graph that sends each of the state's ``tickets`` to ``node`` (named
    ``triage``) as its own branch (``Send``): the branches run in one step."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    g = StateGraph(state)
    g.add_node("dispatch", lambda s: {})
    g.add_node("triage", node)
    g.add_edge(START, "dispatch")
    g.add_conditional_edges(
        "dispatch", lambda s: [Send("triage", {"ticket": t}) for t in s["tickets"]], ["triage"]
    )
    g.add_edge("triage", END)
    return g.compile()
