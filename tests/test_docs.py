"""Every snippet of README.md and docs/*.md runs on the engine it names and prints what the
page shows. How a page is read and the ``<!-- doc-test: ... -->`` directives:
tests/_doc_pages.py; what runs in each page's process: tests/_doc_runner.py; setups,
checks and scenarios named by the pages: tests/_doc_hooks.py.

No AGENTBRANCH_* variable reaches a page and the hub is offline, so
``DecisionEngine.from_env()`` is the embedded CPU reader, as on a laptop.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from _doc_pages import ROOT, find, mask, sessions, snippets

SNIPPETS = snippets()
RUNNER = ROOT / "tests" / "_doc_runner.py"


class Sessions:
    """Runs each session once, when its first snippet is tested."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.tmp = tmp_path_factory
        self.results: dict[str, dict] = {}
        self.steps = sessions()
        self.cache = tmp_path_factory.mktemp("doc-cache")  # what pages share (_doc_hooks)

    def result(self, session: str, line: int) -> dict:
        if session not in self.results:
            self.results[session] = self._run(session)
        return self.results[session][str(line)]

    def _run(self, session: str) -> dict:
        work = self.tmp.mktemp(re.sub(r"\W+", "-", session))
        spec = [
            {"path": str(ROOT / b.page), **vars(b), "output": None} for b in self.steps[session]
        ]
        (work.parent / f"{work.name}.json").write_text(json.dumps(spec), "utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBRANCH_")}
        env["HF_HUB_OFFLINE"] = "1"
        env["DOC_TEST_CACHE"] = str(self.cache)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")])
        )
        result = work.parent / f"{work.name}.result.json"
        done = subprocess.run(
            [sys.executable, str(RUNNER), str(work.parent / f"{work.name}.json"), str(result)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0 and result.is_file(), done.stderr[-3000:]
        return json.loads(result.read_text("utf-8"))


@pytest.fixture(scope="session")
def doc_sessions(tmp_path_factory):
    return Sessions(tmp_path_factory)


def _shown_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if line.startswith("==="):  # a separator line is as wide as the terminal
            line = line.strip("= ")
        if line.strip():
            out.append(" ".join(line.split()))
    return out


def _exact(text: str) -> list[str]:
    """The lines, but for trailing spaces (rich pads a centred title; editors strip them)."""
    return [line.rstrip() for line in text.rstrip().splitlines()]


def test_every_page_has_snippets_and_every_session_runs_something():
    pages = {b.page for b in SNIPPETS}
    assert "README.md" in pages and len(pages) >= 9
    assert all(any(b.runs for b in steps) for steps in sessions().values())


@pytest.mark.parametrize("block", SNIPPETS, ids=str)
def test_snippet(block, doc_sessions):
    if "skip" in block.directives:
        pytest.skip(f"{block}: {block.directives['skip']}")
    if "excerpt" in block.directives:
        page, path = block.directives["excerpt"].split()
        tested = find(page, path).body.splitlines()
        for line in block.body.strip().splitlines():
            assert line in tested, f"{block}: {line!r} is not in {page}'s {path}"
        return
    result = doc_sessions.result(block.session, block.line)
    assert result["error"] is None, f"{block} failed:\n{result['error']}\n{result.get('stderr')}"
    expected = block.expected
    if expected is None:
        return
    printed = mask(result[block.stream])
    if block.compare_lines:
        shown = "\n".join(_shown_lines(printed))
        for line in _shown_lines(mask(expected)):
            assert line in shown, f"{block} shows {line!r}; the run printed:\n{printed}"
    else:
        assert _exact(printed) == _exact(mask(expected)), f"{block} printed:\n{printed}"
