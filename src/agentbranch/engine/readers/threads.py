"""The ``threads`` option of the torch readers (transformers, embedded).

torch runs a forward with ``torch.get_num_threads()`` intra-op threads, by default one
per core. A decision read is one small forward; with every core busy (the agent's own
work, other processes) those threads contend and a read slows down by an order of
magnitude (measured on a busy 2-core machine: 5.5 s with the default threads, 0.25 s
with one). vLLM on CPU settles the same question by giving each worker process its own
cores and binding one OpenMP thread to each (``VLLM_CPU_OMP_THREADS_BIND=auto``), and it
then refuses ``torch.set_num_threads`` calls. A library inside someone else's process
cannot bind cores, so the readers do the nearest thing that changes nothing outside
them:

* ``threads="auto"`` (default): one core fewer than this process may use, at least 1 and
  at most 4 — the rest of the process keeps a core, and a read this small gains little
  from more threads (``benchmarks/bench_threads.py`` prints the ratio on your machine:
  ≈ 6× in favour of ``"auto"`` on a shared 2-core machine);
* ``threads=N``: exactly N;
* ``threads=None``: leave torch's setting alone.

The count is set only around the reader's own forward and restored right after, in the
calling thread (torch's OpenMP setting belongs to the thread that sets it), so nothing
else in the process sees a changed thread count.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from agentbranch.core.errors import ConfigurationError

Threads = int | Literal["auto"] | None

#: ``threads="auto"`` never uses more than this many threads for one read.
AUTO_MAX = 4


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, as vLLM's CPU binding reads it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def resolve_threads(threads: Threads) -> int | None:
    """The thread count a reader uses (``None``: torch's own setting)."""
    if threads is None:
        return None
    if threads == "auto":
        return max(1, min(AUTO_MAX, usable_cpus() - 1))
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigurationError(
            f"threads must be a positive int, 'auto' or None (torch's setting), got {threads!r}"
        )
    return threads


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` torch intra-op threads, then restore the previous count."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    if before == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


__all__ = ["Threads", "resolve_threads", "torch_threads", "usable_cpus"]
