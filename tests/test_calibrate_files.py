"""Labelled files and calibration files: every line checked against its schema, errors
that name the file, the line and the field, never an internal exception (issue 22);
and a fit that makes the evaluation split worse is said out loud."""

from __future__ import annotations

import json
import logging
import os
import threading

import pytest

import agentbranch as ab
from agentbranch import calibration as cal
from agentbranch.calibration import Scored
from agentbranch.core.errors import (
    AgentBranchError,
    ConfigurationError,
    InvalidFileError,
    InvalidQuestionError,
)

TEAM = {"type": "choice", "instructions": "Which team?", "criteria": {"a": None, "b": None}}
HEADER = json.dumps({"questions": {"team": TEAM}})


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ({"state": "x", "labels": ["team"]}, "labels: Input should be a valid dictionary"),
        ({"state": "x", "labels": {"team": None}}, "labels.team: a label is an option name"),
        ({"state": "x", "question": ["team"], "label": "a"}, "question: a question is an id"),
        ({"state": "x", "question": "team", "label": ["a"]}, "label: a label is an option name"),
        ({"state": "x", "question": "team", "label": {"a": 1}}, "label: a label is an option"),
        ({"state": "x", "question": "team", "label": 1.5}, "label: a label is an option name"),
        ({"state": "x", "question": "team", "label": "²"}, "label '²' is not an option"),
        ({"state": "x", "question": {"id": ["q"], "type": "noul"}, "label": "yes"},
         "an inline question needs an 'id'"),
        ({"questions": ["team"]}, "questions: Input should be a valid dictionary"),
        ({"questions": {"q": "str"}}, "questions.q: Input should be a valid dictionary"),
    ],
    ids=["labels list", "labels null", "question list", "label list", "label object",
         "label float", "label unicode digit", "inline id list", "header list",
         "header value"],
)  # fmt: skip
def test_labelled_lines_of_the_wrong_shape_name_the_line_and_the_field(tmp_path, line, says):
    path = tmp_path / "labelled.jsonl"
    path.write_text(HEADER + "\n" + json.dumps(line) + "\n")
    with pytest.raises(AgentBranchError, match="labelled.jsonl:2: ") as info:
        cal.load_labelled(path)
    assert says in str(info.value)
    with pytest.raises(AgentBranchError, match="<data>:2: "):
        cal.parse_labelled([HEADER, json.dumps(line)])


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "labelled.jsonl:1: JSON nested too deeply"),
        (
            b'{"state": "caf\xe9", "question": "team", "label": "a"}\n',
            "labelled.jsonl:1: not UTF-8",
        ),
        (b'{"state": NaN, "question": "team", "label": "a"}\n', "NaN is not a JSON number"),
    ],
    ids=["deep", "latin-1", "NaN"],
)
def test_labelled_files_that_cannot_be_read_are_clear_errors(tmp_path, content, says):
    path = tmp_path / "labelled.jsonl"
    path.write_bytes(content)
    with pytest.raises(ConfigurationError, match=says):
        cal.load_labelled(path, {"team": TEAM})


def test_labelled_paths_that_are_not_files(tmp_path):
    with pytest.raises(InvalidFileError, match="labelled file .* does not exist"):
        cal.load_labelled(tmp_path / "nope.jsonl")
    with pytest.raises(InvalidFileError, match="is a directory"):
        cal.load_labelled(tmp_path)
    fifo = tmp_path / "labelled.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load():
        try:
            cal.load_labelled(fifo)
        except BaseException as e:  # noqa: BLE001 - inspected below
            outcome.append(e)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "load_labelled blocked on a FIFO"
    assert isinstance(outcome[0], InvalidFileError) and "not a regular file" in str(outcome[0])


def test_a_bad_header_question_names_its_line():
    with pytest.raises(InvalidQuestionError, match="<data>:1: question 'team'"):
        cal.parse_labelled([json.dumps({"questions": {"team": {"type": "bogus"}}})])


# -- calibration files --------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"version": 1, "temperatures": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}",
    ],
    ids=["deep", "deep field"],
)
def test_deeply_nested_calibration_files_are_clear_errors(tmp_path, content):
    path = tmp_path / "calibration.json"
    path.write_text(content)
    with pytest.raises(InvalidFileError, match="nested too deeply"):
        ab.Calibration.load(path)


def test_a_calibration_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "calibration.json"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def load():
        try:
            ab.Calibration.load(fifo)
        except BaseException as e:  # noqa: BLE001
            outcome.append(e)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "Calibration.load blocked on a FIFO"
    assert isinstance(outcome[0], InvalidFileError) and "not a regular file" in str(outcome[0])


def test_saving_a_calibration_where_it_cannot_go_is_a_clear_error(tmp_path):
    calibration = ab.Calibration(temperatures={"team": 2.0})
    with pytest.raises(InvalidFileError, match="folder .* does not exist"):
        calibration.save(tmp_path / "missing" / "c.json")
    with pytest.raises(InvalidFileError, match="is a directory"):
        calibration.save(tmp_path)
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "c.json"
    link.symlink_to(real)
    calibration.save(link)
    assert link.is_symlink() and ab.Calibration.load(real).temperatures == {"team": 2.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json", "real.json"]  # no temp


# -- fit settings and worse fits -------------------------------------------------------------


def _scored(n: int, top: float, agree_every: int, qid: str = "q") -> list[Scored]:
    return [
        Scored(qid, "noul", ("yes", "no"), (top, 1 - top), 0 if i % agree_every else 1)
        for i in range(n)
    ]


def test_a_fit_that_makes_the_evaluation_split_worse_is_logged_and_flagged(caplog):
    # Fitted where the reader is right 3 times in 4 at 0.9; evaluated where it always is:
    # the fit flattens reads that were right to be sharp.
    fit_set, eval_set = _scored(40, 0.9, 4), _scored(40, 0.9, 10_000)
    with caplog.at_level(logging.WARNING, logger="agentbranch.calibration"):
        report = cal.calibrate_scored(fit_set, eval_set)
    assert report.worse and report.as_dict()["worse"] is True
    assert report.after.ece > report.before.ece and report.after.brier > report.before.brier
    (message,) = [r.getMessage() for r in caplog.records]
    assert "the fit makes the held-out examples worse" in message
    assert "collect more labelled examples or audits" in message
    assert report.warnings[-1] in message
    better = cal.calibrate_scored(fit_set, _scored(40, 0.9, 4))
    assert not better.worse and not any("worse" in w for w in better.warnings)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"target_precision": float("nan")}, "target_precision"),
        ({"target_precision": 0.0}, "target_precision"),
        ({"target_precision": 5}, "target_precision"),
        ({"min_examples": 0}, "min_examples"),
    ],
)
def test_fit_settings_are_checked(kwargs, says):
    with pytest.raises(ConfigurationError, match=says):
        cal.calibrate_scored(_scored(20, 0.9, 4), **kwargs)


def test_a_fit_split_left_empty_is_a_clear_error():
    with pytest.raises(ConfigurationError, match="lower the holdout"):
        cal.calibrate_scored([], _scored(10, 0.9, 4))


def test_reliability_diagram_bins_are_bounded(tmp_path):
    with pytest.raises(ConfigurationError, match="bins"):
        cal.reliability_diagram(_scored(5, 0.9, 2), None, tmp_path / "r.png", bins=100_000_000)
