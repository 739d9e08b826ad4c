"""docs/replay.md, run as its reader would: the test files it shows are recorded on the
tiny DiffusionGemma, replayed in CI mode, broken (a reworded question, a dropped ticket),
re-recorded with another model and diffed; its outputs are compared with what really
prints."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

DOC = Path(__file__).resolve().parents[1] / "docs" / "replay.md"
PLUGIN = ("-p", "agentbranch.replay.pytest_plugin")


# In CI mode no model may load: the test's reader factory would build one.
NO_MODEL = (
    "import agentbranch.engine.readers.transformers as tr\n\n"
    "def _no_model(*a, **k):\n"
    "    raise AssertionError('replay loaded a model')\n\n"
    "tr.TransformersReader.from_pretrained = _no_model\n\n"
)


def run(project, *args: str):
    """pytest in a subprocess: torch cannot be imported twice in one process, which an
    in-process run (it unloads the modules it imported) would do."""
    return project.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", *args, timeout=600)


def doc_blocks() -> dict[str, str]:
    """``<!-- doc-test: TAG -->`` followed by a fenced block → {TAG: block text}."""
    found = re.findall(r"<!-- doc-test: ([^>]+?) -->\n```\w*\n(.*?)```", DOC.read_text(), re.S)
    return {tag: body for tag, body in found}


def assert_lines_shown(doc_text: str, output: str) -> None:
    for line in doc_text.strip().splitlines():
        if line.startswith("==="):  # the separator line is as wide as the terminal
            line = line.strip("= ")
        assert line.strip() in output, f"the doc shows {line.strip()!r}, the run printed:\n{output}"


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    for tag, body in doc_blocks().items():
        if tag.startswith("file "):
            path = pytester.path / tag.removeprefix("file ")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
    return pytester


def test_the_doc_flow_records_replays_misses_and_diffs(project, monkeypatch, tiny_model_dir):
    blocks = doc_blocks()
    test_file = project.path / "tests" / "test_triage_replay.py"
    cassettes = project.path / "tests" / "cassettes"

    # 1-2. First run records (mode new); in CI it replays with no model.
    run(project, "tests/test_triage_replay.py").assert_outcomes(passed=2)
    assert sorted(p.name for p in cassettes.iterdir()) == [
        "test_reply_drafting.jsonl",
        "test_triage_routes.jsonl",
    ]
    recorded = {p.name: p.read_text() for p in cassettes.iterdir()}
    monkeypatch.setenv("CI", "true")
    conftest = project.path / "tests" / "conftest.py"
    conftest.write_text(NO_MODEL)
    result = run(project, "tests/test_triage_replay.py")
    result.assert_outcomes(passed=2)
    assert "agentbranch decision cassettes" not in result.stdout.str()
    assert {p.name: p.read_text() for p in cassettes.iterdir()} == recorded

    # 3. The team question reworded: the miss shown in the doc.
    conftest.write_text(
        NO_MODEL
        + "import pytest\nimport agentbranch as ab\nfrom agentbranch.demo import triage\n\n"
        "@pytest.fixture(autouse=True)\ndef reword(monkeypatch):\n"
        "    monkeypatch.setitem(triage.TRIAGE_QUESTIONS, 'team',\n"
        "        ab.choice('Which team owns this ticket?', triage.TEAMS))\n"
    )
    result = run(project, "tests/test_triage_replay.py", "-k", "routes")
    result.assert_outcomes(failed=1)
    assert_lines_shown(blocks["miss"], result.stdout.str())
    conftest.write_text(NO_MODEL)

    # The stale entries of a run that dropped the last ticket.
    source = test_file.read_text()
    test_file.write_text(
        source.replace("for t in SAMPLE_TICKETS]", "for t in SAMPLE_TICKETS[:5]]").replace(
            '"feature_request", "billing"\n    ]', '"feature_request"\n    ]'
        )
    )
    result = run(project, "tests/test_triage_replay.py")
    result.assert_outcomes(passed=2)
    assert_lines_shown(blocks["stale"], result.stdout.str())
    test_file.write_text(source)

    # 6. Drift: re-record with another model, diff against the baseline.
    monkeypatch.delenv("CI")
    conftest.unlink()
    baseline = project.path / "baseline"
    shutil.copytree(cassettes, baseline)
    test_file.write_text(source.replace("tiny_diffusiongemma()", "tiny_diffusiongemma(seed=1)"))
    run(project, "--agentbranch-record=all", "tests/test_triage_replay.py")
    from agentbranch.cli import app

    result = CliRunner().invoke(
        app,
        [
            "replay",
            "diff",
            str(baseline / "test_triage_routes.jsonl"),
            str(cassettes / "test_triage_routes.jsonl"),
        ],
    )
    assert result.exit_code == 1, result.stdout
    assert_lines_shown(blocks["diff-summary"], result.stdout)


def test_the_second_opinion_file_records_and_replays(project, monkeypatch):
    project.runpytest(*PLUGIN, "tests/test_second_opinion.py").assert_outcomes(passed=1)
    monkeypatch.setenv("CI", "1")
    project.runpytest(*PLUGIN, "tests/test_second_opinion.py").assert_outcomes(passed=1)


def test_the_outside_pytest_snippet_prints_what_the_doc_shows(tmp_path, monkeypatch):
    blocks = doc_blocks()
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks["python"], "docs/replay.md", "exec"), {})
    printed = [line for line in out.getvalue().splitlines() if "agentbranch.decision" not in line]
    assert printed == blocks["output"].strip().splitlines()


def test_the_readme_replay_snippet_is_part_of_the_tested_doc_file():
    readme = (DOC.parents[1] / "README.md").read_text()
    section = readme[readme.index("## Replay:") : readme.index("## Testing your own graphs")]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    tested = doc_blocks()["file tests/test_triage_replay.py"]
    for line in snippet.strip().splitlines():
        assert line in tested.splitlines(), line
