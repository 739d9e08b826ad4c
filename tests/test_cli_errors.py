"""The CLI run as a user would, with bad files and numbers: a clear message and a
non-zero exit, never a traceback, a hang or a lost fit (issue 22). And the tables a
pipe or a narrow terminal gets."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from _audit_records import audits_file as _audits
from _audit_records import worse_audits as _worse_audits
from _cli_checks import assert_clear_error
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

import agentbranch as ab
from agentbranch.audit import calibrate_from_audit
from agentbranch.cli import app
from agentbranch.cli.calibrate import _folded
from agentbranch.cli.common import print_table

CLEAN_ENV = {
    "AGENTBRANCH_ENGINE": "",
    "AGENTBRANCH_VLLM_MODEL": "",
    "AGENTBRANCH_REMOTE_URL": "",
    "AGENTBRANCH_CALIBRATION": "",
}
LABELLED = Path(ab.__file__).parent / "demo" / "labelled_tickets.jsonl"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Default outputs (reliability.png, calibration.json) land in a temporary folder."""
    monkeypatch.chdir(tmp_path)


def run(*args: str):
    return CliRunner().invoke(app, list(args), env=CLEAN_ENV)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "bad.json").write_text("{oops")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "latin1.json").write_bytes(b'{"q": "caf\xe9"}')
    (tmp_path / "dir").mkdir()
    return tmp_path


# -- --questions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("bad.json", "not valid JSON"),
        ("nope.json", "does not exist"),
        ("list.json", "expected a JSON object {id: question}"),
        ("deep.json", "nested too deeply"),
        ("latin1.json", "not UTF-8"),
        ("dir", "is a directory"),
    ],
)
def test_questions_files_that_cannot_be_used_are_clear_errors(files, name, says):
    path = str(files / name)
    assert_clear_error(run("decide", "hello", "--questions", path), f"questions file {path}", says)
    assert_clear_error(
        run("calibrate", str(LABELLED), "--questions", path, "--out", str(files / "c.json")),
        f"questions file {path}",
        says,
    )


# -- --out, --diagram, --plot --------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "where", "says"),
    [
        ("--out", "missing/c.json", "does not exist; create it first"),
        ("--out", "dir", "is a directory"),
        ("--diagram", "missing/r.png", "does not exist; create it first"),
        ("--diagram", "dir", "is a directory"),
    ],
)
def test_calibrate_refuses_an_output_it_cannot_write_before_fitting(files, flag, where, says):
    args = {"--out": str(files / "c.json"), "--diagram": str(files / "r.png")}
    args[flag] = str(files / where)
    result = run("calibrate", "--from-audit", str(_audits(files)), *sum(args.items(), ()))
    assert_clear_error(result, f"error: {flag} {files / where}", says)
    assert not (files / "c.json").exists() and not (files / "r.png").exists()


# -- numbers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--target-precision", "nan"), "target_precision must be in (0, 1]"),
        (("--target-precision", "5"), "target_precision must be in (0, 1]"),
        (("--min-examples", "0"), "Invalid value for '--min-examples'"),
        (("--permutations", "0"), "Invalid value for '--permutations'"),
    ],
)
def test_calibrate_numbers_are_checked(tmp_path, args, says):
    out = tmp_path / "c.json"
    result = run("calibrate", "--from-audit", str(_audits(tmp_path)), "--out", str(out), *args)
    assert_clear_error(result, says)
    assert not out.exists()


# -- demo --tickets / --limit ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{oops\n", "tickets.jsonl:1: not valid JSON"),
        ("[1, 2]\n", "tickets.jsonl:1: no 'ticket' text"),
        ('{"ticket": ["a"]}\n', "tickets.jsonl:1: no 'ticket' text"),
        ("\n\n", "holds no tickets"),
    ],
)
def test_demo_tickets_that_cannot_be_read_are_clear_errors(tmp_path, content, says):
    path = tmp_path / "tickets.jsonl"
    path.write_text(content)
    assert_clear_error(run("demo", "--tickets", str(path)), says)


def test_demo_tickets_missing_or_a_directory(tmp_path):
    assert_clear_error(run("demo", "--tickets", str(tmp_path / "nope.jsonl")), "does not exist")
    assert_clear_error(run("demo", "--tickets", str(tmp_path)), "is a directory")
    assert_clear_error(run("demo", "--limit", "-1"), "Invalid value for '--limit'")


# -- a fit that makes the held-out split worse -------------------------------------------------


def test_a_fit_that_makes_held_out_ece_and_brier_worse_is_not_saved(tmp_path, caplog):
    path, out = _worse_audits(tmp_path), tmp_path / "c.json"
    with caplog.at_level(logging.WARNING, logger="agentbranch.calibration"):
        report = calibrate_from_audit(path, seed=0)
    assert any("the fit makes the held-out examples worse" in r.message for r in caplog.records)
    assert any(w.startswith("the fit makes the held-out examples worse") for w in report.warnings)
    result = run(
        "calibrate", "--from-audit", str(path), "--out", str(out), "--diagram",
        str(tmp_path / "r.png"),
    )  # fmt: skip
    assert_clear_error(result, "not saved", "--force saves it anyway", code=1)
    assert "collect more labelled examples or audits" in result.output
    assert not out.exists()
    result = run(
        *("calibrate", "--from-audit", str(path), "--out", str(out), "--json"),
        *("--diagram", str(tmp_path / "r.png")),
    )
    assert result.exit_code == 1 and not out.exists()
    assert json.loads(result.stdout[result.stdout.index("{") :])["worse"] is True
    forced = run(
        "calibrate", "--from-audit", str(path), "--out", str(out), "--force", "--diagram",
        str(tmp_path / "r.png"),
    )  # fmt: skip
    assert forced.exit_code == 0 and "saved anyway (--force)" in forced.output
    assert ab.Calibration.load(out).version == 1


# -- tables ----------------------------------------------------------------------------------


def _wide_table() -> Table:
    table = Table(title="calibration")
    for col in ("question", "n", "ECE before→after", "Brier before→after", "coverage"):
        table.add_column(col)
    table.add_row("team", "21", "0.128 → 0.153", "0.270 → 0.269", "0.81 (0.88)")
    return table


def test_a_table_is_folded_on_a_narrow_terminal():
    console = Console(force_terminal=True, width=40, record=True, color_system=None)
    table = _wide_table()
    print_table(console, table, lambda: _folded(table))
    text = console.export_text()
    assert all(len(line) <= 40 for line in text.splitlines())
    assert "0.128 → 0.153" in text and "0.270 → 0.269" in text  # every value whole
    assert "│ ECE before→after" in text  # one (name, value) row per column


def test_a_table_keeps_its_natural_width_in_a_pipe():
    console = Console(force_terminal=False, width=60, record=True, color_system=None)
    print_table(console, _wide_table())
    rows = [line for line in console.export_text().splitlines() if "team" in line]
    assert len(rows) == 1 and "0.128 → 0.153" in rows[0] and "0.81 (0.88)" in rows[0]
    assert console.width == 60  # restored


def test_decide_state_on_stdin_that_is_not_utf8():
    result = CliRunner().invoke(
        app, ["decide", "-", "--yes-no", "Urgent?", "--yes", "now", "--no", "later"],
        input=b"caf\xe9", env=CLEAN_ENV,
    )  # fmt: skip
    assert_clear_error(result, "stdin is not UTF-8")
