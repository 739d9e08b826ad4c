"""What ``Earned(learn=True)`` costs the user, on the path users run: wall and CPU per
decision with learning off and on, and the first decision after a restart.

Part one, in one process: support messages (three teams, a few phrasings each) stream
through a one-node LangGraph graph, ``decide_node(engine, {"team": question},
state_key="text", policy=...)`` on ``DecisionEngine.from_env()`` (the embedded CPU
default), with

    Policy(
        take_at=Earned(precision=0.9, level=0.95, learn=<off|on>, store=<JSON Lines | SQLite>),
        fallbacks=[Generate(teacher)],
        audit=Audit(rate=0.2, seed=0),
    )

and a teacher (a LangChain chat model) that answers each message's team. Learning runs
as shipped (its versions fitted on its own thread, the wait for other replicas' labels
on). Each mode gets a fresh store. Printed per store and mode: the wall time per decision
(``graph.invoke``, what the caller waits for) and the process CPU per decision (every
thread, including audits and learning's own work, counted until both are idle after the
stream), and the ratios learn on / learn off.

Part two, a restart: a JSON Lines store of ``--restart-labels`` decisions made with
learning on (every one labelled: the teacher's answer or an audit) is opened by a new
process (a subprocess) with learning off and with learning on; printed for each: import
and build, and the FIRST decision (``graph.invoke``), and the ratio on / off.

    HF_HUB_OFFLINE=1 python benchmarks/bench_learning_cost.py [--messages 120] \
        [--stores jsonl sqlite] [--restart-labels 300] [--name learning_cost]

Written to ``benchmarks/results/<name>.{txt,json}``. ``bench_learning_speed.py``
measures the read of a learned version alone (no store, no teacher, no trials).
"""

from __future__ import annotations

import argparse
import json
import operator
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

HERE = Path(__file__).parent
TARGET, LEVEL, RATE = 0.9, 0.95, 0.2
QUESTION_ID = "team"
TEAMS = {
    "billing": [
        "I was charged twice for my {x} subscription this month, please refund one.",
        "My invoice for {x} shows the wrong price, can you correct it?",
        "How do I update the card you bill for {x}? The payment failed.",
    ],
    "outage": [
        "{x} has been down since this morning, every page returns error 502.",
        "I cannot log in to {x} at all, it times out after a minute.",
        "{x} crashes whenever I open the dashboard, nothing loads.",
    ],
    "feature": [
        "Could {x} add a dark mode? My team works late.",
        "It would help if {x} could export reports to CSV.",
        "Please add single sign-on to {x} for our company accounts.",
    ],
}
PRODUCTS = ["the app", "Acme Cloud", "the portal", "our workspace", "the mobile client"]
#: What customers write around their request (a message is a few sentences, as in support).
CONTEXT = [
    "We have been customers for about three years and mostly we are happy with it.",
    "I already tried the help center articles but they did not answer this.",
    "Our team of twelve people uses it every day for client projects.",
    "This is the second time I am writing about this, the last ticket was closed.",
    "I am on the business plan, account manager is Dana if that helps.",
    "Sorry for the long message, I wanted to give you all the details.",
    "We are based in Lisbon so please answer during European hours if you can.",
    "My colleague said she saw the same thing last week on her laptop.",
]


def messages(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` support messages ``(text, team)``, each text distinct."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        team = rng.choice(list(TEAMS))
        text = rng.choice(TEAMS[team]).format(x=rng.choice(PRODUCTS))
        around = rng.sample(CONTEXT, 4)
        body = " ".join([f"Hello, ticket {seed}-{i}.", *around[:2], text, *around[2:], "Thanks!"])
        out.append((body, team))
    return out


def question() -> Any:
    import agentbranch as ab

    return ab.choice("Which team should handle this support message?", list(TEAMS))


class State(TypedDict, total=False):
    text: str
    decisions: Annotated[dict, operator.or_]


def teacher_for(truth: dict[str, str]) -> Any:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class Teacher(BaseChatModel):
        """Answers the team of the message in its prompt (``Generate`` and ``Audit``)."""

        truth: dict[str, str]

        @property
        def _llm_type(self) -> str:
            return "truth-teacher"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any):
            prompt = str(messages[-1].content)
            label = next((y for s, y in self.truth.items() if s in prompt), "billing")
            return ChatResult(
                generations=[ChatGeneration(message=AIMessage(json.dumps({"label": label})))]
            )

    return Teacher(truth=truth)


def open_store(kind: str, where: Path) -> tuple[Any, Any]:
    """What ``Earned(store=...)`` gets for ``kind`` at ``where``, and what to close."""
    if kind == "jsonl":
        return where.with_suffix(".jsonl"), None
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(
        where.with_suffix(".sqlite"), check_same_thread=False, isolation_level=None
    )
    store = SqliteStore(conn)
    store.setup()
    return store, conn


def build(engine: Any, store: Any, learn: bool, truth: dict[str, str]) -> tuple[Any, Any, Any]:
    """The graph users build, its ``Earned`` and its ``Audit``."""
    from langgraph.graph import END, START, StateGraph

    from agentbranch.langgraph import decide_node
    from agentbranch.policy import Audit, Earned, Generate, Policy

    earned = Earned(precision=TARGET, level=LEVEL, learn=learn, store=store)
    audit = Audit(rate=RATE, seed=0)
    policy = Policy(take_at=earned, fallbacks=[Generate(teacher_for(truth))], audit=audit)
    node = decide_node(engine, {QUESTION_ID: question()}, state_key="text", policy=policy)
    g = StateGraph(State)
    g.add_node("decide", node)
    g.add_edge(START, "decide")
    g.add_edge("decide", END)
    return g.compile(), earned, audit


def idle(earned: Any, audit: Any) -> None:
    """Wait until audits and learning's own work are done (their CPU is counted)."""
    audit.flush(timeout=120)
    learner = earned.learner
    if learner is None:
        return
    wait = getattr(learner, "wait", None)
    if callable(wait):
        wait(timeout=120)
        return
    import threading  # (a release without ``Learner.wait``: its fit threads)

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(
        t.name == "agentbranch-learn" for t in threading.enumerate()
    ):
        time.sleep(0.01)


def stream(engine: Any, kind: str, learn: bool, items: list[tuple[str, str]], folder: Path) -> dict:
    """One stream of ``items`` through a fresh store: wall and CPU per decision."""
    store, conn = open_store(kind, folder / f"{kind}-{'on' if learn else 'off'}")
    graph, earned, audit = build(engine, store, learn, dict(items))
    waits = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    taken = 0
    for text, _ in items:
        t = time.perf_counter()
        d = graph.invoke({"text": text})["decisions"][QUESTION_ID]
        waits.append(time.perf_counter() - t)
        taken += d["decided_by"] == "engine"
    idle(earned, audit)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    audit.close()
    if conn is not None:
        conn.close()
    waits.sort()
    n = len(items)
    return {
        "decisions": n,
        "taken": taken,
        "wall_ms": 1e3 * sum(waits) / n,
        "p50_ms": 1e3 * waits[n // 2],
        "max_ms": 1e3 * waits[-1],
        "cpu_ms": 1e3 * cpu / n,
        "total_s": wall,
    }


def child(store: str, learn: bool) -> None:
    """A new process on ``store``: import and build, then the first decision (JSON)."""
    t0 = time.perf_counter()
    import agentbranch as ab

    engine = ab.DecisionEngine.from_env()
    items = messages(1, seed=999)
    graph, _, audit = build(engine, store, learn, dict(items))
    t1 = time.perf_counter()
    graph.invoke({"text": items[0][0]})
    t2 = time.perf_counter()
    print(json.dumps({"build_s": t1 - t0, "first_s": t2 - t1}))
    audit.close(timeout=0)


def restart(engine: Any, labels: int, folder: Path) -> dict:
    """A store of ``labels`` decisions made with learning on, then a new process on a
    copy of it with learning off and with learning on."""
    path = folder / f"restart-{labels}.jsonl"
    items = messages(labels, seed=1)
    graph, earned, audit = build(engine, path, True, dict(items))
    for text, _ in items:
        graph.invoke({"text": text})
    idle(earned, audit)
    audit.close()
    out: dict[str, Any] = {"labels": labels, "records": sum(1 for _ in path.open())}
    for mode in ("off", "on"):
        copy = folder / f"restart-{labels}-{mode}.jsonl"
        shutil.copy(path, copy)
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(copy), "--learn", mode],
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the {mode} process failed:\n{done.stderr}")
        out[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=120)
    parser.add_argument(
        "--stores", nargs="*", default=["jsonl", "sqlite"], choices=["jsonl", "sqlite"]
    )
    parser.add_argument("--restart-labels", type=int, nargs="*", default=[300])
    parser.add_argument("--name", default=None, help="write benchmarks/results/<name>.{txt,json}")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--learn", default="off", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.learn == "on")
        return
    import agentbranch as ab

    lines: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    engine = ab.DecisionEngine.from_env()
    items = messages(args.messages, seed=0)
    with tempfile.TemporaryDirectory() as tmp:  # warm: the reader, the graph, the teacher
        for learn in (False, True):
            stream(engine, "jsonl", learn, messages(3, seed=7), Path(tmp))
    result: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
        "reader": getattr(engine.reader, "name", "?"),
        "messages": args.messages,
        "stream": {},
        "restart": [],
    }
    say(
        f"learning cost on the path users run: decide_node on DecisionEngine.from_env() "
        f"({result['reader']}), Earned(precision={TARGET}, level={LEVEL}, store=...), "
        f"Generate + Audit(rate={RATE}), {args.messages} messages"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for kind in args.stores:
            got = {}
            for learn in (False, True):
                got["on" if learn else "off"] = m = stream(engine, kind, learn, items, folder)
                say(
                    f"{kind:>6} learn {'on ' if learn else 'off'}: wall {m['wall_ms']:7.1f} ms/decision "
                    f"(p50 {m['p50_ms']:.1f}, max {m['max_ms']:.1f}), CPU {m['cpu_ms']:7.1f} "
                    f"ms/decision, {m['taken']} taken"
                )
            got["wall_ratio"] = got["on"]["wall_ms"] / got["off"]["wall_ms"]
            got["cpu_ratio"] = got["on"]["cpu_ms"] / got["off"]["cpu_ms"]
            result["stream"][kind] = got
            say(
                f"{kind:>6} ratio on/off: wall x{got['wall_ratio']:.2f}, CPU x{got['cpu_ratio']:.2f}"
            )
        for n in args.restart_labels:
            r = restart(engine, n, folder)
            r["first_ratio"] = r["on"]["first_s"] / r["off"]["first_s"]
            result["restart"].append(r)
            for mode in ("off", "on"):
                say(
                    f"restart on {n} labelled decisions ({r['records']} records), learn {mode:>3}: "
                    f"import+build {r[mode]['build_s']:.2f} s, first decision {r[mode]['first_s']:.2f} s"
                )
            say(
                f"restart on {n} labelled decisions: first decision ratio on/off x{r['first_ratio']:.2f}"
            )
    if args.name:
        out = HERE / "results"
        out.mkdir(exist_ok=True)
        (out / f"{args.name}.txt").write_text("\n".join(lines) + "\n")
        (out / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
