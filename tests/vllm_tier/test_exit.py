"""Exiting with a decision in flight on vLLM's own DiffusionGemma: the read finishes and
the process exits cleanly.

vLLM frees its engine at interpreter exit (a ``weakref.finalize``, hooked into
``atexit`` after ``import agentbranch``). Before agentbranch's exit work was moved ahead
of it, a read in flight through the default engine (coalescer in front of
``VLLMReader``) aborted the process ("terminate called without an active exception",
exit code 134), and without the coalescer it failed with vLLM's internals.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dgemma
import pytest

SCRIPT = """
import sys, threading, time
sys.path.insert(0, sys.argv[2])
import agentbranch as ab  # first, as an application does: vLLM hooks into atexit later
import torch._dynamo
torch._dynamo.config.disable = True
from vllm import LLM
from agentbranch.engine.readers.vllm import VLLMReader
import dgemma

llm = LLM(model=str(dgemma.tiny_checkpoint()), **dgemma.llm_args())
engine = ab.DecisionEngine(VLLMReader(llm), batching=sys.argv[1] == "coalescer")
q = {"team": ab.choice("Which team?", ["billing", "outage", "bug"])}
engine.decide("warm up", q)
started = threading.Event()

def decide():
    started.set()
    out = engine.decide_many([f"ticket {i}" for i in range(8)], q)
    print("answered", len(out), file=sys.stderr, flush=True)

threading.Thread(target=decide, daemon=True).start()
started.wait()
time.sleep(0.5)  # the read is planned and handed to vLLM; the script ends meanwhile
"""


@pytest.mark.parametrize("path", ["coalescer", "plain"])
def test_a_read_in_flight_finishes_and_the_process_exits_cleanly(path: str) -> None:
    env = {**os.environ, **dgemma.ENGINE_ENV, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, path, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert "terminate called" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "answered 8" in done.stderr, done.stderr[-3000:]
