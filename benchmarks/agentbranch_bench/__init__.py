"""The benchmark harness behind ``benchmarks/bench.py``: the read paths timed side by side,
every ratio in one run.

Each comparison runs both variants in one process (this one; ``RemoteReader`` vs a raw
client in a fresh client-only process), on the same model and states, interleaved
(A, B, A, B ...) so machine noise hits both alike, and reports the ratio of the medians.
Nothing is asserted: the targets are printed next to the measurement.

CPU part (always): a random-weight DiffusionGemma built with ``agentbranch.testing``,
read by ``TransformersReader`` through ``DecisionEngine`` (whose coalescer is on, the
default):

* a concurrency sweep: decisions per second with 1…64 concurrent callers, threads and
  asyncio tasks;
* ``graph.batch`` of 32 runs and 32 concurrent ``ainvoke`` vs ``decide_many`` of the
  same 32 states;
* one joint 3-question read vs the same decision as 3 single reads;
* a LangGraph router call vs a direct ``decide``;
* an answer-cache hit vs a miss;
* length bucketing on vs off for a mixed-length batch;
* on a ~50M DiffusionGemma: read vs generate + parse (the model's own multi-step
  ``generate``), and joint vs single reads again.

Calling patterns (with the CPU part on the embedded default, and on the vLLM part's
in-process reader): 1 caller, 32 threads, 32 asyncio tasks, ``graph.batch`` at 32 and at
LangGraph's default, ``graph.abatch`` and ``decision_tool`` from 32 agent steps, each as a
fraction of its bound (one pre-planned ``decide_many`` plus the pattern's cost without
an engine), with its target and whether it answered as ``decide_many``.

Cold start (first, while the process is quiet): fresh interpreters from ``import
agentbranch`` to the first decision, phase by phase, per kind of reader; the embedded
default's first decision taken apart (torch, transformers, tokenizer, weights, first
read).

vLLM part (when ``vllm`` imports and a causal model folder is given, or the tier's tiny
Qwen3 can be built from a checkout): in-process ``VLLMReader`` vs vLLM's own
``/v1/systemone`` server on the same model at 1, 8 and 32 callers (threads and asyncio),
and ``RemoteReader`` vs a raw ``httpx`` client on that server.

A package of its own beside ``agentbranch`` (same distribution), outside the runtime
library: ``import agentbranch`` never loads it, the ``benchmarks/bench.py`` command imports
it when it runs. By job: ``workload`` (states, questions), ``results`` (results, targets),
``timing`` (paired runs, concurrent callers), ``cpu``, ``joint`` and ``generate`` (the CPU
part), ``vllm_part``, ``vllm_server`` and ``remote`` (the vLLM part), ``patterns``,
``pattern_graphs`` and ``pattern_part`` (the calling patterns), ``cold_start``, ``run``
(every comparison, the command's output) and ``plotting``.
"""

from agentbranch_bench.results import BenchResult, Report, target_met, target_text
from agentbranch_bench.run import command, run_bench
from agentbranch_bench.workload import THREAD, TICKETS, questions, states

__all__ = [
    "THREAD",
    "TICKETS",
    "BenchResult",
    "Report",
    "command",
    "questions",
    "run_bench",
    "states",
    "target_met",
    "target_text",
]
