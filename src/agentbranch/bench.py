"""``agentbranch bench``: the read paths timed side by side, every ratio in one run.

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

vLLM part (when ``vllm`` imports and a causal model folder is given, or the tier's tiny
Qwen3 can be built from a checkout): in-process ``VLLMReader`` vs vLLM's own
``/v1/systemone`` server on the same model at 1, 8 and 32 callers (threads and asyncio),
and ``RemoteReader`` vs a raw ``httpx`` client on that server.

Over 500 lines: the whole benchmark harness; the planned layout restructuring moves it
out of the runtime library into its own package.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BenchResult", "Report", "run_bench"]

TICKETS = [
    "The dashboard returns 500 errors for everyone since 9am.",
    "I was charged twice for my subscription this month.",
    "The CSV export puts dates in the wrong column.",
    "Can you add dark mode to the mobile app?",
    "My password reset link expired before I could use it.",
    "Our invoices show the wrong VAT number since the update.",
    "The app crashes when I upload a photo larger than 10 MB.",
    "Please cancel my account and refund the last payment.",
]


#: An agent's state as it usually is: a short conversation, not one line.
THREAD = """Customer: Hi, I was charged twice for my subscription this month, once on the 3rd
and again on the 5th. Both charges are 49 EUR and show the same invoice number.
Agent: Sorry about that! Could you send the last four digits of the card?
Customer: It ends in 4242. I also noticed my plan still says Pro although I moved to
Team last week, so maybe the upgrade created a second subscription?
Agent: That is possible. I am checking with our billing system now.
Customer: Thanks. I need the duplicate refunded before the end of the week because our
finance team closes the books on Friday, and this is the second time it has happened."""


def _questions() -> dict[str, Any]:
    import agentbranch as ab

    return {
        "team": ab.choice(
            "Which team should handle this ticket?",
            {"billing": "Invoices and refunds", "outage": "Service down", "bug": "Broken"},
        ),
        "urgent": ab.yes_no("Does this need a reply within the hour?"),
        "frustration": ab.score("How frustrated is the customer?", ["calm", "annoyed", "angry"]),
    }


def states(n: int, tag: str = "") -> list[str]:
    """``n`` distinct ticket states."""
    return [f"{TICKETS[i % len(TICKETS)]} (ticket {tag}{i})" for i in range(n)]


@dataclass
class BenchResult:
    """One measurement: ``value`` (a ratio, or decisions/s for the sweep) and what it
    compares."""

    name: str
    value: float
    unit: str
    target: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


_TARGET = re.compile(r"\s*([≥≤])\s*([0-9.]+)(?:\s+at\s+([0-9]+))?\s*")


def target_met(result: BenchResult) -> bool | None:
    """Whether ``result`` meets its target (``"≥ 0.85"``, ``"≤ 1.05"``, ``"≥ 3 at 32"``:
    only for the result measured at 32 callers); ``None`` when there is no target, it
    is not for this result, or it cannot be read."""
    match = _TARGET.fullmatch(result.target or "")
    if match is None:
        return None
    sign, bound, at = match.groups()
    if at is not None and not re.search(rf"\b{at} callers\b", result.name):
        return None
    try:
        value = float(bound)
    except ValueError:
        return None
    return result.value >= value if sign == "≥" else result.value <= value


def target_text(result: BenchResult) -> str:
    """The target column of the bench table: the target and whether it was met."""
    met = target_met(result)
    if met is None:
        return result.target or ""
    return f"{result.target} {'✓ met' if met else '✗ missed'}"


@dataclass
class Report:
    results: list[BenchResult] = field(default_factory=list)
    sweep: dict[str, dict[int, float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "results": [{**asdict(r), "met": target_met(r)} for r in self.results],
            "sweep": {k: {str(n): v for n, v in pts.items()} for k, pts in self.sweep.items()},
            "notes": self.notes,
            "seconds": round(self.seconds, 1),
        }


# ------------------------------------------------------------------------ timing


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


# ---------------------------------------------------------------------- CPU part


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


def _tiny_reader(folder: Path, **backend_kwargs: Any) -> Any:
    import agentbranch as ab

    return ab.TransformersReader.from_pretrained(folder, **backend_kwargs)


def _decide_graph(engine: Any) -> Any:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from agentbranch.langgraph import decide_node

    class S(TypedDict, total=False):
        ticket: str
        decisions: dict

    g = StateGraph(S)
    g.add_node("triage", decide_node(engine, _questions(), state_key="ticket"))
    g.add_edge(START, "triage")
    g.add_edge("triage", END)
    return g.compile()


def cpu_part(report: Report, tick: Callable[[str], None], *, quick: bool) -> None:
    import agentbranch as ab
    from agentbranch.engine.batching import BatchingReader
    from agentbranch.langgraph import route
    from agentbranch.testing import build_tiny_diffusiongemma

    reps = 2 if quick else 3
    q = _questions()
    with tempfile.TemporaryDirectory(prefix="agentbranch-bench-") as tmp:
        folder = build_tiny_diffusiongemma(
            Path(tmp) / "model", hidden_size=128, num_layers=2, vocab_size=2048
        )
        reader = _tiny_reader(folder)
        engine = ab.DecisionEngine(reader)
        tick("tiny DiffusionGemma built")

        # -- concurrency sweep ----------------------------------------------------
        total = 16 if quick else 32
        for kind in ("threads", "asyncio"):
            points: dict[int, float] = {}
            for callers in (1, 4, 16, 64):
                points[callers] = sweep_point(
                    engine, q, kind, callers, total, f"sweep-{kind}-{callers}-"
                )
                tick(f"sweep {kind} {callers} callers: {points[callers]:.1f}/s")
            report.sweep[f"transformers, {kind}"] = points

        # -- graph.batch / ainvoke vs decide_many ---------------------------------
        app = _decide_graph(engine)
        batch_states = states(32, "graph-")
        inputs = [{"ticket": s} for s in batch_states]

        def graph_batch() -> Any:
            return app.batch(inputs, config={"max_concurrency": 32})

        def graph_ainvoke() -> Any:
            async def main() -> Any:
                return await asyncio.gather(*(app.ainvoke(x) for x in inputs))

            return asyncio.run(main())

        def many() -> Any:
            return engine.decide_many(batch_states, q)

        coalescer = engine.reads_via
        # 3 paired runs moved these ratios by ±0.05 from run to run; 9 hold them steadier.
        pairs = reps * 3
        for name, fn in (("graph.batch(32)", graph_batch), ("32 × ainvoke", graph_ainvoke)):
            t_many, t_graph = paired(many, fn, pairs)
            sizes = list(coalescer.batch_sizes)[-pairs * 8 :]
            report.results.append(
                BenchResult(
                    f"{name} vs decide_many(32)",
                    t_many / t_graph,
                    "× (throughput)",
                    "≥ 0.85",
                    {"decide_many_s": t_many, "graph_s": t_graph, "last_batch_sizes": sizes},
                )
            )
            tick(f"{name}: {t_many / t_graph:.2f}×")

        # -- joint vs single reads ------------------------------------------------
        joint_vs_singles(report, tick, reader, "tiny", reps * 8)
        one = THREAD

        # -- router vs direct decide ----------------------------------------------
        urgent = {"urgent": q["urgent"]}
        router = route(
            engine, "urgent", q["urgent"], path_map={"yes": "a", "no": "b"}, state_key="ticket"
        )
        t_direct, t_router = paired(
            lambda: engine.decide(one, urgent), lambda: router.invoke({"ticket": one}), reps * 8
        )
        report.results.append(
            BenchResult(
                "router call vs direct decide",
                t_router / t_direct,
                "× (time)",
                "≤ 1.05",
                {"direct_s": t_direct, "router_s": t_router},
            )
        )
        tick(f"router vs decide: {t_router / t_direct:.2f}×")

        # -- cache hit vs miss ------------------------------------------------------
        cached = ab.DecisionEngine(BatchingReader(reader, cache_size=1024))
        fresh = iter(states(10_000, "cache-"))
        t_miss, t_hit = paired(
            lambda: cached.decide(next(fresh), q), lambda: cached.decide(one, q), reps * 4
        )
        report.results.append(
            BenchResult(
                "answer-cache hit vs miss",
                t_miss / t_hit,
                "× faster",
                None,
                {"miss_s": t_miss, "hit_s": t_hit},
            )
        )
        tick(f"cache hit vs miss: {t_miss / t_hit:.1f}×")

        # -- length bucketing ---------------------------------------------------------
        mixed = [
            s + " " + " ".join(["More detail about the problem."] * (i % 4) * 20)
            for i, s in enumerate(states(16, "bucket-"))
        ]
        padded = ab.DecisionEngine(_tiny_reader(folder, bucket_padding=None))
        bucketed = ab.DecisionEngine(_tiny_reader(folder, bucket_padding=0.25))
        t_pad, t_bucket = paired(
            lambda: padded.decide_many(mixed, q), lambda: bucketed.decide_many(mixed, q), reps
        )
        report.results.append(
            BenchResult(
                "length bucketing (0.25) vs one padded forward, mixed lengths",
                t_pad / t_bucket,
                "× faster",
                None,
                {"padded_s": t_pad, "bucketed_s": t_bucket},
            )
        )
        tick(f"bucketing: {t_pad / t_bucket:.2f}×")
        engine.close()

    read_vs_generate(report, tick, reps=reps)


def joint_vs_singles(
    report: Report, tick: Callable[[str], None], reader: Any, model: str, pairs: int
) -> None:
    """One joint 3-question read of ``THREAD`` vs the same 3 questions as single reads,
    through default engines on ``reader``."""
    import agentbranch as ab

    q = _questions()
    single, joint = ab.DecisionEngine(reader), ab.DecisionEngine(reader, joint=True)
    t_single, t_joint = paired(
        lambda: single.decide(THREAD, q), lambda: joint.decide(THREAD, q), pairs
    )
    # What bounds the ratio: the model reads the state once instead of three times,
    # but the joint prompt also carries all three questions.
    tokens = {
        f"{name}_prompt_tokens": (e.decide(THREAD, q).usage or {}).get("input_tokens")
        for name, e in (("single", single), ("joint", joint))
    }
    report.results.append(
        BenchResult(
            f"one joint 3-question read vs 3 single reads ({model} DiffusionGemma)",
            t_single / t_joint,
            "× faster",
            "≥ 2",
            {"single_s": t_single, "joint_s": t_joint, "pairs": pairs, **tokens},
        )
    )
    tick(
        f"joint vs singles, {model}: {t_single / t_joint:.2f}× (prompt tokens "
        f"{tokens['single_prompt_tokens']} vs {tokens['joint_prompt_tokens']})"
    )


def read_vs_generate(report: Report, tick: Callable[[str], None], *, reps: int) -> None:
    """A ~50M DiffusionGemma: one-step read vs ``generate`` + parse, same prompt (as
    ``benchmarks/bench_read_vs_generate.py``)."""
    import re

    import torch

    import agentbranch as ab
    from agentbranch.engine.canvas import CanvasPlanner
    from agentbranch.engine.readers.threads import torch_threads
    from agentbranch.engine.readers.transformers import TransformersTokenBackend
    from agentbranch.engine.reads import QuestionSpec, ReadRequest
    from agentbranch.testing import build_tiny_diffusiongemma

    with tempfile.TemporaryDirectory(prefix="agentbranch-bench-") as tmp:
        folder = build_tiny_diffusiongemma(
            Path(tmp) / "dg50m",
            hidden_size=512,
            num_layers=9,
            num_experts=8,
            num_attention_heads=4,
            vocab_size=4096,
            canvas_length=64,
            max_position_embeddings=8192,
            sliding_window=512,
            seed=0,
        )
        backend = TransformersTokenBackend(folder)
        model, tok = backend.model, backend.tokenizer
        planner = CanvasPlanner(
            tok,
            vocab_size=backend.vocab_size,
            served_canvas=backend.served_canvas,
            max_model_len=backend.max_model_len,
        )
        labels = ("A", "B", "C")
        request = ReadRequest(
            state=TICKETS[1],
            questions=(
                QuestionSpec(
                    "route",
                    "choice",
                    "Which team should handle this ticket?",
                    ("billing", "technical support", "sales"),
                    ("payments, refunds, invoices", "bugs, login, crashes", None),
                    labels,
                ),
            ),
        )
        tick("~50M DiffusionGemma built")

        def read_once() -> str:
            (token_read,) = planner.plan(request).token_reads
            ((slot,),) = backend.read_tokens([token_read])
            return labels[max(range(3), key=slot.logprobs.__getitem__)]

        def generate_once() -> str | None:
            (token_read,) = planner.plan(request).token_reads
            ids = torch.tensor([token_read.prompt_ids])
            # The read runs with the backend's threads; so does generate, or the two
            # would not compare (with the default, one thread vs all cores).
            with torch_threads(backend.threads), torch.inference_mode():
                out = model.generate(ids, max_new_tokens=64, return_dict_in_generate=True)
            text = tok.decode(out.sequences[0, ids.shape[1] :], skip_special_tokens=True)
            found = re.search(r"\b([ABC])\b", text)
            return found.group(1) if found else None

        torch.manual_seed(0)
        t_read, t_gen = paired(read_once, generate_once, reps)
        joint_vs_singles(report, tick, ab.TransformersReader(backend), "~50M", reps * 2)
    report.results.append(
        BenchResult(
            "read vs generate + parse (~50M DiffusionGemma)",
            t_gen / t_read,
            "× faster",
            "≥ 20",
            {"read_s": t_read, "generate_s": t_gen},
        )
    )
    tick(f"read vs generate: {t_gen / t_read:.1f}×")


# --------------------------------------------------------------------- vLLM part


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: The in-process LLM and the server are built alike so their reads agree.
VLLM_ARGS: dict[str, Any] = {
    "enforce_eager": True,
    "dtype": "float32",
    "max_model_len": 2048,
    "kv_cache_memory_bytes": 256 * 2**20,
    "seed": 0,
}


@contextlib.contextmanager
def vllm_server(model: Path, served: str, log: Path) -> Iterator[str]:
    """vLLM's OpenAI server for ``model`` on a free loopback port (stopped on exit)."""
    import httpx

    port = _free_port()
    args = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", served,
        "--host", "127.0.0.1", "--port", str(port),
        "--enforce-eager", "--dtype", VLLM_ARGS["dtype"],
        "--max-model-len", str(VLLM_ARGS["max_model_len"]),
        "--kv-cache-memory-bytes", str(VLLM_ARGS["kv_cache_memory_bytes"]),
        "--seed", str(VLLM_ARGS["seed"]),
    ]  # fmt: skip
    with open(log, "w") as out:
        env = {
            **os.environ,
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "VLLM_CACHE_ROOT": str(log.parent / "vllm-cache"),
        }
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the vLLM server exited; see {log}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the vLLM server did not start; see {log}")
                time.sleep(0.5)
            yield url
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)


def _tier_qwen3(folder: Path) -> Path | None:
    """The vLLM tier's tiny Qwen3, when running from a checkout."""
    here = Path(__file__).resolve().parents[2] / "tests" / "vllm_tier" / "tiny_qwen3.py"
    if not here.is_file():
        return None
    spec = importlib.util.spec_from_file_location("_agentbranch_tiny_qwen3", here)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build_tiny_qwen3(folder)
    return folder


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
    report: Report, tick: Callable[[str], None], *, model: Path | None, quick: bool
) -> None:
    """In-process ``VLLMReader`` vs vLLM's own ``/v1/systemone`` server (through
    ``RemoteReader``), both alive at once and measured alternately at each point, then
    ``RemoteReader`` vs a raw client on that server."""
    import agentbranch as ab
    from agentbranch.engine.readers.remote import RemoteReader
    from agentbranch.engine.readers.vllm import VLLMReader

    served = "bench-model"
    q = _questions()
    #: Decisions per caller at each point: 30-256 decisions per measurement.
    per_caller = {1: 30, 8: 12, 32: 8}
    reps = 2 if quick else 3
    if quick:
        per_caller = {n: max(2, p // 2) for n, p in per_caller.items()}
    with tempfile.TemporaryDirectory(prefix="agentbranch-bench-vllm-") as tmp:
        if model is None:
            model = _tier_qwen3(Path(tmp) / "tiny-qwen3")
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
    remote_vs_raw(report, messages.append, url, served, _questions(), quick=quick)
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


# ------------------------------------------------------------------------- entry


def run_bench(
    *,
    tick: Callable[[str], None] = lambda _: None,
    quick: bool = False,
    vllm: bool | None = None,
    vllm_model: Path | None = None,
    cpu: bool = True,
) -> Report:
    """Run every comparison; ``vllm=None`` runs the vLLM part when ``vllm`` imports."""
    report = Report()
    start = time.perf_counter()
    if cpu:
        cpu_part(report, tick, quick=quick)
    if vllm is None:
        vllm = importlib.util.find_spec("vllm") is not None
    if vllm:
        vllm_part(report, tick, model=vllm_model, quick=quick)
    else:
        report.notes.append("vLLM part skipped: vllm is not installed")
    report.seconds = time.perf_counter() - start
    return report


def plot(report: Report, path: Path) -> Path:
    """The concurrency sweep (decisions/s by callers) and the ratios, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for name, points in report.sweep.items():
        xs = sorted(points)
        left.plot(xs, [points[x] for x in xs], marker="o", label=name)
    left.set_xscale("log", base=2)
    left.set_xlabel("concurrent callers")
    left.set_ylabel("decisions / s")
    left.set_title("throughput by concurrency")
    left.legend(fontsize=8)
    ratios = [r for r in report.results if r.unit != "decisions/s"]
    right.barh([r.name for r in ratios], [r.value for r in ratios], color="tab:blue")
    right.axvline(1.0, color="grey", linewidth=0.8)
    right.set_xscale("log")
    right.set_xlabel("ratio (see docs/benchmarks.md for each direction)")
    right.tick_params(axis="y", labelsize=7)
    right.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@contextlib.contextmanager
def _stdout_to_stderr(on: bool) -> Iterator[None]:
    """Send file descriptor 1 to stderr meanwhile (vLLM and its engine processes log to
    stdout), so ``--json`` prints nothing but the JSON."""
    if not on:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def command(
    json_out: bool = False,
    plot_path: Path | None = None,
    quick: bool = False,
    vllm: bool | None = None,
    vllm_model: Path | None = None,
    cpu: bool = True,
) -> int:
    """The ``agentbranch bench`` command: rich progress on stderr, a table (or JSON with
    ``json_out``) on stdout, the plot at ``plot_path``."""
    import json

    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Table
    from rich.text import Text

    from agentbranch.cli.tables import print_table

    out, err = Console(), Console(stderr=True)
    with (
        _stdout_to_stderr(json_out),
        Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err
        ) as progress,
    ):
        task = progress.add_task("benchmarking", total=None)

        def tick(message: str) -> None:
            progress.update(task, description=message)
            progress.console.print(f"[dim]{message}[/dim]")

        report = run_bench(tick=tick, quick=quick, vllm=vllm, vllm_model=vllm_model, cpu=cpu)
    if plot_path is not None:
        plot(report, plot_path)
        err.print(f"plot: {plot_path}")
    if json_out:
        out.print_json(json.dumps(report.as_json()))
        return 0
    table = Table(title=f"agentbranch bench ({report.seconds:.0f}s)")
    for col in ("comparison", "measured", "target"):
        table.add_column(col)
    for r in report.results:
        met = target_met(r)
        style = "" if met is None else "green" if met else "red"
        table.add_row(r.name, f"{r.value:.2f} {r.unit}", Text(target_text(r), style=style))
    print_table(out, table)
    sweep = Table(title="decisions/s by concurrent callers")
    sweep.add_column("path")
    counts = sorted({n for pts in report.sweep.values() for n in pts})
    for n in counts:
        sweep.add_column(str(n), justify="right")
    for name, pts in report.sweep.items():
        sweep.add_row(name, *(f"{pts[n]:.1f}" if n in pts else "" for n in counts))
    print_table(out, sweep)
    for note in report.notes:
        out.print(f"[dim]{note}[/dim]")
    return 0
