"""Peak memory of ``agentbranch audit report`` on an evidence store, at two store sizes.

The store holds realistic records: a few hundred written by the library itself (an
``Earned`` policy whose ``Generate`` teacher labels its fallback decisions), repeated
with fresh ids, times and decision identities until the store holds ``--records``. Each
size is reported on in a fresh process (``--json``), whose peak resident memory
(``ru_maxrss``) and wall time are printed, with the ratio of the two sizes and the
memory each further record costs.

    PYTHONPATH=src python benchmarks/bench_report_memory.py [--records 300000]

``--records 300000`` writes a store of about 200 MB (issue 64's month: 270,288 records).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The child that runs the report and prints its own peak memory (KiB on Linux).
CHILD = """
import contextlib, io, resource, sys
from agentbranch.cli import app
with contextlib.redirect_stdout(io.StringIO()):
    app(["audit", "report", sys.argv[1], "--json"], standalone_mode=False)
# This process's own peak: VmHWM is its memory's high-water mark since exec (ru_maxrss
# would also carry the parent's resident size at fork, a large pytest worker's).
try:
    with open("/proc/self/status") as status:
        print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")))
except OSError:  # not Linux
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def written_records(folder: Path, n: int = 200) -> list[dict]:
    """``n`` evidence records as the library writes them (a policy that learns to take
    a question whose teacher disagrees with the engine now and then)."""
    import re

    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    import agentbranch as ab
    from agentbranch.policy import Generate, Policy, Resolver
    from agentbranch.policy.earned import Earned

    class Teacher(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "teacher"

        def _generate(self, messages, stop=None, run_manager=None, **kw):  # noqa: ANN001
            truth = re.search(r"truth=(\w+)", str(messages[-1].content)).group(1)
            reply = AIMessage(json.dumps({"label": truth}))
            return ChatResult(generations=[ChatGeneration(message=reply)])

    def read(state: str, question: object) -> dict[str, float]:
        p = float(re.search(r"p=([0-9.]+)", state).group(1))
        return {"yes": p, "no": 1 - p}

    path = folder / "written.jsonl"
    earned = Earned(precision=0.9, store=str(path), refresh_s=0)
    policy = Policy(take_at=earned, fallbacks=[Generate(Teacher())])
    urgent = {"urgent": ab.yes_no("Is the ticket urgent?")}
    resolver = Resolver(ab.DecisionEngine(ab.ScriptedReader({"urgent": read})), urgent, policy)
    for i in range(n):
        truth = "no" if i % 9 == 0 else "yes"
        resolver.resolve(
            f"ticket {i}: the checkout page fails p={0.55 + (i % 40) / 100:.2f} truth={truth}"
        )
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def write_store(path: Path, records: list[dict], n: int) -> None:
    """``n`` records: ``records`` repeated, each with a fresh id, time and decision."""
    start = datetime(2026, 1, 1)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            rec = dict(records[i % len(records)])
            rec["id"] = f"{i:012d}-{i:032x}"
            rec["time"] = (start + timedelta(seconds=10 * i)).isoformat(timespec="milliseconds")
            rec["time"] += "+00:00"
            rec["decision"] = f"{i + 1:032x}"
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def report_peak(path: Path) -> tuple[int, float]:
    """Peak resident memory (bytes) and wall time of the report on ``path``, in a fresh
    process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    kib = int(done.stdout.split()[-1])
    return kib * (1 if sys.platform == "darwin" else 1024), took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=300_000, help="records in the large store")
    ap.add_argument("--small", type=int, default=0, help="records in the small one (default 1/4)")
    args = ap.parse_args()
    sizes = [args.small or max(1, args.records // 4), args.records]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        records = written_records(folder)
        peaks = []
        for n in sizes:
            store = folder / f"evidence-{n}.jsonl"
            write_store(store, records, n)
            peak, took = report_peak(store)
            size = store.stat().st_size
            peaks.append(peak)
            print(
                f"{n:>9,} records ({size / 1e6:,.0f} MB): peak RSS {peak / 1e6:,.0f} MB, "
                f"{took:,.1f} s"
            )
            store.unlink()
    per_record = (peaks[1] - peaks[0]) / max(1, sizes[1] - sizes[0])
    print(f"ratio large / small peak RSS: {peaks[1] / peaks[0]:.2f}")
    print(f"memory per further record: {per_record:,.0f} bytes")


if __name__ == "__main__":
    main()
