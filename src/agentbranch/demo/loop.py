"""The loop the demo shows: ``run_loop`` streams tickets through a decide node in blocks;
the engine takes what it has earned, the teacher answers the rest and each answer becomes
a label; thresholds are earned and versions learned from those labels, so the teacher is
asked less block after block. The teacher is the tickets' own labels, called through
``Generate`` like any chat model, so trust and learning see what a real teacher would give.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph

from agentbranch.demo.triage import TRIAGE_QUESTIONS
from agentbranch.integrations.langgraph import DecisionRecords, decide_node
from agentbranch.policy import Audit, Earned, Generate, JsonlEvidenceStore, Policy

if TYPE_CHECKING:
    from agentbranch.engine.protocol import Engine

__all__ = ["BLOCK", "LOOP_QUESTIONS", "Block", "run_loop"]

#: Tickets in a block.
BLOCK = 40

#: The two questions of the loop: the team (described options) and urgency (examples),
#: both of which the embedded CPU reader can read.
LOOP_QUESTIONS = {"team": TRIAGE_QUESTIONS["team"], "urgent": TRIAGE_QUESTIONS["urgent"]}


@dataclass
class Block:
    """One block of tickets: per question, decisions the engine took (and how many of
    those were right), answers the teacher gave, and what was in force at its end."""

    first: int
    last: int
    taken: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LOOP_QUESTIONS, 0))
    right: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LOOP_QUESTIONS, 0))
    teacher: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LOOP_QUESTIONS, 0))
    take_at: dict[str, float | None] = field(default_factory=dict)
    version: dict[str, int] = field(default_factory=dict)
    read_s: list[float] = field(default_factory=list)
    teacher_s: list[float] = field(default_factory=list)

    @property
    def asked(self) -> int:
        """Calls to the teacher in the block: its answers below the threshold, and the
        audits of decisions the engine took."""
        return len(self.teacher_s)


class _LoopState(TypedDict, total=False):
    ticket: str
    decisions: DecisionRecords


def _labelled_teacher(tickets: Sequence[dict[str, Any]], seconds: list[float]) -> RunnableLambda:
    """A chat-model stand-in that answers from the tickets' labels, as a JSON reply."""
    truth = {t["ticket"]: t for t in tickets}

    def labelled_file(messages: Any) -> str:
        started = time.perf_counter()
        text = messages[-1].content
        ticket = text.split("Input:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        qid = next(q for q, spec in LOOP_QUESTIONS.items() if spec.instructions in text)
        reply = json.dumps({"label": truth[ticket][qid]})
        seconds.append(time.perf_counter() - started)
        return reply

    return RunnableLambda(labelled_file, name="labelled_file")


def run_loop(
    engine: Engine,
    tickets: Sequence[dict[str, Any]],
    *,
    store: str,
    precision: float = 0.9,
    on_block: Callable[[Block], None] | None = None,
) -> list[Block]:
    """Serve ``ticket_stream()``-shaped ``tickets`` through a decide node under
    ``Earned(precision, store, learn=True)`` with one audit in five of the decisions
    taken; one ``Block`` per ``BLOCK`` tickets (``on_block`` is called as each ends)."""
    teacher_s: list[float] = []
    evidence = JsonlEvidenceStore(store)
    # Nothing but this run writes it, so a learned version's labels need not wait for
    # other writers' labels to settle (a wait that made blocks vary with the machine).
    evidence.private = True
    earned = Earned(precision=precision, level=0.95, store=evidence, learn=True)
    audit = Audit(rate=0.2, seed=1)
    policy = Policy(
        take_at=earned, fallbacks=[Generate(_labelled_teacher(tickets, teacher_s))], audit=audit
    )
    graph = StateGraph(_LoopState)
    graph.add_node("triage", decide_node(engine, LOOP_QUESTIONS, policy=policy, state_key="ticket"))
    graph.add_edge(START, "triage")
    graph.add_edge("triage", END)
    app = graph.compile()
    blocks: list[Block] = []
    for start in range(0, len(tickets), BLOCK):
        part = tickets[start : start + BLOCK]
        b = Block(start + 1, start + len(part))
        del teacher_s[:]
        for t in part:
            out = app.invoke({"ticket": t["ticket"]})
            # A demo: each audit, and what each label starts (trial reads, fits), lands
            # before the next ticket, so a run prints the same every time (a service
            # lets both run beside its traffic).
            audit.flush()
            if earned.learner is not None:
                earned.learner.wait()
            for qid, rec in out["decisions"].items():
                if rec["decided_by"] == "engine":
                    b.taken[qid] += 1
                    b.right[qid] += rec["label"] == t[qid]
                else:
                    b.teacher[qid] += 1
                b.take_at[qid] = rec.get("take_at")
                b.version[qid] = int(rec.get("reader_version") or 0)
            b.read_s.append(max(rec["latency_s"] for rec in out["decisions"].values()))
        b.teacher_s = list(teacher_s)
        blocks.append(b)
        if on_block is not None:
            on_block(b)
    return blocks
