"""The examples in docs/ and the README run and print what they show.

A ```python block after ``<!-- example: NAME -->`` runs in a fresh process; its stdout and
stderr must equal the ```text block after ``<!-- output: NAME -->`` (latencies masked).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(kind: str) -> dict[tuple[str, str], str]:
    out = {}
    for doc in DOCS:
        text = doc.read_text("utf-8")
        for m in re.finditer(rf"<!-- {kind}: ([\w-]+) -->\n```\w+\n(.*?)```", text, re.S):
            out[(doc.name, m.group(1))] = m.group(2)
    return out


EXAMPLES = _blocks("example")
OUTPUTS = _blocks("output")


def _mask(text: str) -> str:
    return re.sub(r'(latency_s"?[=:] ?)[0-9.e-]+', r"\1<t>", text.strip())


def test_every_example_has_its_output():
    assert EXAMPLES and set(EXAMPLES) == set(OUTPUTS)


@pytest.mark.parametrize("key", sorted(EXAMPLES), ids=lambda k: f"{k[0]}:{k[1]}")
def test_doc_example_prints_what_the_docs_show(key, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(EXAMPLES[key], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBRANCH_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert _mask(done.stdout + done.stderr) == _mask(OUTPUTS[key])
