"""Background work at interpreter exit: queued audits are recorded and timed reads in
flight finish before Python stops the daemon threads, within ``EXIT_WAIT_S`` in all;
what is left after that is reported, and exit does not hang."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import pytest

AUDIT_SCRIPT = """
import sys, time
from langchain_core.runnables import RunnableLambda
import agentbranch as ab
from agentbranch.core import at_exit
from agentbranch.audit import Audit
from agentbranch.policy import Policy, Resolver

at_exit.EXIT_WAIT_S = float(sys.argv[2])

def slow_teacher(prompt):
    time.sleep(0.2)
    return '{"label": "billing"}'

q = {"team": ab.choice("Which team?", {"billing": "Invoices", "outage": "Service down"})}
reader = ab.ScriptedReader({"team": lambda s, q: {"billing": 0.97, "outage": 0.03}})
audit = Audit(model=RunnableLambda(slow_teacher), rate=1.0, sink=sys.argv[1], seed=0)
resolver = Resolver(ab.DecisionEngine(reader), q, Policy(take_at=0.5, review_below=0.5, audit=audit))
for i in range(5):
    resolver.resolve(f"ticket {i}: refund please")
# no audit.flush(): the script exits with five audits queued
"""


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )


def test_audits_queued_at_exit_are_recorded(tmp_path):
    sink = tmp_path / "audits.jsonl"
    done = _run(AUDIT_SCRIPT, str(sink), "10")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in sink.read_text().splitlines()]
    assert len(records) == 5
    assert {r["teacher_label"] for r in records} == {"billing"}


def test_audits_past_the_exit_wait_are_reported_and_exit_does_not_hang(tmp_path):
    sink = tmp_path / "audits.jsonl"
    script = "import logging; logging.basicConfig(level=logging.WARNING)\n" + AUDIT_SCRIPT
    done = _run(script, str(sink), "0.3")  # time for one or two of the five 0.2 s audits
    assert done.returncode == 0, done.stderr
    written = len(sink.read_text().splitlines()) if sink.exists() else 0
    assert written < 5
    assert "still unfinished at exit" in done.stderr
    assert "audit.flush()" in done.stderr


READ_SCRIPT = """
import sys, threading, time
import agentbranch as ab

class Slow(ab.ScriptedReader):
    def read(self, requests):
        time.sleep(1.0)
        with open(sys.argv[1], "w") as f:
            f.write("read finished")
        return super().read(requests)

if sys.argv[2] == "coalescer":  # a coalescer's worker reads
    engine = ab.DecisionEngine(Slow())
else:  # no coalescer: a timed read runs on its own thread
    engine = ab.DecisionEngine(Slow(), batching=False, timeout_s=0.1)

def decide():
    try:
        engine.decide("s", {"q": ab.yes_no("Ready?")})
    except ab.ReaderTimeoutError:
        pass

threading.Thread(target=decide, daemon=True).start()
time.sleep(0.3)  # the read is in flight (its caller may have given up) at exit
"""


@pytest.mark.parametrize("path", ["coalescer", "timed"])
def test_a_read_in_flight_finishes_before_the_interpreter_exits(tmp_path, path):
    # Stopped inside a native forward (torch), a daemon thread aborts the process.
    out = tmp_path / "out.txt"
    done = _run(READ_SCRIPT, str(out), path)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "read finished"


FREEING_SCRIPT = """
import sys, threading, time, weakref
import torch
import agentbranch as ab

class TorchReader(ab.ScriptedReader):
    # Owns torch tensors, as a model reader does (many, so freeing them takes a while).
    def __init__(self):
        super().__init__({"q": lambda s, q: {"yes": 0.9, "no": 0.1}})
        self.weights = [torch.nn.Parameter(torch.zeros(1)) for _ in range(100_000)]

    def read(self, requests):
        time.sleep(float(sys.argv[2]))
        return super().read(requests)

if sys.argv[1] == "coalescer":  # the coalescer's worker, idle too long, ends by itself
    engine = ab.DecisionEngine(TorchReader())
    engine.reads_via.idle_s = 0.05
    last = engine.reads_via
else:  # a timed read's own thread, still reading when its caller gave up
    engine = ab.DecisionEngine(TorchReader(), batching=False, timeout_s=0.05)
    last = engine.reader
freeing = threading.Event()
watch = weakref.ref(last, lambda _: freeing.set())
del last
try:
    engine.decide("s", {"q": ab.yes_no("Ready?")})
except ab.ReaderTimeoutError:
    pass
del engine  # now only the worker thread holds the reader
assert freeing.wait(30)
# the worker thread is freeing the reader's tensors: exit right now
"""


@pytest.mark.parametrize(("path", "read_s"), [("coalescer", "0"), ("timed", "0.3")])
@pytest.mark.parametrize("run", [1, *(pytest.param(n, marks=pytest.mark.slow) for n in (2, 3))])
def test_a_worker_freeing_the_model_at_exit_does_not_abort(path, read_s, run):
    # A worker that ends by itself can drop the last reference to a reader; freeing a
    # torch tensor on it while Python finalizes used to abort the process ("terminate
    # called without an active exception", exit code 134) in every run of this script.
    # Three runs of each; the fast loop (-m "not slow") runs the first.
    done = _run(FREEING_SCRIPT, path, read_s)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])


def test_registered_methods_do_not_keep_their_objects_alive():
    import gc
    import weakref

    from agentbranch.core import at_exit

    class Holder:
        def finish(self, deadline: float) -> None:
            pass

    holder = Holder()
    at_exit.finish_at_exit(holder.finish, order=at_exit.AUDITS)
    ref = weakref.ref(holder)
    del holder
    gc.collect()
    assert ref() is None


def test_finishers_run_in_order_with_one_deadline(monkeypatch):
    from agentbranch.core import at_exit

    monkeypatch.setattr(at_exit, "_finishers", [])
    monkeypatch.setattr(at_exit, "_threads", weakref.WeakSet())
    calls: list[tuple[str, float]] = []
    at_exit.finish_at_exit(lambda d: calls.append(("read", d)), order=at_exit.READS)
    at_exit.finish_at_exit(lambda d: calls.append(("audit", d)), order=at_exit.AUDITS)
    at_exit.finish_at_exit(lambda d: calls.append(("batch", d)), order=at_exit.COALESCERS)
    at_exit._finish_all()
    assert [name for name, _ in calls] == ["audit", "batch", "read"]
    assert len({d for _, d in calls}) == 1


def test_registered_threads_are_joined_after_the_finishers(monkeypatch):
    from agentbranch.core import at_exit

    monkeypatch.setattr(at_exit, "_finishers", [])
    monkeypatch.setattr(at_exit, "_threads", weakref.WeakSet())
    calls: list[str] = []
    ending = threading.Thread(target=lambda: (threading.Event().wait(0.2), calls.append("thread")))
    ending.start()
    at_exit.join_at_exit(ending)
    at_exit.finish_at_exit(lambda d: calls.append("finisher"), order=at_exit.READS)
    at_exit._finish_all()
    assert calls == ["finisher", "thread"]
    assert not ending.is_alive()


def test_a_thread_that_does_not_end_is_left_at_the_deadline(monkeypatch):
    from agentbranch.core import at_exit

    monkeypatch.setattr(at_exit, "_finishers", [])
    monkeypatch.setattr(at_exit, "_threads", weakref.WeakSet())
    monkeypatch.setattr(at_exit, "EXIT_WAIT_S", 0.1)
    release = threading.Event()
    stuck = threading.Thread(target=release.wait, daemon=True)
    stuck.start()
    at_exit.join_at_exit(stuck)
    at_exit._finish_all()  # returns: the thread is left
    assert stuck.is_alive()
    release.set()
    stuck.join()


def test_the_module_is_what_the_docs_name():
    text = (Path(__file__).parents[1] / "docs" / "reliability.md").read_text()
    assert "agentbranch.core.at_exit.EXIT_WAIT_S" in text


ORDER_SCRIPT = """
import atexit, sys, threading, time
import agentbranch as ab
from agentbranch.core import at_exit

freed = threading.Event()

class NeedsResource(ab.ScriptedReader):
    def read(self, requests):
        time.sleep(0.5)
        if freed.is_set():
            raise RuntimeError("freed under the read")
        with open(sys.argv[1], "w") as f:
            f.write("read finished")
        return super().read(requests)

# a library that frees at exit what a read uses, registered after import agentbranch
# (vLLM's engine: a weakref.finalize, hooked into atexit when the first LLM is built)
atexit.register(freed.set)
if sys.argv[2] == "first":
    at_exit.finish_first()  # what VLLMReader does once its LLM exists
engine = ab.DecisionEngine(NeedsResource())
threading.Thread(target=engine.decide, args=("s", {"q": ab.yes_no("Ready?")}), daemon=True).start()
time.sleep(0.2)  # the read is in flight at exit
"""


@pytest.mark.parametrize("first", [True, False], ids=["finish first", "registered before"])
def test_finish_first_runs_the_exit_work_before_later_atexit_handlers(tmp_path, first):
    out = tmp_path / "out.txt"
    done = _run(ORDER_SCRIPT, str(out), "first" if first else "as is")
    assert done.returncode == 0, done.stderr
    # without it, the handler registered later runs first: the resource is freed under
    # the read in flight (the case vLLM's tier test shows aborting the process)
    assert out.exists() is first


GENERATE_SCRIPT = """
import sys, time
from langchain_core.runnables import RunnableLambda
from agentbranch.policy.generation import invoke_within

def slow(messages):  # a fallback model still working when its caller gave up
    time.sleep(0.5)
    open(sys.argv[1], "w").write("call finished")
    return "yes"

invoke_within(RunnableLambda(slow), [], timeout_s=0.05)  # expired: its thread runs on
# exit right now
"""


def test_a_timed_out_fallback_call_finishes_before_the_interpreter_exits(tmp_path):
    # The call's daemon thread may be inside a native forward (a local chat model): stopped
    # there by Python's exit, it aborts the process. It is joined at exit (within the wait).
    out = tmp_path / "out.txt"
    done = _run(GENERATE_SCRIPT, str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "call finished"
