"""The `agentbranch` CLI: demo, decide, calibrate, engine (embedded reader, offline)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import agentbranch as ab
from agentbranch.cli import app
from agentbranch.cli.demo import load_tickets

runner = CliRunner()
CLEAN_ENV = {
    "AGENTBRANCH_ENGINE": "",
    "AGENTBRANCH_VLLM_MODEL": "",
    "AGENTBRANCH_REMOTE_URL": "",
    "AGENTBRANCH_CALIBRATION": "",
    "COLUMNS": "220",
}


def invoke(*args: str):
    result = runner.invoke(app, list(args), env=CLEAN_ENV)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_shipped_tickets():
    tickets = load_tickets()
    assert 20 <= len(tickets) <= 40
    assert all(t["ticket"] and t["id"] for t in tickets)


def test_engine_command_says_which_and_why():
    out = invoke("engine").output
    assert "embedded" in out and "AGENTBRANCH_REMOTE_URL is not set" in out


def test_demo_runs_on_cpu_and_shows_fallbacks():
    out = invoke("demo", "--each").output
    assert "support triage" in out
    for column in ("probabilities", "entropy", "band", "conf"):
        assert column in out
    assert "outage" in out and "billing" in out
    assert "fallback" in out and "human_triage" in out  # ambiguous tickets fall back
    assert "26 tickets" in out


def test_demo_json_lines(tmp_path):
    tickets = tmp_path / "t.jsonl"
    tickets.write_text(
        json.dumps({"id": "X-1", "ticket": "The whole site is down, 503 everywhere!"}) + "\n"
    )
    out = invoke("demo", "--tickets", str(tickets), "--json").stdout
    row = json.loads(out.strip().splitlines()[-1])
    assert row["id"] == "X-1" and row["team"] == "outage" and row["queue"] == "outage"
    assert row["decisions"]["team"]["decided_by"] == "engine"


def test_decide_one_off():
    out = invoke(
        "decide",
        "I was charged twice, please refund me",
        "--choice",
        "Which team?",
        "-o",
        "billing=Invoices, refunds, charges",
        "-o",
        "outage=The service is down",
        "--json",
    ).stdout  # (a call over SLOW_S, as on a loaded machine, says so on stderr)
    rec = json.loads(out)["choice"]
    assert rec["label"] == "billing" and rec["reader"] == "embedded"


def test_decide_needs_a_question():
    result = runner.invoke(app, ["decide", "hello"], env=CLEAN_ENV)
    assert result.exit_code != 0


def test_calibrate_writes_calibration_diagram_and_report(tmp_path):
    labelled = Path(ab.__file__).parent / "demo" / "labelled_tickets.jsonl"
    out, png = tmp_path / "cal.json", tmp_path / "rel.png"
    result = invoke("calibrate", str(labelled), "--out", str(out), "--diagram", str(png), "--json")
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["held_out"] and report["after"]["ece"] < report["before"]["ece"]
    saved = ab.Calibration.load(out)
    assert set(saved.temperatures) == {"team", "urgent", "frustration"}
    assert png.read_bytes()[:4] == b"\x89PNG"
    table = invoke("calibrate", str(labelled), "--out", str(out), "--diagram", str(png)).output
    assert "ECE before→after" in table and "suggested take thresholds" in table


def _text_label_file(tmp_path):
    """Lines as most labelled sets come: text + label, the question named separately."""
    questions = tmp_path / "questions.json"
    questions.write_text(
        json.dumps(
            {
                "team": {
                    "type": "choice",
                    "instructions": "Which team?",
                    "criteria": {"billing": "Invoices, refunds, charges", "outage": "Site down"},
                },
                "urgent": {"type": "noul", "instructions": "Is this urgent?"},
            }
        )
    )
    rows = [
        ("I was charged twice, refund me", "billing"),
        ("Where is my invoice for March?", "billing"),
        ("The site is down for everyone", "outage"),
        ("Every page returns 503", "outage"),
    ]
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("\n".join(json.dumps({"text": t, "label": lab}) for t, lab in rows))
    return questions, labelled


def test_calibrate_reads_text_label_lines_and_evaluates_a_saved_calibration(tmp_path):
    questions, labelled = _text_label_file(tmp_path)
    out = tmp_path / "cal.json"
    common = ["--questions", str(questions), "--question", "team", "--reader", "embedded"]
    fit_args = ["--holdout", "0", "--out", str(out), "--diagram", str(tmp_path / "f.png")]
    invoke("calibrate", str(labelled), *common, *fit_args, "--json")
    assert "choice" in ab.Calibration.load(out).by_type
    before = out.read_text()
    result = invoke(
        "calibrate",
        str(labelled),
        *common,
        "--evaluate",
        str(out),
        "--diagram",
        str(tmp_path / "e.png"),
        "--json",
    )
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert report["n_fit"] == 0 and report["n_eval"] == 4
    assert out.read_text() == before  # evaluate-only: nothing fitted or saved


def test_calibrate_warns_when_a_question_has_no_signal(tmp_path):
    questions, _ = _text_label_file(tmp_path)
    labelled = tmp_path / "urgent.jsonl"
    labelled.write_text(
        "\n".join(
            json.dumps({"text": t, "label": lab})
            for t, lab in [("Prod is down!", "yes"), ("Thanks, no rush", "no")] * 2
        )
    )
    result = runner.invoke(
        app,
        [
            *("calibrate", str(labelled), "--questions", str(questions)),
            *("--question", "urgent", "--holdout", "0", "--min-examples", "2"),
            *("--out", str(tmp_path / "c.json"), "--diagram", str(tmp_path / "d.png")),
        ],
        env=CLEAN_ENV,
    )
    assert result.exit_code == 0, result.output
    assert "no signal for question 'urgent'" in " ".join(result.stderr.split())


def test_calibrate_says_which_shapes_it_expects(tmp_path):
    questions, labelled = _text_label_file(tmp_path)
    result = runner.invoke(
        app, ["calibrate", str(labelled), "--questions", str(questions)], env=CLEAN_ENV
    )
    assert result.exit_code == 2
    assert "--question ID" in " ".join(result.output.split())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"sentence": "hi", "intent": "greet"}))
    result = runner.invoke(app, ["calibrate", str(bad)], env=CLEAN_ENV)
    assert result.exit_code == 2 and "expected JSON Lines" in " ".join(result.output.split())


def test_decide_takes_examples_and_reads_them():
    out = invoke(
        "decide",
        "Click here for cheap watches and pills!",
        "--yes-no",
        "Is this spam?",
        *("-e", "yes=BUY CHEAP WATCHES NOW", "-e", "yes=Cheap pills online, click here"),
        *("-e", "no=The quarterly report is attached", "-e", "no=Meeting moved to 3pm"),
        "--json",
    ).stdout
    assert json.loads(out)["yes_no"]["label"] == "yes"


def test_decide_rejects_examples_that_name_no_answer():
    result = runner.invoke(
        app, ["decide", "hi", "--yes-no", "Spam?", "-e", "maybe=hello"], env=CLEAN_ENV
    )
    assert result.exit_code != 0 and "ANSWER=TEXT" in " ".join(result.output.split())
