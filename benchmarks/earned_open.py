"""How long a JSON Lines evidence store of N labels takes to open, without and with the
checkpoint beside it (issue 42: a million labels open in seconds).

    python benchmarks/earned_open.py [--labels 1000000] [--path evidence-1m.jsonl]

Writes the store if it does not exist (three questions, labels in time order, right more
often when the engine is sure), then opens it three times in fresh processes: without a
checkpoint (every line parsed and validated; this writes the checkpoint), and twice with
it (the SHA-256 of the prefix verified, nothing parsed). Prints wall and CPU seconds,
peak RSS and the states, which must be the same each time.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

try:
    import agentbranch  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

OPEN = """
import resource, sys, time
from agentbranch.policy import Earned
t0, c0 = time.perf_counter(), time.process_time()
earned = Earned(precision=0.9, level=0.95, store=sys.argv[1])
earned.refresh()
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
states = sorted((w.live.question_id, w.live.records, w.live.trust, w.live.take_at)
                for w in earned._ledger.windows.values())
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"wall {wall:.1f} s, CPU {cpu:.1f} s, peak RSS {rss:.0f} MB, states {states}")
"""


def write_store(path: Path, n: int) -> None:
    from agentbranch.policy.earned._evidence import new_evidence

    rng = random.Random(0)
    base = new_evidence(
        key="k",
        question_id="q",
        reader="embedded",
        model="all-MiniLM-L6-v2",
        source="fallback",
        band="fallback",
        confidence=0.5,
        options=["yes", "no"],
        engine_label="yes",
        teacher_label="yes",
        rate=1.0,
        take_at=None,
        trust="learning",
    ).to_json()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            conf = rng.random()
            right = rng.random() < 0.5 + conf / 2
            rec = dict(
                base,
                id=f"{i:012d}-{uuid.UUID(int=rng.getrandbits(128)).hex}",
                time=(t0 + timedelta(milliseconds=10 * i)).isoformat(timespec="milliseconds"),
                key=f"question-{i % 3}".ljust(32, "0"),
                question_id=f"q{i % 3}",
                confidence=conf,
                teacher_label="yes" if right else "no",
                correct=right,
            )
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=1_000_000)
    parser.add_argument("--path", type=Path, default=Path("evidence-1m.jsonl"))
    args = parser.parse_args()
    if not args.path.exists():
        write_store(args.path, args.labels)
    state = Path(str(args.path) + ".state")
    state.unlink(missing_ok=True)
    size = args.path.stat().st_size / 2**20
    print(f"store {args.path}: {size:.0f} MB")
    for run in ("no checkpoint", "checkpoint", "checkpoint again"):
        out = subprocess.run(
            [sys.executable, "-c", OPEN, str(args.path)], check=True, capture_output=True, text=True
        )
        extra = f" (checkpoint {state.stat().st_size / 2**10:.0f} KiB)" if state.exists() else ""
        print(f"{run:17} {out.stdout.strip()}{extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
