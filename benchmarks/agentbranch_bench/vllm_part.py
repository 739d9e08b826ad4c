"""The vLLM part: in-process ``VLLMReader`` vs vLLM's own ``/v1/systemone`` server at
1, 8 and 32 callers (threads and asyncio), the engine's own ceiling, then
``RemoteReader`` vs a raw client on that server (``agentbranch_bench.remote``)."""

from __future__ import annotations

import contextlib
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentbranch_bench.pattern_part import reader_patterns
from agentbranch_bench.remote import remote_vs_raw_apart
from agentbranch_bench.results import BenchResult, Report
from agentbranch_bench.timing import sweep_point
from agentbranch_bench.vllm_server import VLLM_ARGS, tier_qwen3, vllm_server
from agentbranch_bench.workload import questions, states

__all__ = ["vllm_part"]


def _throughput(engine: Any, q: dict[str, Any], kind: str, callers: int, per: int) -> float:
    tag = f"{kind}-{callers}-{time.perf_counter_ns()}-"
    return sweep_point(engine, q, kind, callers, callers * per, tag)


#: vLLM's engine processes busy-poll for 1 s after their last message
#: (``shm_broadcast.SpinCondition``); the side measured next waits that out, so the
#: other side's idle engine does not take its CPU.
VLLM_SPIN_S = 1.2


def _tree_cpu() -> float:
    """CPU seconds used so far by this process and every process it started (vLLM's
    engine processes, the server's), or NaN without ``psutil`` (vLLM depends on it)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - the vLLM part runs where vLLM is
        return math.nan
    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def _spread(a: list[float], b: list[float]) -> tuple[float, float]:
    """The lowest and highest ratio of paired measurements ``a[i] / b[i]``."""
    ratios = [x / y for x, y in zip(a, b)]
    return min(ratios), max(ratios)


def _engine_ceiling(reader: Any, q: dict[str, Any], decisions: int, reps: int) -> float:
    """Decisions/s of the vLLM engine alone: ``decisions`` decisions planned beforehand,
    their token reads run as one batch through the reader's engine worker (no caller,
    coalescer or planning cost): what vLLM itself reads, for reference. Callers that
    keep the engine busy (in-process decisions at 32 callers) come close to it, or
    past it, as one batch's last steps run half full."""
    import agentbranch as ab

    plain = ab.DecisionEngine(ab.ScriptedReader(), batching=False)
    rates = []
    for rep in range(reps + 1):
        requests = [plain._prepare(s, q, 1).request for s in states(decisions, f"c{rep}-")]
        batch, _ = reader.plan(requests)
        time.sleep(VLLM_SPIN_S)
        start = time.perf_counter()
        reader.read_tokens(batch)
        rates.append(decisions / (time.perf_counter() - start))
    return statistics.median(rates[1:])


def vllm_part(
    report: Report,
    tick: Callable[[str], None],
    *,
    model: Path | None,
    quick: bool,
    patterns: bool = True,
) -> None:
    """In-process ``VLLMReader`` vs vLLM's own ``/v1/systemone`` server (through
    ``RemoteReader``), both alive at once and measured alternately at each point, then
    ``RemoteReader`` vs a raw client on that server. With ``patterns``, first the
    calling patterns on the in-process reader (before the server starts: one engine
    alive)."""
    import agentbranch as ab
    from agentbranch.engine.readers.remote import RemoteReader
    from agentbranch.engine.readers.vllm import VLLMReader

    served = "bench-model"
    q = questions()
    #: Decisions per caller at each point: 30-256 decisions per measurement.
    per_caller = {1: 30, 8: 12, 32: 8}
    reps = 2 if quick else 3
    if quick:
        per_caller = {n: max(2, p // 2) for n, p in per_caller.items()}
    with tempfile.TemporaryDirectory(prefix="agentbranch-bench-vllm-") as tmp:
        if model is None:
            model = tier_qwen3(Path(tmp) / "tiny-qwen3")
            if model is None:
                report.notes.append("vLLM part skipped: no --vllm-model and no checkout")
                return
        from vllm import LLM

        llm = LLM(model=str(model), **VLLM_ARGS)
        local_reader = VLLMReader(llm, model_id=served)
        local = ab.DecisionEngine(local_reader)
        stopped = False

        def stop_local() -> None:
            nonlocal stopped
            if stopped:
                return
            stopped = True
            local.close()
            core = getattr(llm.llm_engine, "engine_core", None)
            if core is not None:
                core.shutdown()

        tick("vLLM in process ready")
        ceiling = _engine_ceiling(local_reader, q, 32, reps)
        tick(f"vLLM engine alone, 32 decisions pre-planned: {ceiling:.1f}/s")
        try:
            if patterns:
                reader_patterns(report, tick, local_reader, "vLLM in process", quick=quick)
            with vllm_server(model, served, Path(tmp) / "server.log") as url:
                tick("vLLM server ready")
                remote = ab.DecisionEngine(RemoteReader(url, model=served, max_connections=64))
                for kind in ("threads", "asyncio"):
                    inproc: dict[int, float] = {}
                    server: dict[int, float] = {}
                    for n, per in per_caller.items():
                        sides: dict[str, list[float]] = {"local": [], "server": []}
                        cpu: dict[str, list[float]] = {"local": [], "server": []}
                        engines = {"local": local, "server": remote}
                        for engine in engines.values():
                            _throughput(engine, q, kind, n, 1)  # warm-up
                        for rep in range(reps):
                            order = ["local", "server"] if rep % 2 == 0 else ["server", "local"]
                            for side in order:
                                time.sleep(VLLM_SPIN_S)
                                cpu_start = _tree_cpu()
                                sides[side].append(_throughput(engines[side], q, kind, n, per))
                                cpu[side].append((_tree_cpu() - cpu_start) / (n * per) * 1000)
                        inproc[n] = statistics.median(sides["local"])
                        server[n] = statistics.median(sides["server"])
                        low, high = _spread(sides["local"], sides["server"])
                        report.results.append(
                            BenchResult(
                                f"in-process VLLMReader vs /v1/systemone, {n} callers ({kind})",
                                inproc[n] / server[n],
                                "× (throughput)",
                                "≥ 3 at 32",
                                {
                                    "in_process_per_s": inproc[n],
                                    "server_per_s": server[n],
                                    "in_process_runs": sides["local"],
                                    "server_runs": sides["server"],
                                    "ratio_spread": [low, high],
                                    "decisions_per_run": n * per,
                                    # Every process of the machine's share (client,
                                    # server, vLLM engines; the idle side's spin is
                                    # waited out): the cost of a decision, which load
                                    # from other jobs blurs far less than throughput.
                                    "cpu_ms_per_decision": {
                                        k: statistics.median(v) for k, v in cpu.items()
                                    },
                                },
                            )
                        )
                        tick(
                            f"{kind} {n}: in process {inproc[n]:.1f}/s, server "
                            f"{server[n]:.1f}/s, {inproc[n] / server[n]:.2f}× "
                            f"(runs {low:.2f}–{high:.2f}); CPU per decision "
                            f"{statistics.median(cpu['local']):.1f} vs "
                            f"{statistics.median(cpu['server']):.1f} ms"
                        )
                    report.sweep[f"vLLM in process, {kind}"] = inproc
                    report.sweep[f"vLLM /v1/systemone, {kind}"] = server
                remote.close()
                best = max(
                    report.sweep[f"vLLM /v1/systemone, {k}"][32] for k in ("threads", "asyncio")
                )
                report.results.append(
                    BenchResult(
                        "vLLM engine alone (32 decisions planned beforehand, one batch) vs "
                        "/v1/systemone at 32 callers",
                        ceiling / best,
                        "× (throughput)",
                        None,
                        {"engine_per_s": ceiling, "server_per_s": best},
                    )
                )
                # The in-process engine is done: stop it so only the client and the
                # server share the cores from here.
                stop_local()
                time.sleep(VLLM_SPIN_S)
                remote_vs_raw_apart(report, tick, url, served, quick=quick)
        finally:
            stop_local()
