"""Audit files: one schema, checked at load time, and clear errors (never an internal
exception) from ``load_records``, ``audit_report``, ``calibrate_from_audit`` and both
commands, for every kind of bad input found by probing them (issue 22)."""

from __future__ import annotations

import json
import math
import os
import random
import re
import threading

import pytest
from _audit_records import overconfident_records, record
from typer.testing import CliRunner

from agentbranch.audit import audit_report, calibrate_from_audit, load_records, scored_examples
from agentbranch.cli import app
from agentbranch.core.errors import ConfigurationError, InvalidFileError
from agentbranch.policy.auditing.worker import JsonlSink

GOOD = record(0.9, True)

#: (name, a record edited the way a careless user or a damaged file would, the field
#: the error must name).
BAD_RECORDS = [
    ("confidence 5", {**GOOD, "confidence": 5}, "confidence"),
    ("confidence NaN", {**GOOD, "confidence": float("nan")}, "confidence"),
    ("confidence a string", {**GOOD, "confidence": "0.9"}, "confidence"),
    ("confidence a list", {**GOOD, "confidence": [0.9]}, "confidence"),
    ("confidence a bool", {**GOOD, "confidence": True}, "confidence"),
    (
        "probabilities summing to 2",
        {**GOOD, "probabilities": {"billing": 1.0, "outage": 0.5, "bug": 0.5}},
        "probabilities",
    ),
    (
        "a negative probability",
        {**GOOD, "probabilities": {"billing": 1.1, "outage": -0.1, "bug": 0.0}},
        "probabilities.billing",
    ),
    (
        "a NaN probability",
        {**GOOD, "probabilities": {"billing": float("nan"), "outage": 0.5, "bug": 0.5}},
        "probabilities.billing",
    ),
    ("probabilities a list", {**GOOD, "probabilities": [0.9, 0.07, 0.03]}, "probabilities"),
    (
        "probabilities of other options",
        {**GOOD, "probabilities": {"billing": 0.9, "sales": 0.1}},
        "probabilities",
    ),
    ("rate 0", {**GOOD, "rate": 0}, "rate"),
    ("rate -1", {**GOOD, "rate": -1}, "rate"),
    ("rate 2", {**GOOD, "rate": 2}, "rate"),
    ("an audit without its rate", {k: v for k, v in GOOD.items() if k != "rate"}, "rate"),
    ("type bogus", {**GOOD, "type": "bogus"}, "type"),
    ("kind bogus", {**GOOD, "kind": "bogus"}, "kind"),
    ("question_id a list", {**GOOD, "question_id": ["team"]}, "question_id"),
    ("question_id empty", {**GOOD, "question_id": " "}, "question_id"),
    ("teacher_label a list", {**GOOD, "teacher_label": ["billing"]}, "teacher_label"),
    ("teacher_label not an option", {**GOOD, "teacher_label": "sales"}, "teacher_label"),
    ("engine_label an object", {**GOOD, "engine_label": {"a": 1}}, "engine_label"),
    ("options a string", {**GOOD, "options": "billing"}, "options"),
    ("options repeated", {**GOOD, "options": ["billing", "billing", "bug"]}, "options"),
    ("temperature 0", {**GOOD, "temperature": 0}, "temperature"),
    ("temperature a string", {**GOOD, "temperature": "x"}, "temperature"),
    ("take_at a string", {**GOOD, "take_at": "0.5"}, "take_at"),
    ("spec a string", {**GOOD, "spec": "x"}, "spec"),
    ("spec of another type", {**GOOD, "spec": {"type": "bogus"}}, "spec"),
    (
        "spec with other options",
        {**GOOD, "spec": {**GOOD["spec"], "criteria": {"a": None, "b": None}}},
        "spec",
    ),
    ("confidence that the probabilities do not give", {**GOOD, "confidence": 0.99}, "confidence"),
    ("missing fields", {"kind": "audit"}, "missing"),
]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Default outputs (reliability.png, calibration.json) land in a temporary folder."""
    monkeypatch.chdir(tmp_path)


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize(("name", "rec", "field"), BAD_RECORDS, ids=[b[0] for b in BAD_RECORDS])
def test_a_bad_record_is_refused_naming_the_file_the_line_and_the_field(tmp_path, name, rec, field):
    # allow_nan: write the NaN a careless writer would; the loader must refuse it too.
    path = _write(tmp_path / "audits.jsonl", [json.dumps(GOOD), json.dumps(rec, allow_nan=True)])
    for load in (load_records, lambda p: calibrate_from_audit(p, holdout=0.0)):
        with pytest.raises(InvalidFileError) as info:
            load(path)
        message = str(info.value)
        assert f"{path}:2" in message, message
        if "NaN" not in json.dumps(rec, allow_nan=True):
            assert field in message, message
    # In Python, the same record is refused by the report and the fit alike.
    for fn in (audit_report, scored_examples, calibrate_from_audit):
        with pytest.raises(ConfigurationError, match="audit record 2: ") as info:
            fn([GOOD, rec])
        assert field in str(info.value)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "holds no audit records"),
        (b"\n  \n\n", "holds no audit records"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested too deeply"),
        (b'{"kind": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "nested too deeply"),
        (json.dumps(GOOD).replace("billing", "bill\xe9ng", 1).encode("latin-1"), "not UTF-8"),
        (b"{oops\n", "not valid JSON"),
        (b"[1, 2]\n", "a JSON object"),
        (b'"a string"\n', "a JSON object"),
        (json.dumps(GOOD).replace('"confidence": ', '"confidence": Infinity, "x": ').encode(),
         "Infinity is not a JSON number"),
    ],
    ids=["empty", "blank", "deep array", "deep value", "latin-1", "broken", "a list", "a string",
         "Infinity"],
)  # fmt: skip
def test_unusable_files_are_clear_errors_from_the_report_and_the_fit(tmp_path, content, says):
    path = tmp_path / "audits.jsonl"
    path.write_bytes(content)
    for load in (load_records, calibrate_from_audit):
        with pytest.raises(InvalidFileError, match=says) as info:
            load(path)
        assert str(path) in str(info.value)


def test_an_empty_audit_file_writes_no_calibration_and_fails_the_command(tmp_path):
    path = tmp_path / "audits.jsonl"
    path.write_text("")
    out = tmp_path / "calibration.json"
    result = CliRunner().invoke(
        app,
        ["calibrate", "--from-audit", str(path), "--out", str(out)]
        + ["--diagram", str(tmp_path / "r.png")],
    )
    assert result.exit_code == 2 and "holds no audit records" in result.output
    assert not out.exists()
    result = CliRunner().invoke(app, ["audit", "report", "--details", str(path)])
    assert result.exit_code == 2 and "holds no audit records" in result.output


def test_paths_that_are_not_files_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "audits.fifo"
    os.mkfifo(fifo)
    # A thread: were the FIFO opened, the read would block until a writer came.
    outcome: list[BaseException] = []
    thread = threading.Thread(target=lambda: _capture(outcome, load_records, fifo), daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "load_records blocked on a FIFO"
    assert isinstance(outcome[0], InvalidFileError) and "not a regular file" in str(outcome[0])
    with pytest.raises(InvalidFileError, match="is a directory"):
        load_records(tmp_path)
    with pytest.raises(InvalidFileError, match="does not exist"):
        load_records(tmp_path / "nope.jsonl")
    link = tmp_path / "loop.jsonl"
    link.symlink_to(link)
    with pytest.raises(InvalidFileError, match="cannot be read"):
        load_records(link)


def _capture(outcome, fn, *args):
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - the test inspects it
        outcome.append(e)


def test_records_given_in_python_are_checked_too():
    with pytest.raises(ConfigurationError, match="audit record 1: .*a JSON object"):
        audit_report(["not a record"])
    with pytest.raises(ConfigurationError, match="a list of records"):
        audit_report(GOOD)  # one record, not a list
    with pytest.raises(ConfigurationError, match="no audit records"):
        calibrate_from_audit([])
    # Fields the schema does not name are kept as they are.
    assert load_records is not None and audit_report([{**GOOD, "extra": [1, {"a": 2}]}])


def test_records_the_sink_writes_load_back_and_nan_is_never_written(tmp_path):
    path = tmp_path / "audits.jsonl"
    sink = JsonlSink(path)
    sink.write(GOOD)
    with pytest.raises(ValueError):  # Audit.write logs and counts a failing sink
        sink.write({**GOOD, "entropy": math.nan})
    assert load_records(path) == [GOOD]


def test_a_fifo_sink_fails_instead_of_blocking(tmp_path):
    fifo = tmp_path / "audits.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    thread = threading.Thread(
        target=lambda: _capture(outcome, JsonlSink(fifo).write, GOOD), daemon=True
    )
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the sink blocked on a FIFO"
    assert isinstance(outcome[0], OSError)  # no reader: ENXIO at once (logged by Audit)


# -- the commands --------------------------------------------------------------------------


def _audits(tmp_path, n=200, seed=0):
    path = tmp_path / "audits.jsonl"
    _write(path, [json.dumps(r) for r in overconfident_records(n, seed=seed)])
    return path


@pytest.mark.parametrize(
    "lines",
    [
        [json.dumps({**GOOD, "question_id": ["team"]})],
        [json.dumps({**GOOD, "probabilities": [0.9, 0.1, 0.0]})],
        [json.dumps({**GOOD, "temperature": "x"})],
        ["[" * 100_000 + "]" * 100_000],
        [json.dumps({**GOOD, "confidence": float("nan")}, allow_nan=True)],
    ],
    ids=["list id", "list probabilities", "string temperature", "deep", "NaN"],
)
def test_both_commands_print_one_clear_error_and_no_traceback(tmp_path, lines):
    path = _write(tmp_path / "audits.jsonl", lines)
    out = tmp_path / "c.json"
    for args in (
        ["audit", "report", "--details", str(path)],
        ["calibrate", "--from-audit", str(path), "--out", str(out)]
        + ["--diagram", str(tmp_path / "r.png")],
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert isinstance(result.exception, SystemExit), result.exception
        assert result.output.startswith(f"error: {path}:1: "), result.output
        assert "Traceback" not in result.output and not out.exists()


def test_non_utf8_audit_file_is_a_clear_command_error(tmp_path):
    path = tmp_path / "audits.jsonl"
    path.write_bytes(json.dumps(GOOD).encode().replace(b"billing", b"bill\xe9ng", 1) + b"\n")
    result = CliRunner().invoke(app, ["audit", "report", "--details", str(path)])
    assert result.exit_code == 2 and f"{path}:1: not UTF-8" in result.output


@pytest.mark.parametrize("bins", ["0", "-3", "1001", "100000000"])
def test_audit_report_bins_are_bounded(tmp_path, bins):
    path = _audits(tmp_path, 50)
    result = CliRunner().invoke(app, ["audit", "report", "--details", str(path), "--bins", bins])
    assert result.exit_code == 2 and "--bins" in result.output
    assert "Invalid value for '--bins'" in result.output
    with pytest.raises(ConfigurationError, match="bins"):
        audit_report(load_records(path), bins=int(bins))


@pytest.mark.parametrize("where", ["missing/a.png", "dir"])
def test_audit_report_diagram_that_cannot_be_written_is_refused_first(tmp_path, where):
    (tmp_path / "dir").mkdir()
    path = _audits(tmp_path, 30)
    result = CliRunner().invoke(
        app, ["audit", "report", "--details", str(path), "--diagram", str(tmp_path / where)]
    )
    assert result.exit_code == 2 and result.output.startswith("error: --diagram")
    assert "Traceback" not in result.output


def test_audit_report_explains_more_audits(tmp_path):
    rng = random.Random(2)
    recs = [record(0.95, rng.random() < 0.95, rate=0.5) for _ in range(40)]
    path = _write(tmp_path / "audits.jsonl", [json.dumps(r) for r in recs])
    t = audit_report(recs).questions["team"].threshold
    assert t.more_audits  # a count to explain
    output = CliRunner().invoke(app, ["audit", "report", "--details", str(path)]).output
    values = " ".join(
        line.split("│")[2].strip() for line in output.splitlines() if line.count("│") == 3
    )
    # Not a bare "≈N to know X": what is counted, and what it would show.
    assert f"≈{t.more_audits:,} more labelled records (audits and fallback examples" in values
    assert f"would show that take_at {t.estimate:.3f} reaches 90%, if its precision" in values


def test_calibrate_table_keeps_every_row_on_one_line_when_piped(tmp_path):
    out = tmp_path / "c.json"
    result = CliRunner().invoke(
        app,
        ["calibrate", "--from-audit", str(_audits(tmp_path, 300)), "--out", str(out)]
        + ["--diagram", str(tmp_path / "r.png")],
    )
    assert result.exit_code == 0, result.output
    team = next(line for line in result.output.splitlines() if line.startswith("│ team"))
    # ECE and Brier before → after, whole, in the one line of the row (at 80 columns
    # rich split each pair over two lines).
    assert len(re.findall(r"\d\.\d{3} → \d\.\d{3}", team)) == 2, result.output
