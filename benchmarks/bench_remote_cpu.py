"""Client CPU per request: ``RemoteReader.aread`` vs a raw ``httpx.AsyncClient``, no server.

    python benchmarks/bench_remote_cpu.py [--requests 96] [--callers 32] [--rounds 20]
    python benchmarks/bench_remote_cpu.py --profile      # cProfile of the reader's rounds

The same comparison as ``remote_vs_raw`` in ``agentbranch bench`` (which needs a vLLM
server), with the server replaced by an ``httpx.MockTransport`` that answers every
``/v1/systemone`` request with one canned, valid answer (the three bench questions).
With a real server on the same cores, the client's CPU per request decides the
throughput ratio; here only the client runs, so its cost shows plainly.

Both sides do the same work per round, as in ``agentbranch bench``: a fresh event loop
and client (same pool limits), ``--callers`` concurrent callers, every request's body
built with ``build_payload`` and posted, its JSON decoded; the raw side also calls
``raise_for_status()``, the reader validates the answers into reads (what it is for).
The transport yields to the loop once per request, so callers queue at the in-flight
limit as they do against a server. Rounds alternate (A B B A ...); it prints the
median CPU per request of each side (``time.process_time``) and their ratio.
Nothing is asserted: compare the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import httpx

import agentbranch as ab
from agentbranch.bench import _questions, states
from agentbranch.engine.readers.remote import RemoteReader, build_payload

URL = "http://vllm.bench:8000"
MODEL = "bench-model"


def canned_answer(body: dict[str, Any]) -> bytes:
    """A valid vLLM ``/v1/systemone`` response (with diagnostics) to ``body``."""
    answers, diagnostics = {}, {}
    for key, spec in body["questions"].items():
        if spec["type"] == "noul":
            probs = {"yes": 0.7, "no": 0.3}
            answers[key] = {"type": "noul", "noul": 0.7, "probabilities": probs}
        else:
            names = list(spec["criteria"])
            if spec["type"] == "score":
                names = [str(i) for i in range(len(names))]
            p = [0.6] + [0.4 / (len(names) - 1)] * (len(names) - 1)
            answers[key] = {"type": spec["type"], "probabilities": dict(zip(names, p))}
        answers[key]["confidence"] = 0.6 * 0.9
        diagnostics[key] = {"label_mass": 0.9, "argmax_is_label": True}
    return json.dumps(
        {
            "id": "decision-1",
            "object": "structured_decision",
            "model": MODEL,
            "answers": answers,
            "usage": {"input_tokens": 120, "output_tokens": len(answers)},
            "diagnostics": diagnostics,
        }
    ).encode()


def mock_transport(content: bytes) -> httpx.MockTransport:
    async def handle(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0)  # a server answers later: callers queue at the limit
        return httpx.Response(200, content=content, headers={"content-type": "application/json"})

    return httpx.MockTransport(handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="cProfile the reader rounds")
    args = parser.parse_args()

    plain = ab.DecisionEngine(ab.ScriptedReader(), batching=False)
    q = _questions()
    requests = [plain._prepare(s, q, 1).request for s in states(args.requests, "cpu-")]
    transport = mock_transport(canned_answer(build_payload(requests[0], model=MODEL)))
    reader = RemoteReader(URL, model=MODEL, max_connections=args.callers, async_transport=transport)

    async def with_reader() -> None:
        reads = await asyncio.gather(*(reader.aread([r]) for r in requests))
        assert all(len(r[0]) == 3 for r in reads), "every request read its 3 questions"

    async def raw() -> None:
        limits = httpx.Limits(max_connections=args.callers, max_keepalive_connections=args.callers)
        async with httpx.AsyncClient(limits=limits, timeout=30, transport=transport) as client:
            gate = asyncio.Semaphore(args.callers)

            async def one(r: Any) -> Any:
                async with gate:
                    response = await client.post(
                        URL + "/v1/systemone", json=build_payload(r, model=MODEL)
                    )
                    response.raise_for_status()
                    return response.json()

            await asyncio.gather(*(one(r) for r in requests))

    def cpu_ms(fn: Any) -> float:
        start = time.process_time()
        asyncio.run(fn())
        return (time.process_time() - start) / len(requests) * 1000

    if args.profile:
        cpu_ms(with_reader)  # warm-up
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.rounds):
            asyncio.run(with_reader())
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
        reader.close()
        return

    cpu_ms(with_reader), cpu_ms(raw)  # warm-up
    cpu: dict[str, list[float]] = {"reader": [], "raw": []}
    for i in range(args.rounds):
        order = ("reader", "raw") if i % 2 == 0 else ("raw", "reader")
        for side in order:
            cpu[side].append(cpu_ms(with_reader if side == "reader" else raw))
    reader.close()
    m_reader, m_raw = statistics.median(cpu["reader"]), statistics.median(cpu["raw"])
    paired = [a / b for a, b in zip(cpu["reader"], cpu["raw"])]
    print(
        f"{len(requests)} requests, {args.callers} callers, {args.rounds} rounds per side "
        "(MockTransport, no server)"
    )
    print(f"client CPU per request: reader {m_reader:.3f} ms, raw {m_raw:.3f} ms")
    print(f"reader - raw: {m_reader - m_raw:+.3f} ms per request")
    print(
        f"reader / raw: {statistics.median(paired):.3f}× "
        f"(paired rounds {min(paired):.3f}–{max(paired):.3f})"
    )


if __name__ == "__main__":
    main()
