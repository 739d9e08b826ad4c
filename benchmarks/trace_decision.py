"""Which of the library's modules three decisions enter: a take, a fallback and an audit
through a LangGraph ``decide_node`` under ``Earned(learn=True)``, traced on every thread.

The graph is one decide node asking a support question (which topic a customer message is
about: billing, delivery or account) of ``DecisionEngine.from_env()`` (the embedded CPU
reader unless the machine offers another) under

    Policy(
        take_at=Earned(precision=0.9, level=0.95, learn=True, store=<a JSON Lines file>),
        fallbacks=[Generate(teacher)],
        audit=Audit(rate=0.2, rng=<draws>),
    )

with a teacher (a LangChain chat model) that answers the true topic of the message in its
prompt. 80 labelled messages go through the graph first (each one the engine does not
take is answered by the teacher, a fifth of those it takes are audited: every answer is a
label), with learning's fits on the calling thread so the warm-up is reproducible. Then
learning runs as shipped (on its own thread) and exactly three decisions are traced:

1. a take: a new message the engine is sure of, at or above the threshold in force, not
   audited;
2. an audit: another such message, taken, with the audit draw forced to hit (the
   ``Audit``'s ``rng`` is a ``random.Random`` whose next draws the script sets);
3. a fallback: a message that says little about its topic (``VAGUE``), below the
   threshold: the teacher answers it and the answer becomes a label.

Which message is which is found before the trace: under the question as written
(version 0, what 80 labels leave in force here) a plain read of a message is what the
decide node will read (a read is deterministic), so ``FRESH`` new messages and the vague
ones are read (untraced) and sorted against the threshold in force; under a learned
version the warm-up's own reads under it are used (those messages are asked again).
After each one the script waits for the audit queue and learning's thread (inside the
trace: what an audit or a label starts is part of the decision's work). The script
checks that the three came out as arranged and fails otherwise.

The trace: a profile function is installed with ``sys.setprofile`` (this thread) and
``threading.setprofile`` (every thread started later) before the engine is built, so
every thread the library starts (LangGraph's node threads, reads, the audit worker and its
teacher calls, learning's thread) carries it; it records only between the start and the
end of the three decisions. A module counts when a ``call`` event's frame belongs to it
(the frame's global ``__name__`` starts with ``agentbranch``). The script's own waits
(``audit.flush``, ``learner.wait``) are inside the trace (they enter
``policy.auditing.config``/``worker`` and ``learn.loop``/``work``). Before issue 62's
folds the count was 68 (the issue counted 64 on another graph); the output lists the
modules by package, with the threads that entered each.

    HF_HUB_OFFLINE=1 python benchmarks/trace_decision.py          # count and modules
    HF_HUB_OFFLINE=1 python benchmarks/trace_decision.py --json   # the same, for machines
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, StateGraph

import agentbranch as ab
from agentbranch.langgraph import DecisionRecords, decide_node
from agentbranch.policy import Audit, Earned, Generate, Policy

#: The messages labelled before the trace, and the question.
WARMUP = 80
TOPICS = ("billing", "delivery", "account")
PHRASINGS = {
    "billing": [
        "Why was I charged twice for order {n}?",
        "The invoice for the {item} shows the wrong VAT number.",
        "My card was declined when paying for the {item} on {day}.",
        "I was billed for order {n} but never ordered it, {name} here.",
    ],
    "delivery": [
        "The courier left my {item} at the wrong door on {day}.",
        "Tracking for order {n} has not moved since {day}.",
        "Can the {item} be delivered to my office instead?",
        "{name} here: my {item} arrived broken in a crushed box.",
    ],
    "account": [
        "{name} here, I can't log in after resetting my password.",
        "Please change the email address on my account to a new one.",
        "How do I delete my account and all my data, {name} asks.",
        "My account was locked after three wrong passwords on {day}.",
    ],
}
VAGUE = [
    ("Hi, it's {name}, I have a question.", "account"),
    ("Can you call me back on {day}?", "delivery"),
    ("Thanks for your help yesterday!", "billing"),
    ("Hello? Anyone there? It's about the {item}.", "delivery"),
]
#: New templated messages read to find a take and an audit (beside ``VAGUE``).
FRESH = 20
QUESTION = ab.choice("What is the customer's message about?", list(TOPICS))
SLOTS = {
    "name": ["Ana", "Ben", "Chloe", "Dev", "Erik", "Fatima", "Goran", "Hana", "Ivo", "Jun"],
    "item": ["kettle", "jacket", "phone case", "desk lamp", "backpack", "blender", "monitor"],
    "n": [str(n) for n in range(1040, 1100)],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "the weekend"],
}


def vague(seed: int = 0) -> list[tuple[str, str]]:
    """Messages that say little about their topic (the teacher knows it: the topic
    each was written for), where the engine is rarely sure."""
    rng = random.Random(seed)
    return [
        (text.format(**{k: rng.choice(v) for k, v in SLOTS.items()}), topic)
        for text, topic in VAGUE
    ]


def messages(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` distinct (message, topic) pairs, topics in turn at random."""
    rng = random.Random(seed)
    out: dict[str, str] = {}
    while len(out) < n:
        topic = rng.choice(TOPICS)
        text = rng.choice(PHRASINGS[topic]).format(**{k: rng.choice(v) for k, v in SLOTS.items()})
        out.setdefault(text, topic)
    return list(out.items())


class Teacher(BaseChatModel):
    """Answers the true topic of the message in its prompt (a JSON reply, as
    ``Generate`` asks)."""

    truth: dict[str, str]

    @property
    def _llm_type(self) -> str:
        return "truth-teacher"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kw: Any) -> ChatResult:
        text = str(messages[-1].content)
        label = next(t for m, t in self.truth.items() if m in text)
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(json.dumps({"label": label})))]
        )


class Draws(random.Random):
    """The audit's draws: random, unless ``hit`` is set (``True``: the next taken
    decision is audited, ``False``: it is not)."""

    hit: bool | None = None

    def random(self) -> float:
        if self.hit is None:
            return super().random()
        return 0.0 if self.hit else 1.0 - 1e-12


class State(TypedDict, total=False):
    message: str
    decisions: DecisionRecords


class Tracer:
    """Modules entered (``call`` events), per thread name, while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.modules: dict[str, set[str]] = defaultdict(set)  # module -> thread names
        self.calls = 0

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if not self.on or event != "call":
            return
        name = frame.f_globals.get("__name__") or ""
        if name == "agentbranch" or name.startswith("agentbranch."):
            self.calls += 1
            self.modules[name].add(threading.current_thread().name)

    def install(self) -> None:
        sys.setprofile(self)
        threading.setprofile(self)

    def remove(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def trace(warmup: int = WARMUP, seed: int = 0, store: str | Path | None = None) -> dict[str, Any]:
    """Label ``warmup`` messages, then trace a take, an audit and a fallback; what was
    entered (see the module docstring)."""
    tracer = Tracer()
    tracer.install()  # before anything starts a thread
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return _run(tracer, warmup, seed, Path(store or Path(tmp) / "evidence.jsonl"))
    finally:
        tracer.remove()


def _plan(
    engine: Any, seen: list[tuple[str, dict[str, Any]]], fresh: list[tuple[str, str]]
) -> list[tuple[str, str, bool | None]]:
    """Which messages will be a take, an audit and a fallback: (kind, message, audit
    draw). Under the question as written (version 0) a plain read of a message is what
    the decide node will read, so new messages are read (untraced) and sorted against the
    threshold in force; under a learned version the warm-up's own reads under it are
    (those messages are asked again)."""
    version, at = seen[-1][1].get("reader_version"), seen[-1][1]["take_at"]
    if at is None:
        raise RuntimeError(
            f"no threshold opened after {len(seen)} labelled messages: nothing to take; "
            "label more (--warmup)"
        )
    if not version:
        reads = {t: engine.decide(t, {"topic": QUESTION})["topic"].confidence for t, _ in fresh}
    else:
        reads = {t: r["confidence"] for t, r in seen if r.get("reader_version") == version}
    taken = sorted((c, t) for t, c in reads.items() if c >= at)
    below = sorted((c, t) for t, c in reads.items() if c < at)
    if len(taken) < 2 or not below:
        raise RuntimeError(
            f"after {len(seen)} labelled messages the threshold in force ({at:.3f}, version "
            f"{version}) leaves {len(taken)} message(s) to take and {len(below)} to fall back "
            "on: cannot arrange a take, an audit and a fallback; change --warmup or --seed"
        )
    return [
        ("take", taken[-1][1], False),
        ("audit", taken[-2][1], True),
        ("fallback", below[0][1], None),
    ]


def _run(tracer: Tracer, warmup: int, seed: int, store: Path) -> dict[str, Any]:
    stream = messages(warmup + FRESH, seed)
    items, fresh = stream[:warmup], stream[warmup:] + vague(seed)
    truth = dict(stream + vague(seed))
    engine = ab.DecisionEngine.from_env()
    earned = Earned(precision=0.9, level=0.95, store=str(store), learn=True)
    earned.learner.background = False  # the warm-up's fits on this thread: reproducible
    earned.learner.settle_s = 0  # one writer: no other replica's labels to wait for
    draws = Draws(seed)
    audited: list[Any] = []
    audit = Audit(rate=0.2, rng=draws, sink=audited.append)
    policy = Policy(take_at=earned, fallbacks=[Generate(Teacher(truth=truth))], audit=audit)
    node = decide_node(engine, {"topic": QUESTION}, policy=policy, state_key="message")
    graph = StateGraph(State)
    graph.add_node("topic", node)
    graph.add_edge(START, "topic")
    graph.add_edge("topic", END)
    app = graph.compile()

    started = time.perf_counter()
    seen: list[tuple[str, dict[str, Any]]] = []
    for text, _ in items:
        seen.append((text, app.invoke({"message": text})["decisions"]["topic"]))
        audit.flush()
    warmup_s = time.perf_counter() - started
    plan = _plan(engine, seen, fresh)

    earned.learner.background = True  # as shipped: labels start learning's thread
    results = []
    tracer.on = True
    try:
        for kind, text, hit in plan:
            draws.hit = hit
            before = len(audited)
            rec = app.invoke({"message": text})["decisions"]["topic"]
            audit.flush()
            earned.learner.wait()
            results.append((kind, rec, sum(a["kind"] == "audit" for a in audited[before:])))
    finally:
        tracer.on = False
        draws.hit = None
    audit.close()

    got = [
        "take"
        if r["decided_by"] == "engine" and not n
        else "audit"
        if r["decided_by"] == "engine"
        else "fallback"
        if r["decided_by"] == "fallback"
        else r["decided_by"]
        for _, r, n in results
    ]
    if got != [k for k, _, _ in plan]:
        raise RuntimeError(f"the traced decisions came out {got}, not {[k for k, _, _ in plan]}")
    packages: dict[str, list[str]] = defaultdict(list)
    for m in sorted(tracer.modules):
        packages[m.rpartition(".")[0] if m.count(".") > 1 else m].append(m)
    return {
        "count": len(tracer.modules),
        "modules": sorted(tracer.modules),
        "by_package": dict(sorted(packages.items())),
        "threads": {m: sorted(t) for m, t in sorted(tracer.modules.items())},
        "calls": tracer.calls,
        "decisions": [
            {
                "kind": kind,
                "decided_by": r["decided_by"],
                "confidence": r["confidence"],
                "take_at": r["take_at"],
                "version": r.get("reader_version"),
                "audits": n,
            }
            for kind, r, n in results
        ],
        "warmup": warmup,
        "warmup_s": round(warmup_s, 1),
        "reader": engine.reader.name,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--warmup", type=int, default=WARMUP, help="labelled messages first")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    out = trace(args.warmup, args.seed)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"{out['count']} agentbranch modules entered by three decisions (a take, an audit, a "
        f"fallback) after {out['warmup']} labelled messages, reader {out['reader']}, "
        f"{out['calls']} function calls"
    )
    for d in out["decisions"]:
        print(
            f"  {d['kind']:<8} decided_by={d['decided_by']:<8} confidence={d['confidence']:.3f} "
            f"take_at={d['take_at']:.3f} version={d['version']} audits={d['audits']}"
        )
    for package, modules in out["by_package"].items():
        print(f"{package} ({len(modules)})")
        for m in modules:
            threads = ", ".join(out["threads"][m])
            print(f"    {m.removeprefix(package + '.')}  [{threads}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
