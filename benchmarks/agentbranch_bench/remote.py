"""``RemoteReader`` vs a raw ``httpx`` client posting the same bodies to a server, run
in a fresh client-only process as a ``RemoteReader`` user's process is."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from typing import Any

from agentbranch_bench.results import BenchResult, Report
from agentbranch_bench.workload import questions, states

__all__ = ["raw_client_round", "remote_vs_raw", "remote_vs_raw_apart"]


def remote_vs_raw_apart(
    report: Report, tick: Callable[[str], None], url: str, served: str, *, quick: bool
) -> None:
    """``remote_vs_raw`` in a fresh process that loads only the client side, as a
    ``RemoteReader`` user's process does (no torch, no vLLM). In this process their
    objects (~400,000 more) make every full garbage collection cost about 0.25 s, and it
    lands on whichever side happens to trigger it."""
    import multiprocessing

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        result, messages = pool.submit(_remote_vs_raw_child, url, served, quick).result()
    for message in messages:
        tick(message)
    report.results.append(BenchResult(**result))


def _remote_vs_raw_child(url: str, served: str, quick: bool) -> tuple[dict[str, Any], list[str]]:
    import gc

    report, messages = Report(), []
    remote_vs_raw(report, messages.append, url, served, questions(), quick=quick)
    (result,) = report.results
    result.detail["client_process_objects"] = len(gc.get_objects())
    return asdict(result), messages


async def raw_client_round(
    url: str, model: str, requests: list[Any], callers: int, transport: Any = None
) -> None:
    """What a raw client does for the same reads as ``RemoteReader.aread``: one
    ``httpx.AsyncClient`` (same pool limits), every body built and posted behind a
    ``callers``-wide semaphore, each answer's JSON decoded."""
    import httpx

    from agentbranch.engine.readers.remote import build_payload

    limits = httpx.Limits(max_connections=callers, max_keepalive_connections=callers)
    async with httpx.AsyncClient(limits=limits, timeout=30, transport=transport) as client:
        gate = asyncio.Semaphore(callers)

        async def one(r: Any) -> Any:
            async with gate:
                response = await client.post(
                    url + "/v1/systemone", json=build_payload(r, model=model)
                )
                response.raise_for_status()
                return response.json()

        await asyncio.gather(*(one(r) for r in requests))


def remote_vs_raw(
    report: Report,
    tick: Callable[[str], None],
    url: str,
    served: str,
    q: dict[str, Any],
    *,
    quick: bool,
) -> None:
    """``RemoteReader.aread`` vs a raw ``httpx.AsyncClient`` posting the same bodies, 32
    concurrent callers. Both sides do the same work per round: a fresh event loop and
    client (same pool limits), every request's body built and posted, its JSON decoded;
    the reader also validates the answers into reads (what it is for). Alternated
    A B B A ..., the median of the paired rounds' ratios."""

    import agentbranch as ab
    from agentbranch.engine.readers.remote import RemoteReader

    # Many short rounds, alternated: other jobs' load comes in bursts of seconds, so
    # adjacent rounds see alike conditions, and the median of the paired ratios drops
    # the rounds a burst hit.
    callers, per, rounds = 32, (2 if quick else 3), (6 if quick else 24)
    plain = ab.DecisionEngine(ab.ScriptedReader(), batching=False)
    requests = [plain._prepare(s, q, 1).request for s in states(callers * per, "raw-")]
    reader = RemoteReader(url, model=served, max_connections=callers)

    async def with_reader() -> None:
        await asyncio.gather(*(reader.aread([r]) for r in requests))

    async def raw() -> None:
        await raw_client_round(url, served, requests, callers)

    cpu: dict[str, list[float]] = {"reader": [], "raw": []}

    def timed(fn: Callable[[], Any], side: str) -> float:
        start, cpu_start = time.perf_counter(), time.process_time()
        asyncio.run(fn())
        cpu[side].append((time.process_time() - cpu_start) / len(requests))
        return time.perf_counter() - start

    timed(with_reader, "reader"), timed(raw, "raw")  # warm-up
    cpu = {"reader": [], "raw": []}
    t_reader: list[float] = []
    t_raw: list[float] = []
    for i in range(rounds):
        if i % 2 == 0:
            t_reader.append(timed(with_reader, "reader"))
            t_raw.append(timed(raw, "raw"))
        else:
            t_raw.append(timed(raw, "raw"))
            t_reader.append(timed(with_reader, "reader"))
    reader.close()
    m_reader, m_raw = statistics.median(t_reader), statistics.median(t_raw)
    paired_ratios = [raw_s / reader_s for raw_s, reader_s in zip(t_raw, t_reader)]
    ratio = statistics.median(paired_ratios)
    low, high = min(paired_ratios), max(paired_ratios)
    # This process's CPU per request: the client's own cost, which the server's and
    # other jobs' noise on the shared cores does not blur.
    cpu_reader, cpu_raw = (statistics.median(cpu[k]) * 1000 for k in ("reader", "raw"))
    report.results.append(
        BenchResult(
            "RemoteReader vs raw httpx client, 32 callers",
            ratio,
            "× (throughput)",
            "≥ 0.95",
            {
                "reader_s": m_reader,
                "raw_s": m_raw,
                "requests": len(requests),
                "rounds": rounds,
                "ratio_spread": [low, high],
                "client_cpu_ms_per_request": {"reader": cpu_reader, "raw": cpu_raw},
            },
        )
    )
    tick(
        f"RemoteReader vs raw: {ratio:.2f}× (rounds {low:.2f}–{high:.2f}); "
        f"client CPU per request {cpu_reader:.2f} ms vs {cpu_raw:.2f} ms"
    )
