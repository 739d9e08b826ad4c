"""Refresh the README's `COLUMNS=80 agentbranch demo` block from a real run.

    python scripts/readme_demo.py          # rewrites the block in README.md
    python scripts/readme_demo.py --check  # exits 1 if the README is stale

Run it after a change to the embedded reader, the demo or its tickets;
tests/test_docs.py fails until the README shows the real output again.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(```console\n\$ COLUMNS=80 agentbranch demo\n)(.*?)(\n```)", re.S)


def main() -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBRANCH_")}
    env.update(COLUMNS="80", PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run(
        [sys.executable, "-m", "agentbranch.cli", "demo"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    ).stdout.rstrip("\n")
    readme = ROOT / "README.md"
    text = readme.read_text("utf-8")
    match = BLOCK.search(text)
    if match is None:
        print("README.md has no `COLUMNS=80 agentbranch demo` block", file=sys.stderr)
        return 2
    if match.group(2) == out:
        return 0
    if "--check" in sys.argv:
        print("README.md's demo output is stale: run scripts/readme_demo.py", file=sys.stderr)
        return 1
    readme.write_text(text[: match.start(2)] + out + text[match.end(2) :], "utf-8")
    print("README.md: demo output refreshed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
