"""The earned-trust soak (``python benchmarks/soak.py earned ...``): a service's second
week in minutes.

``--callers`` threads call ``graph.invoke`` on the demo triage graph (a decide node with
three questions, ``examples=``, on the embedded CPU reader) under
``Earned(precision=0.9, level=0.95, store=...)`` with a ``Generate`` teacher (a stand-in
chat model that knows the labelled tickets' answers) and ``Audit(rate=0.2)``, for
``--minutes``. Every ``--report-s`` it prints decisions/s, CPU per decision, p50/p99
invoke latency, RSS, the Python objects' memory blocks alive (``sys.getallocatedblocks``:
flat when nothing in Python accumulates, whatever native memory does), threads, open
descriptors, the store's size and the labels so far;
at the end the CPU per decision of the first and last ``--window`` decisions and their
ratio (the done-when of issue 42: within 1.3x). Store: ``--store jsonl`` or ``sqlite``.

``--reader scripted`` replaces the embedded reader with a model stand-in that costs
nothing to read (``Scripted``: right on about 70% of the states, its confidence higher
when right), so the process spends its time in the graph and in earned trust, labels
pile up several times faster, and a 30-minute run reaches 100,000 labels on 2 cores:
the run that shows whether the trust code's cost and memory stay flat as the evidence
grows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

SUFFIX = " (ref {})"


def rss_mb() -> float:
    """Current resident set size (Linux /proc), else the peak from getrusage."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * resource.getpagesize() / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def tickets() -> tuple[list[str], dict[str, dict[str, Any]]]:
    lines = resources.files("agentbranch.demo").joinpath("labelled_tickets.jsonl").read_text()
    rows = [json.loads(x) for x in lines.splitlines()[1:] if x.strip()]
    return [r["state"] for r in rows], {r["state"]: r["labels"] for r in rows}


def teacher(truth: dict[str, dict[str, Any]]) -> Any:
    """A chat-model stand-in that answers each labelled ticket's question right."""
    from langchain_core.runnables import RunnableLambda

    from agentbranch.demo.triage import TRIAGE_QUESTIONS

    def knows(messages: Any) -> str:
        text = messages[-1].content
        ticket = text.split("Input:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        ticket = ticket.rsplit(" (ref ", 1)[0]
        qid = next(q for q, spec in TRIAGE_QUESTIONS.items() if spec.instructions in text)
        return json.dumps({"label": truth[ticket][qid]})

    return RunnableLambda(knows)


def scripted_reader(truth: dict[str, dict[str, Any]]) -> Any:
    """A reader that knows the labelled tickets: for each state (hashed with its
    reference number, so the same ticket is read differently each time) right about 70%
    of the time, confident 0.45-0.99 when right and 0.4-0.8 on a wrong option when not.
    It keeps no record of its reads (``ScriptedReader.calls`` would grow for ever)."""
    import hashlib

    import agentbranch as ab

    class Scripted(ab.ScriptedReader):
        def read(self, requests: Any) -> list[list[Any]]:
            return [[self._answer(r.state, q) for q in r.questions] for r in requests]

    def distribution(state: str, q: Any) -> dict[str, float]:
        ticket = state.rsplit(SUFFIX.split("{", 1)[0], 1)[0]
        right = str(truth[ticket][q.id]) if ticket in truth else q.options[0]
        if right not in q.options:
            raise ValueError(f"{q.id}: label {right!r} is not one of {q.options}")
        h = hashlib.blake2b(f"{q.id}|{state}".encode(), digest_size=8).digest()
        u, v = h[0] / 255, h[1] / 255
        others = [o for o in q.options if o != right]
        if u < 0.7 or not others:
            top, winner = 0.45 + 0.54 * v, right
        else:
            top, winner = 0.4 + 0.4 * v, others[h[2] % len(others)]
        rest = (1 - top) / (len(q.options) - 1)
        return {o: (top if o == winner else rest) for o in q.options}

    return Scripted(default=distribution)


class Meter:
    """Invokes, latencies and errors of the callers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.invokes = 0
        self.latencies: list[float] = []
        self.errors: list[str] = []

    def done(self, seconds: float) -> None:
        with self.lock:
            self.invokes += 1
            self.latencies.append(seconds)

    def take_latencies(self) -> list[float]:
        with self.lock:
            out, self.latencies = self.latencies, []
            return out


def cpu_per(samples: list[tuple[int, float]], lo: int, hi: int) -> float | None:
    """CPU seconds per invoke between invokes ``lo`` and ``hi`` (from the samples)."""
    a = next(((n, c) for n, c in samples if n >= lo), None)
    b = next(((n, c) for n, c in reversed(samples) if n <= hi), None)
    if a is None or b is None or b[0] <= a[0]:
        return None
    return (b[1] - a[1]) / (b[0] - a[0])


def _store(kind: str, where: Path, stack: Any) -> tuple[Any, Path]:
    if kind == "jsonl":
        path = where / "evidence.jsonl"
        return path, path
    from langgraph.store.sqlite import SqliteStore

    path = where / "evidence.sqlite"
    store = stack.enter_context(SqliteStore.from_conn_string(str(path)))
    store.setup()
    return store, path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="soak.py earned", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--store", choices=["jsonl", "sqlite"], default="jsonl")
    parser.add_argument("--dir", type=Path, default=Path("soak-store"))
    parser.add_argument("--report-s", type=float, default=60.0)
    parser.add_argument("--window", type=int, default=3000, help="decisions compared")
    parser.add_argument("--warmup", type=int, default=300, help="decisions before the first")
    parser.add_argument("--max-invokes", type=int, default=0, help="stop after (0: by time)")
    parser.add_argument(
        "--audit-workers", type=int, default=1, help="Audit(workers=...): teacher calls at once"
    )
    parser.add_argument(
        "--audit-timeout",
        type=lambda v: None if v == "none" else float(v),
        default=60.0,
        help="Audit(timeout=...) in seconds, or 'none' (teacher calls on the worker thread)",
    )
    parser.add_argument(
        "--reader",
        choices=["embedded", "scripted"],
        default="embedded",
        help="the embedded CPU default (MiniLM), or a stand-in that costs nothing to read",
    )
    args = parser.parse_args(argv)

    import logging
    from contextlib import ExitStack

    import structlog

    import agentbranch as ab
    from agentbranch.demo.triage import TRIAGE_QUESTIONS, build_triage_graph
    from agentbranch.policy import Audit, Earned, Generate, Policy

    logging.basicConfig(level=logging.WARNING)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    args.dir.mkdir(parents=True, exist_ok=True)
    stack = ExitStack()
    store, path = _store(args.store, args.dir, stack)
    texts, truth = tickets()
    earned = Earned(precision=0.9, level=0.95, store=store)
    audit = Audit(rate=0.2, seed=1, workers=args.audit_workers, timeout=args.audit_timeout)
    policy = Policy(take_at=earned, fallbacks=[Generate(teacher(truth))], audit=audit)
    engine = (
        ab.DecisionEngine(scripted_reader(truth))
        if args.reader == "scripted"
        else ab.DecisionEngine.from_env()
    )
    graph = build_triage_graph(engine, policy=policy)
    graph.invoke({"ticket": texts[0] + SUFFIX.format(-1)})  # load the reader
    per_invoke = len(TRIAGE_QUESTIONS)

    meter = Meter()
    stop = threading.Event()
    counter = iter(range(10**12))
    counter_lock = threading.Lock()

    def caller(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            with counter_lock:
                i = next(counter)
            if args.max_invokes and i >= args.max_invokes:
                stop.set()
                return
            state = rng.choice(texts) + SUFFIX.format(i)
            t0 = time.perf_counter()
            try:
                graph.invoke({"ticket": state})
            except Exception as e:  # noqa: BLE001 - counted; the soak goes on
                with meter.lock:
                    meter.errors.append(f"{type(e).__name__}: {e}")
                continue
            meter.done(time.perf_counter() - t0)

    def store_bytes() -> int:
        return sum(p.stat().st_size for p in args.dir.glob(path.name + "*") if p.is_file())

    def labels() -> int:
        return sum(st.records for st in earned.states().values())

    print(
        f"earned soak: {args.callers} callers, graph.invoke on 3 questions ({args.reader} "
        f"reader, examples=), Earned(precision=0.9, level=0.95, store={args.store}), Generate "
        f"teacher, Audit(rate=0.2, workers={args.audit_workers}, timeout={args.audit_timeout}), "
        f"{args.minutes:g} min",
        flush=True,
    )
    print(
        f"{'min':>5} {'dec/s':>7} {'cpu ms/dec':>10} {'p50 s':>6} {'p99 s':>6} {'RSS MB':>7} "
        f"{'blocks k':>8} {'thr':>4} {'fds':>4} {'store MB':>8} {'labels':>7} "
        f"{'decisions':>9}",
        flush=True,
    )
    threads = [threading.Thread(target=caller, args=(k,), daemon=True) for k in range(args.callers)]
    start = time.perf_counter()
    cpu0 = time.process_time()
    samples = [(0, cpu0)]  # (invokes done, process CPU seconds)
    for t in threads:
        t.start()
    last_t, last_n, last_cpu = start, 0, cpu0
    deadline = start + args.minutes * 60
    next_report = start + args.report_s
    while not stop.is_set() and time.perf_counter() < deadline:
        time.sleep(min(1.0, max(0.05, next_report - time.perf_counter())))
        now, cpu = time.perf_counter(), time.process_time()
        with meter.lock:
            n = meter.invokes
        samples.append((n, cpu))
        if now >= next_report:
            lat = sorted(meter.take_latencies())
            dn = n - last_n
            p50 = statistics.median(lat) if lat else float("nan")
            p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
            cpu_ms = 1000 * (cpu - last_cpu) / max(1, dn * per_invoke)
            print(
                f"{(now - start) / 60:5.1f} {dn * per_invoke / (now - last_t):7.1f} "
                f"{cpu_ms:10.2f} {p50:6.3f} {p99:6.3f} {rss_mb():7.0f} "
                f"{sys.getallocatedblocks() / 1000:8.0f} "
                f"{threading.active_count():4d} {descriptors():4d} "
                f"{store_bytes() / 2**20:8.2f} {labels():7d} {n * per_invoke:9d}",
                flush=True,
            )
            last_t, last_n, last_cpu = now, n, cpu
            next_report += args.report_s
    stop.set()
    for t in threads:
        t.join()
    audit.flush()
    with meter.lock:
        n = meter.invokes
    samples.append((n, time.process_time()))
    w, warm = args.window // per_invoke, args.warmup // per_invoke
    first = cpu_per(samples, warm, warm + w)
    last = cpu_per(samples, n - w, n)
    stats = audit.stats
    print(
        f"audits: {stats.audited} answered, {stats.dropped} dropped (queue full), "
        f"{stats.failed} failed"
    )
    print(
        f"decisions {n * per_invoke}, errors {len(meter.errors)}, labels {labels()}, "
        f"store {store_bytes() / 2**20:.1f} MB, RSS {rss_mb():.0f} MB"
    )
    if first and last:
        print(
            f"CPU per decision: first {args.window} (after {args.warmup}) "
            f"{1000 * first / per_invoke:.2f} ms, last {args.window} "
            f"{1000 * last / per_invoke:.2f} ms, ratio {last / first:.2f}"
        )
    for e in meter.errors[:5]:
        print("error:", e)
    for _, st in sorted(earned.states().items()):
        print(
            f"  {st.question_id:12} {st.trust:9} take_at={st.take_at} labels={st.labels} "
            f"records={st.records} looks={st.looks}"
        )
    stack.close()
    return 1 if meter.errors else 0


if __name__ == "__main__":
    sys.exit(main())
