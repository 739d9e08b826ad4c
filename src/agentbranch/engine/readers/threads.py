"""The ``threads`` option of the torch readers (transformers, embedded).

A decision read is one small forward; torch's default of one thread per core contends
when every core is busy (docs/design.md). ``threads="auto"`` (default) is one core fewer
than this process may use, 1 to 4; ``threads=N`` exactly N; ``None`` leaves torch's
setting alone. The count is set only around the reader's own forward, in the calling
thread, and restored right after.
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
    import torch  # (every caller's block runs torch)

    before = torch.get_num_threads()
    if n is None or before == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


__all__ = ["Threads", "resolve_threads", "torch_threads", "usable_cpus"]
