"""Refresh what README.md and docs/*.md show a snippet printing, from a real run of the
page's session (the same runner tests/test_docs.py uses).

    python scripts/doc_outputs.py docs/earned.md          # rewrites the page's outputs
    python scripts/doc_outputs.py docs/earned.md --check  # exits 1 if any is stale

Only outputs compared whole are rewritten (not ``lines`` blocks, which show a part of
what runs print); timings the tests mask are written as printed. Run it after a change
that moves what a page's examples print, then read the diff: the page's prose must
still say what the new output shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _doc_pages import mask, sessions  # noqa: E402


def run_session(steps: list, work: Path) -> dict:
    spec = [{"path": str(ROOT / b.page), **vars(b), "output": None} for b in steps]
    (work / "spec.json").write_text(json.dumps(spec), "utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBRANCH_")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    run = work / "run"
    run.mkdir()
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests/_doc_runner.py"), str(work / "spec.json"),
         str(work / "result.json")],
        cwd=run, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the session failed:\n{done.stderr[-3000:]}")
    return json.loads((work / "result.json").read_text("utf-8"))


def main() -> int:
    pages = [a for a in sys.argv[1:] if not a.startswith("--")]
    check = "--check" in sys.argv
    stale = 0
    for page in pages:
        path = ROOT / page
        lines = path.read_text("utf-8").split("\n")
        edits: list[tuple[int, int, list[str]]] = []
        for steps in sessions().values():
            if not any(b.page == page for b in steps):
                continue
            with tempfile.TemporaryDirectory() as tmp:
                results = run_session(steps, Path(tmp))
            for b in steps:
                if b.page != page or b.expected is None or b.compare_lines:
                    continue
                got = results[str(b.line)]
                if got["error"] is not None:
                    raise SystemExit(f"{b} failed:\n{got['error']}")
                printed = got[b.stream].rstrip("\n")
                if mask(printed).rstrip() == mask(b.expected).rstrip():
                    continue
                stale += 1
                shown = b.output if b.output is not None else b
                first = shown.line  # the opening fence, 1-based: its body starts after it
                if b.output is None and b.lang == "console":
                    first += 1  # a console block keeps its command line
                end = first + len(shown.body.rstrip("\n").split("\n"))
                if b.output is None and b.lang == "console":
                    end -= 1
                edits.append((first, end, printed.split("\n")))
                print(f"{b}: output differs")
        if check or not edits:
            continue
        for first, end, new in sorted(edits, reverse=True):
            lines[first:end] = new
        path.write_text("\n".join(lines), "utf-8")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
