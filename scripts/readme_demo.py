"""Refresh the README's `COLUMNS=80 agentbranch demo` blocks (the loop, and `--each`) from
real runs.

    python scripts/readme_demo.py          # rewrites the blocks in README.md
    python scripts/readme_demo.py --check  # exits 1 if the README is stale

Run it after a change to the embedded reader, earned trust or learning, the demo or its
tickets; tests/test_docs.py fails until the README shows the real output again (the
timings of the loop's last two lines are masked there).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (["demo"], ["demo", "--each"])


def block(args: list[str]) -> re.Pattern[str]:
    command = re.escape(" ".join(["$ COLUMNS=80 agentbranch", *args]))
    return re.compile(rf"(```console\n{command}\n)(.*?)(\n?```)", re.S)


def main() -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBRANCH_")}
    env.update(COLUMNS="80", PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1")
    readme = ROOT / "README.md"
    text = readme.read_text("utf-8")
    stale = []
    for args in COMMANDS:
        out = subprocess.run(
            [sys.executable, "-m", "agentbranch.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            stdin=subprocess.DEVNULL,
        ).stdout.rstrip("\n")
        match = block(args).search(text)
        if match is None:
            print(
                f"README.md has no `COLUMNS=80 agentbranch {' '.join(args)}` block", file=sys.stderr
            )
            return 2
        if match.group(2) == out:
            continue
        stale.append(" ".join(args))
        text = text[: match.start(2)] + out + "\n```" + text[match.end(3) :]
    if not stale:
        return 0
    if "--check" in sys.argv:
        print(
            f"README.md's output of {', '.join(stale)} is stale: run scripts/readme_demo.py",
            file=sys.stderr,
        )
        return 1
    readme.write_text(text, "utf-8")
    print(f"README.md: output of {', '.join(stale)} refreshed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
