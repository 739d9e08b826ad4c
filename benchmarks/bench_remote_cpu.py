"""Client CPU per request: ``RemoteReader.aread`` vs a raw ``httpx.AsyncClient``, no vLLM.

    python benchmarks/bench_remote_cpu.py [--requests 96] [--callers 32] [--rounds 100]
    python benchmarks/bench_remote_cpu.py --http      # over local sockets, a tiny server
    python benchmarks/bench_remote_cpu.py --profile   # cProfile of the reader's rounds

The comparison ``remote_vs_raw`` of ``benchmarks/bench.py`` makes against a vLLM server,
with the server replaced by one that answers every ``/v1/systemone`` request with the
same canned, valid answer (the bench's three questions):

* default: an ``httpx.MockTransport`` in this process (no sockets). It yields to the
  loop once per request, so callers queue at the in-flight limit as against a server.
* ``--http``: a minimal keep-alive HTTP/1.1 server in a child process on 127.0.0.1, so
  the client runs httpx's real pool, sockets and event-loop wake-ups (its CPU per
  request is close to what ``benchmarks/bench.py`` measures); the server's CPU is not
  counted.

With a real server on the same cores, the client's CPU per request decides the
throughput ratio; here only the client is measured, so its cost shows plainly. Both
sides do the same work per round, as in ``benchmarks/bench.py``: a fresh event loop and
client (same pool limits), ``--callers`` concurrent callers, every request's body built
with ``build_payload`` and posted, its JSON decoded; the raw side also calls
``raise_for_status()``, the reader validates the answers into reads (what it is for).
Rounds alternate (A B B A ...); it prints the median CPU per request of each side
(``time.process_time``), the median paired difference and ratio. Nothing is asserted:
other jobs on the machine move single rounds a lot, compare the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import agentbranch  # noqa: F401
    import agentbranch_bench  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import httpx

import agentbranch as ab
from agentbranch.engine.readers.remote import RemoteReader, build_payload
from agentbranch_bench.remote import raw_client_round
from agentbranch_bench.workload import questions, states

MOCK_URL = "http://vllm.bench:8000"
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


def serve(body_file: str) -> None:
    """``--serve``: answer every request on a keep-alive connection with the file's
    bytes; prints the port, then runs until killed."""
    body = Path(body_file).read_bytes()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    answer = head % len(body) + body

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                headers = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in headers.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                writer.write(answer)
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=512)
        print(server.sockets[0].getsockname()[1], flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


@contextlib.contextmanager
def local_server(content: bytes) -> Iterator[str]:
    """The base URL of a ``serve`` child process answering ``content``."""
    with tempfile.TemporaryDirectory() as tmp:
        body_file = Path(tmp) / "answer.json"
        body_file.write_bytes(content)
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(body_file)], stdout=subprocess.PIPE
        )
        try:
            assert child.stdout is not None
            yield f"http://127.0.0.1:{int(child.stdout.readline())}"
        finally:
            child.kill()
            child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=100, help="rounds per side")
    parser.add_argument("--http", action="store_true", help="real sockets, a local server")
    parser.add_argument("--profile", action="store_true", help="cProfile the reader rounds")
    parser.add_argument("--serve", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    plain = ab.DecisionEngine(ab.ScriptedReader(), batching=False)
    q = questions()
    requests = [plain._prepare(s, q, 1).request for s in states(args.requests, "cpu-")]
    content = canned_answer(build_payload(requests[0], model=MODEL))
    with contextlib.ExitStack() as stack:
        if args.http:
            url, transport = stack.enter_context(local_server(content)), None
        else:
            url, transport = MOCK_URL, mock_transport(content)
        compare(args, requests, url, transport)


def compare(args: Any, requests: list[Any], url: str, transport: Any) -> None:
    reader = RemoteReader(url, model=MODEL, max_connections=args.callers, async_transport=transport)

    async def with_reader() -> None:
        reads = await asyncio.gather(*(reader.aread([r]) for r in requests))
        assert all(len(r[0]) == 3 for r in reads), "every request read its 3 questions"

    async def raw() -> None:
        await raw_client_round(url, MODEL, requests, args.callers, transport)

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
    diffs = [(a - b) * 1000 for a, b in zip(cpu["reader"], cpu["raw"])]
    ratios = [a / b for a, b in zip(cpu["reader"], cpu["raw"])]
    where = "local sockets, a minimal server" if args.http else "MockTransport, no sockets"
    print(
        f"{len(requests)} requests, {args.callers} callers, {args.rounds} rounds per side ({where})"
    )
    print(f"client CPU per request: reader {m_reader:.3f} ms, raw {m_raw:.3f} ms")
    print(f"reader - raw, paired rounds: median {statistics.median(diffs):+.1f} µs per request")
    print(
        f"reader / raw, paired rounds: median {statistics.median(ratios):.3f}× "
        f"(middle half {_quartiles(ratios)})"
    )


def _quartiles(values: list[float]) -> str:
    low, _, high = statistics.quantiles(values, n=4)
    return f"{low:.3f}–{high:.3f}"


if __name__ == "__main__":
    main()
