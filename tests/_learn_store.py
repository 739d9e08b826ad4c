"""An evidence store written by ``Earned(learn=True)`` with a scripted reader: for the
learning section of ``agentbranch audit report`` (tests and docs/audit.md).

The reader is a ``ScriptedReader`` whose read improves once the question carries learned
examples (a learned version, ``agentbranch.policy.earned.learn``): as written it is right on
three states in four, its answer at probability 0.8 (confidence 0.28); with examples,
right on 19 in 20 at 0.995 (confidence 0.95).
The teacher answers the truth; audits check a share of the taken decisions.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from _learn_fixtures import labelled_stream
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import agentbranch as ab
from agentbranch.policy import Audit, Earned, Generate, Policy, Resolver

QUESTION = ab.yes_no("Is this about sport?")
SPORT = ["The striker scored twice", "She won the tennis final", "The marathon record fell"]
COOKING = ["Simmer the onions in butter", "Knead the dough", "Roast the chicken slowly"]


def stream(n: int, seed: int = 0, start: int = 0) -> list[tuple[str, str]]:
    """``n`` labelled sport ("yes") and cooking ("no") states, numbered from ``start``."""
    return labelled_stream(n, seed, SPORT, COOKING, tag="item", start=start)


def _reader(truth: dict[str, str]) -> ab.ScriptedReader:
    def read(state: str, q: Any) -> dict[str, float]:
        h = zlib.crc32(state.encode())
        label = truth[state]
        learned = any(q.examples)
        right = h % 20 != 0 if learned else h % 4 != 0
        said = label if right else ("no" if label == "yes" else "yes")
        p = 0.995 if learned else 0.8
        return {said: p, ("no" if said == "yes" else "yes"): 1.0 - p}

    return ab.ScriptedReader({"sport": read})


class TruthTeacher(BaseChatModel):
    """Answers the truth of the state named in the prompt."""

    truth: dict[str, str]

    @property
    def _llm_type(self) -> str:
        return "truth-teacher"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kw: Any) -> ChatResult:
        text = str(messages[-1].content)
        label = next(y for s, y in self.truth.items() if s in text)
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(f'{{"label": "{label}"}}'))]
        )


def learn_store(path: str | Path, n: int = 400, seed: int = 0) -> Earned:
    """Run ``n`` decisions through ``Earned(learn=True)`` storing evidence at ``path``;
    returns the ``Earned`` (its learner fitted versions at once, not on a thread)."""
    Path(path).unlink(missing_ok=True)
    items = stream(n, seed)
    truth = dict(items)
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0, store=str(path), learn=True)
    earned.learner.background = False
    earned.learner.settle_s = 0  # one writer: no other replica's labels to wait for
    teacher = TruthTeacher(truth=truth)
    audit = Audit(rate=0.2, seed=seed)
    policy = Policy(take_at=earned, fallbacks=[Generate(teacher)], audit=audit)
    r = Resolver(ab.DecisionEngine(_reader(truth)), {"sport": QUESTION}, policy)
    for text, _ in items:
        r.resolve(text)
        audit.flush()
    audit.close()
    return earned
