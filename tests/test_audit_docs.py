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


def test_the_readme_audit_snippet_builds_an_audited_policy(offline_embedded):
    from _audit_fixtures import Teacher

    from agentbranch.policy import Audit, Generate, Policy, Resolver

    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme.split("## Audits: measure the take band on live traffic", 1)[1]
    body = BLOCK.search(section).group(2)
    namespace = {"Policy": Policy, "Generate": Generate, "Audit": Audit, "chat_model": Teacher()}
    exec(compile(body, "README.md", "exec"), namespace)
    policy = namespace["policy"]
    assert policy.audit.rate == 0.05 and policy.audit.model is None  # the fallback model
    import agentbranch as ab

    engine = ab.DecisionEngine(ab.ScriptedReader({"team": {"billing": 0.99, "outage": 0.01}}))
    q = {"team": ab.choice("Which team?", ["billing", "outage"])}
    resolver = Resolver(engine, q, policy)
    for i in range(200):
        assert resolver.resolve(f"ticket {i}")["team"]["label"] == "billing"
    assert policy.audit.flush(timeout=30)
    assert policy.audit.stats.audited == policy.audit.stats.sampled > 0
    assert (offline_embedded / "audits.jsonl").is_file()
