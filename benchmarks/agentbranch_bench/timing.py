"""Timing two variants alike: paired medians, concurrent callers (threads or asyncio
tasks), decisions per second at a number of callers."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentbranch_bench.workload import states

__all__ = ["paired", "run_tasks", "run_threads", "sweep_point"]


def paired(a: Callable[[], Any], b: Callable[[], Any], reps: int) -> tuple[float, float]:
    """Median seconds of ``a`` and ``b``, run alternately after one warm-up each."""
    a(), b()
    ta, tb = [], []
    for _ in range(reps):
        start = time.perf_counter()
        a()
        ta.append(time.perf_counter() - start)
        start = time.perf_counter()
        b()
        tb.append(time.perf_counter() - start)
    return statistics.median(ta), statistics.median(tb)


def run_threads(fn: Callable[[int], Any], callers: int, per_caller: int) -> None:
    """``callers`` threads, each calling ``fn(i)`` ``per_caller`` times."""
    barrier = threading.Barrier(callers)

    def work(k: int) -> None:
        barrier.wait()
        for j in range(per_caller):
            fn(k * per_caller + j)

    with ThreadPoolExecutor(callers) as pool:
        list(pool.map(work, range(callers)))


def run_tasks(fn: Callable[[int], Any], callers: int, per_caller: int) -> None:
    """``callers`` asyncio tasks, each awaiting ``fn(i)`` ``per_caller`` times."""

    async def work(k: int) -> None:
        for j in range(per_caller):
            await fn(k * per_caller + j)

    async def main() -> None:
        await asyncio.gather(*(work(k) for k in range(callers)))

    asyncio.run(main())


def sweep_point(
    engine: Any, q: dict[str, Any], kind: str, callers: int, total: int, tag: str
) -> float:
    """Decisions per second of ``callers`` concurrent callers (``kind``: ``"threads"`` or
    ``"asyncio"`` tasks) deciding ``total`` fresh states (at least one each)."""
    per = max(1, total // callers)
    pool = states(callers * per, tag)
    start = time.perf_counter()
    if kind == "threads":
        run_threads(lambda i: engine.decide(pool[i], q), callers, per)
    else:
        run_tasks(lambda i: engine.adecide(pool[i], q), callers, per)
    return callers * per / (time.perf_counter() - start)
