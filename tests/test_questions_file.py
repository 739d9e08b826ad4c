"""The questions file (docs/questions.md): every flag that reads it, and its errors said
one sentence per field instead of pydantic's dump."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentbranch.cli import app
from agentbranch.core.errors import InvalidQuestionError
from agentbranch.core.questions import validate_questions

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.mark.parametrize(
    ("question", "sentence"),
    [
        (
            {"type": "choice", "instructions": "Which team?"},
            "question 'team': a choice needs `criteria`, a mapping of option -> description",
        ),
        (
            {"type": "score", "instructions": "How bad?"},
            "question 'team': a score needs `criteria`, the list of levels, lowest first",
        ),
        ({"type": "noul"}, "question 'team': a noul (yes/no) needs `instructions`"),
        (
            {"type": "choice", "instructions": "Which?", "criteria": ["a", "b"]},
            "question 'team': `criteria` should be a valid dictionary (got ['a', 'b'])",
        ),
        (
            {"type": "noul", "question": "Urgent?", "instructions": "Urgent?"},
            "question 'team': unknown field `question`; a noul (yes/no) has `type`, "
            "`instructions`, `criteria`, `examples`",
        ),
        (
            {"type": "noul", "instructions": 5},
            "question 'team': `instructions` should be the question, as text (got 5)",
        ),
        (
            {"type": "noul", "instructions": "Urgent?", "criteria": {"yes": "now"}},
            "question 'team': unknown field `criteria.yes`; `criteria` holds "
            '{"true": what yes means, "false": what no means} (optional)',
        ),
    ],
)
def test_one_sentence_per_wrong_field(question, sentence):
    with pytest.raises(InvalidQuestionError) as info:
        validate_questions({"team": question})
    message = str(info.value)
    assert sentence in message
    for noise in ("errors.pydantic.dev", "input_value", "validation error for", "type="):
        assert noise not in message


def test_two_wrong_fields_two_sentences():
    with pytest.raises(InvalidQuestionError) as info:
        validate_questions({"team": {"type": "score", "question": "How bad?"}})
    lines = str(info.value).splitlines()
    assert len(lines) == 3, lines  # instructions and criteria missing, `question` unknown
    assert all(line.startswith("question 'team': ") for line in lines)


@pytest.mark.parametrize(
    "command",
    [
        ["decide", "The site is down"],
        ["calibrate"],
        ["size", "--gpu-gib", "80"],
        ["deploy", "kserve", "--gpu-gib", "80"],
    ],
)
def test_every_flag_that_reads_it_points_to_its_page(command, tmp_path: Path):
    path = [word for word in command if word.isalpha()][:2]  # the command, not its values
    help_text = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "300"}).output
    row = next(line for line in help_text.splitlines() if "--questions" in line)
    assert "docs/questions.md" in re.sub(r"\s+", " ", help_text[help_text.index(row) :])[:300]
    if command[0] in ("size", "deploy"):  # no model needed: the error is the sentence
        q = tmp_path / "q.json"
        q.write_text(json.dumps({"team": {"type": "choice", "instructions": "Which team?"}}))
        result = runner.invoke(app, [*command, "--questions", str(q)], env={"COLUMNS": "300"})
        assert result.exit_code == 2
        assert "question 'team': a choice needs `criteria`" in result.output
        assert "pydantic" not in result.output


def test_no_page_sends_readers_to_a_command_that_does_not_exist():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    commands = {"demo", "decide", "calibrate", "engine", "verify", "replay", "audit", "size"}
    commands.add("deploy")
    for page in pages:
        for used in re.findall(r"`agentbranch ([a-z][a-z-]*)", page.read_text("utf-8")):
            assert used in commands, f"{page.name} names `agentbranch {used}`, which is no command"
