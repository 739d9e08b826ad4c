"""``agentbranch decide --each``: many states in one process through the real CLI (the
embedded CPU reader), one record a line, bad lines reported without losing the others;
and the one-shot form saying where its time went."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentbranch.cli import app
from agentbranch.cli import decide as decide_cli
from agentbranch.engine.readers.embedded import EmbeddedReader

runner = CliRunner()
ENV = {
    "AGENTBRANCH_ENGINE": "",
    "AGENTBRANCH_VLLM_MODEL": "",
    "AGENTBRANCH_REMOTE_URL": "",
    "AGENTBRANCH_CALIBRATION": "",
    "COLUMNS": "200",
}
TEAM = ["--choice", "Which team?", "-o", "billing=Invoices, refunds, charges"]
TEAM += ["-o", "outage=The service is down"]


@pytest.fixture
def loads(monkeypatch):
    """How many times the embedded model was loaded."""
    count = []
    original = EmbeddedReader._load

    def counting(self):
        if self._model is None:  # a load that loads (it returns at once when loaded)
            count.append(1)
        return original(self)

    monkeypatch.setattr(EmbeddedReader, "_load", counting)
    return count


def test_every_line_gets_a_record_in_order_and_bad_lines_lose_nothing(tmp_path, loads):
    path = tmp_path / "states.jsonl"
    path.write_bytes(
        b"I was charged twice, please refund me\n"
        b'{"id": "T-2", "state": "The whole site is down, 503 everywhere"}\n'
        b"{not json\n"
        b"\n"
        b"\xff\xfe broken bytes\n"
        b'{"id": 5, "state": "\\ud800"}\n'
        b'{"text": "My invoice shows the wrong amount", "id": "T-7"}\n'
        b'{"plan": "pro", "message": "Nothing loads since this morning"}\n'
    )
    result = runner.invoke(app, ["decide", "--each", str(path), *TEAM], env=ENV)
    assert result.exit_code == 1, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["line"] for r in records] == [1, 2, 3, 5, 6, 7, 8]  # the blank line 4 skipped
    assert [r.get("id") for r in records] == [None, "T-2", None, None, 5, "T-7", None]
    errors = {r["line"]: r["error"] for r in records if "error" in r}
    assert set(errors) == {3, 5, 6}
    assert "not a JSON object" in errors[3]
    assert "not UTF-8" in errors[5]
    assert "unpaired surrogate" in errors[6]
    labels = {r["line"]: r["decisions"]["choice"]["label"] for r in records if "decisions" in r}
    assert labels == {1: "billing", 2: "outage", 7: "billing", 8: "outage"}
    assert "3 line(s) could not be decided" in result.stderr
    assert len(loads) == 1  # one engine, loaded once for every line


def test_the_records_equal_one_shot_decisions(tmp_path):
    states = ["I was charged twice, please refund me", "Nothing loads, the servers are down"]
    got = runner.invoke(
        app, ["decide", "--each", "-", *TEAM, "--batch-size", "1"], input="\n".join(states), env=ENV
    )
    assert got.exit_code == 0, got.output
    each = [json.loads(line)["decisions"]["choice"] for line in got.stdout.splitlines()]
    for state, record in zip(states, each, strict=True):
        one = runner.invoke(app, ["decide", state, *TEAM, "--json"], env=ENV)
        alone = json.loads(one.stdout)["choice"]
        assert alone["label"] == record["label"]
        assert alone["probabilities"] == pytest.approx(record["probabilities"], abs=1e-6)


def test_timings_say_where_the_time_went(monkeypatch):
    asked = runner.invoke(app, ["decide", "The site is down", *TEAM, "--timings"], env=ENV)
    assert asked.exit_code == 0, asked.output
    assert "loading the model" in asked.stderr and "deciding 1 state(s)" in asked.stderr
    monkeypatch.setattr(decide_cli, "SLOW_S", 1e9)
    quiet = runner.invoke(app, ["decide", "The site is down", *TEAM], env=ENV)
    assert quiet.exit_code == 0 and "loading the model" not in quiet.stderr
    monkeypatch.setattr(decide_cli, "SLOW_S", 0.0)  # every call is "slow": said unasked
    slow = runner.invoke(app, ["decide", "The site is down", *TEAM], env=ENV)
    assert slow.exit_code == 0 and "loading the model" in slow.stderr
    assert "use --each FILE" in slow.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["a state", "--each", "-"], "not both"),
        ([], "STATE"),
        (["--each", "/no/such/file.jsonl"], "No such file"),
    ],
)
def test_state_or_each(args, says):
    result = runner.invoke(app, ["decide", *args, *TEAM], env=ENV)
    assert result.exit_code == 2
    assert says in result.output
