"""Every snippet of docs/audit.md runs, in order, on the engine it names (the embedded CPU
reader ``DecisionEngine.from_env()`` picks here), and prints what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

DOC = Path(__file__).resolve().parents[1] / "docs" / "audit.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


@pytest.fixture
def offline_embedded(monkeypatch, tmp_path):
    for key in (
        "AGENTBRANCH_VLLM_MODEL",
        "AGENTBRANCH_REMOTE_URL",
        "AGENTBRANCH_ENGINE",
        "AGENTBRANCH_CALIBRATION",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_snippet_in_docs_audit_runs_and_prints_what_the_page_shows(offline_embedded):
    from agentbranch.cli import app

    blocks = BLOCK.findall(DOC.read_text())
    assert [k for k, _ in blocks].count("python") >= 4
    namespace: dict = {"__name__": "docs_audit"}
    output = ""
    checked = 0
    for kind, body in blocks:
        if kind == "python":
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile(body, str(DOC), "exec"), namespace)
            output = buf.getvalue()
        elif kind == "bash":
            output = ""
            for line in body.splitlines():
                if line.startswith("agentbranch "):
                    result = CliRunner().invoke(app, shlex.split(line)[1:])
                    assert result.exit_code == 0, (line, result.output)
                    output += result.output
        elif kind == "text":
            shown = _lines(output)
            for line in _lines(body):
                assert line in shown, f"docs/audit.md shows {line!r}; the run printed:\n{output}"
            checked += 1
    assert checked >= 4
    assert (offline_embedded / "audit.png").is_file()
    assert (offline_embedded / "calibration.json").is_file()
