"""``agentbranch verify``: PASS 0 / BLOCK 1 / INCONCLUSIVE 2 / ERROR 3 on labelled files
built for each, through the real CLI, with bounds equal to scipy's exact intervals.

The reads come from a replay cassette recorded here with a scripted reader (the engine
answers ``said`` with probability ``p``, both written in the state), and the CLI replays
it with ``CI`` set, as a CI job would; one test reads with the embedded CPU reader."""

from __future__ import annotations

import json
import math

import pytest
from _earned_fixtures import URGENT, Oracle, scripted, state
from scipy.stats import binomtest
from typer.testing import CliRunner

import agentbranch as ab
from agentbranch.audit import Verification, assert_verified, verify
from agentbranch.audit.verdict import clopper_pearson
from agentbranch.cli import app
from agentbranch.policy import Earned, Generate, Policy
from agentbranch.policy.resolving import Resolver
from agentbranch.replay import Cassette

runner = CliRunner()
ENV = {
    "CI": "true",  # replay only: a miss is an error, nothing is read live
    "AGENTBRANCH_ENGINE": "",
    "AGENTBRANCH_CALIBRATION": "",
    "AGENTBRANCH_REMOTE_URL": "",
    "AGENTBRANCH_VLLM_MODEL": "",
    "COLUMNS": "200",
}
HEADER = {"questions": {"urgent": {"type": "noul", "instructions": URGENT.instructions}}}


def labelled(path, rows):
    """A labelled file: ``rows`` are (said, p, truth); the label is the truth."""
    lines = [json.dumps(HEADER)]
    for i, (said, p, truth) in enumerate(rows):
        lines.append(json.dumps({"state": state(i, said, p, truth), "label": truth}))
    lines_text = "\n".join(lines) + "\n"
    path.write_text(lines_text.replace('"label"', '"question": "urgent", "label"'))
    return path


def record(path, cassette):
    """Read every line of ``path`` once through ``cassette`` (recording it)."""
    box = Cassette(cassette, "new")
    engine = ab.DecisionEngine(box.reader(ab.ScriptedReader({"urgent": scripted})))
    verify(engine, path, take_at=0.5, precision=0.5, coverage=0.5)
    box.close()


# 150 sure and right, 10 unsure: precision 150/150, coverage 150/160.
PASSING = [("yes", 0.99, "yes")] * 150 + [("yes", 0.55, "no")] * 10
# 150 sure, 60 of them wrong: precision 0.6.
BLOCKING = [("yes", 0.99, "yes")] * 90 + [("yes", 0.99, "no")] * 60 + [("no", 0.6, "no")] * 10
# 12 sure and right: too few to show 0.9.
UNSURE = [("yes", 0.99, "yes")] * 12 + [("no", 0.55, "no")] * 2


@pytest.fixture
def files(tmp_path):
    out = {}
    for name, rows in (("pass", PASSING), ("block", BLOCKING), ("inconclusive", UNSURE)):
        path = labelled(tmp_path / f"{name}.jsonl", rows)
        record(path, tmp_path / f"{name}.cassette.jsonl")
        out[name] = (path, tmp_path / f"{name}.cassette.jsonl")
    return out


def run(*args):
    return runner.invoke(app, ["verify", *map(str, args)], env=ENV)


def verdict(path, cassette, *extra):
    args = [path, "--cassette", cassette, "--precision", 0.9, "--coverage", 0.5, "--json"]
    return run(*args, "--take-at", 0.9, *extra)


@pytest.mark.parametrize(
    ("name", "code", "word", "taken", "right", "n"),
    [
        ("pass", 0, "PASS", 150, 150, 160),
        ("block", 1, "BLOCK", 150, 90, 160),
        ("inconclusive", 2, "INCONCLUSIVE", 12, 12, 14),
    ],
)
def test_each_verdict_has_its_exit_code_and_scipy_exact_bounds(
    files, name, code, word, taken, right, n
):
    result = verdict(*files[name])
    assert result.exit_code == code, result.output
    out = json.loads(result.stdout)
    assert out["verdict"] == word and out["exit_code"] == code
    assert (out["decisions"], out["taken"], out["right"]) == (n, taken, right)
    assert out["precision"]["target"] == 0.9 and out["coverage"]["target"] == 0.5
    assert out["level"] == 0.95 and out["bound_level"] == pytest.approx(0.975)
    for key, k, of in (("precision", right, taken), ("coverage", taken, n)):
        ci = binomtest(k, of).proportion_ci(confidence_level=0.95, method="exact")
        assert abs(out[key]["lower"] - ci.low) < 1e-12
        assert abs(out[key]["upper"] - ci.high) < 1e-12
        assert (out[key]["k"], out[key]["n"]) == (k, of)
    assert out["risk"]["upper"] == pytest.approx(1 - out["precision"]["lower"])
    assert out["questions"]["urgent"] == {
        "take_at": 0.9,
        "decisions": n,
        "taken": taken,
        "right": right,
    }


def test_the_table_says_the_verdict_and_the_bounds(files):
    path, cassette = files["block"]
    result = run(
        path, "--cassette", cassette, "--precision", 0.9, "--coverage", 0.5, "--take-at", 0.9
    )
    assert result.exit_code == 1
    assert result.stdout.startswith("BLOCK: 160 decisions, 150 taken, 90 of them right")
    assert "target 0.9" in result.stdout and "one-sided at 0.975" in result.stdout


def test_coverage_alone_can_block_and_pass(files):
    path, cassette = files["pass"]  # coverage 150/160
    assert verdict(path, cassette, "--take-at", 0.999).exit_code == 1  # nothing taken
    high = run(
        path, "--cassette", cassette, "--precision", 0.9, "--coverage", 0.99, "--take-at", 0.9
    )
    assert high.exit_code == 1  # 150/160: upper bound below 0.99
    # A lower level needs less: the 12 of UNSURE pass at level 0.4 (lower bound 0.3 ** (1/12) = 0.905).
    path, cassette = files["inconclusive"]
    assert verdict(path, cassette, "--level", 0.4).exit_code == 0


def test_the_thresholds_an_evidence_store_holds_now(files, tmp_path):
    store = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0, store=str(store))
    engine = ab.DecisionEngine(ab.ScriptedReader({"urgent": scripted}))
    r = Resolver(engine, {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())]))
    for i in range(30):
        r.resolve(state(i, "yes", 0.99, "yes"))
    take_at = ab.audit.earned_report(store).questions.popitem()[1].take_at
    assert take_at is not None and take_at <= 0.99
    path, cassette = files["pass"]
    result = run(
        path,
        "--cassette",
        cassette,
        "--store",
        store,
        "--precision",
        0.9,
        "--coverage",
        0.5,
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["questions"]["urgent"]["take_at"] == take_at
    # A store without the question the file asks: an error, never a verdict.
    other = tmp_path / "other.jsonl"
    labelled(other, PASSING)
    other.write_text(other.read_text().replace("urgent", "angry"))
    result = run(other, "--store", store, "--precision", 0.9, "--coverage", 0.5)
    assert result.exit_code == 3
    assert "no threshold for question(s) ['angry']" in result.stderr


def test_a_store_whose_question_decides_with_a_learned_version_is_refused(
    files, tmp_path, monkeypatch
):
    """The store's threshold of a question a learned version decides is that version's
    read's; verify reads the question as written, so it refuses (ERROR, exit 3) and says
    to give --take-at, never a verdict on the wrong scale. (The report is stood in for:
    what is under test is what verify does with a learned version in force.)"""
    import importlib
    from types import SimpleNamespace

    earned_report = importlib.import_module("agentbranch.audit.earned_report")
    learned = SimpleNamespace(question_id="urgent", in_force=2)
    report = SimpleNamespace(learning={"k": learned}, questions={})
    monkeypatch.setattr(earned_report, "earned_report", lambda store: report)
    store = tmp_path / "evidence.jsonl"
    store.write_text("")
    path, cassette = files["pass"]
    args = ("--cassette", cassette, "--store", store, "--precision", 0.9, "--coverage", 0.5)
    result = run(path, *args)
    assert result.exit_code == 3, result.output
    assert "decides with learned version 2 of its read" in result.stderr
    assert "--take-at" in result.stderr
    learned.in_force = 0  # the question as written decides: no refusal, no threshold
    result = run(path, *args)
    assert "learned version" not in result.stderr


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda p: p.unlink(), "does not exist"),
        (lambda p: p.write_text(p.read_text() + "{not json\n"), ":162"),
        (lambda p: p.write_text(json.dumps(HEADER) + "\n"), "no labelled examples"),
        (
            lambda p: p.write_text(p.read_text().replace('"label": "no"', '"label": "maybe"')),
            "'maybe' is not an option",
        ),
        (
            lambda p: p.write_text(p.read_text().replace('"question": "urgent", ', "")),
            "a label without a question",
        ),
    ],
)
def test_bad_files_are_errors_with_exit_3(files, change, says):
    path, cassette = files["pass"]
    change(path)
    result = verdict(path, cassette)
    assert result.exit_code == 3, result.output
    assert says in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--precision", "0.9", "--coverage", "0.5"], "--take-at X or --store PATH"),
        (["--precision", "0.9", "--coverage", "0.5", "--take-at", "0.5", "--store", "s"], "one"),
        (["--precision", "0.9", "--coverage", "0.5", "--take-at", "abc"], "--take-at"),
        (["--precision", "0.9", "--take-at", "0.5"], "--coverage"),
        (["--precision", "0.9", "--coverage", "0.5", "--take-at", "0.5", "--bogus"], "--bogus"),
        (["--precision", "1.5", "--coverage", "0.5", "--take-at", "0.5"], "precision must be"),
        (["--precision", "0.9", "--coverage", "0.5", "--take-at", "0.5", "--level", "1"], "level"),
        (["--precision", "0.9", "--coverage", "0.5", "--take-at", "2"], "take_at"),
        (["--precision", "0.9", "--coverage", "0.5", "--take-at", "0.5", "--record", "x"], "none"),
    ],
)
def test_bad_flags_exit_3_not_2_which_is_inconclusive(files, args, says):
    path, cassette = files["pass"]
    result = run(path, "--cassette", cassette, *args)
    assert result.exit_code == 3, result.output
    assert says in result.output


def test_a_read_the_cassette_lacks_is_an_error_in_ci(files, tmp_path):
    path, _ = files["pass"]
    _, other = files["inconclusive"]
    result = verdict(path, other)
    assert result.exit_code == 3
    assert "has no read for this request" in result.stderr
    assert verdict(path, tmp_path / "absent.jsonl").exit_code == 3


def test_pytest_form(files):
    path, cassette = files["inconclusive"]
    engine = ab.DecisionEngine(Cassette(cassette, "none").reader())
    result = verify(engine, path, take_at=0.9, precision=0.9, coverage=0.5)
    assert isinstance(result, Verification) and result.verdict == "INCONCLUSIVE"
    with pytest.raises(AssertionError, match=r"(?s)INCONCLUSIVE: 14 decisions.*target 0\.9"):
        assert_verified(result)
    passed = assert_verified(
        engine=engine, examples=path, take_at=0.9, precision=0.9, coverage=0.5, level=0.4
    )
    assert passed.verdict == "PASS" and passed.exit_code == 0


def test_clopper_pearson_edges():
    assert clopper_pearson(0, 0, 0.95).lower == 0.0 and clopper_pearson(0, 0, 0.95).upper == 1.0
    assert math.isnan(clopper_pearson(0, 0, 0.95).estimate)
    for k, n in ((0, 7), (7, 7), (3, 7), (1, 1000)):
        ci = binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
        b = clopper_pearson(k, n, 0.9)
        assert abs(b.lower - ci.low) < 1e-12 and abs(b.upper - ci.high) < 1e-12


def test_on_the_embedded_reader(tmp_path):
    team = {
        "type": "choice",
        "instructions": "Which team should handle this ticket?",
        "criteria": {"billing": "Invoices, refunds, charges", "outage": "The service is down"},
    }
    tickets = [
        ("I was charged twice, please refund me", "billing"),
        ("The whole site is down, 503 everywhere", "outage"),
        ("My invoice shows the wrong amount", "billing"),
        ("Nothing loads, your servers are down", "outage"),
    ]
    path = tmp_path / "teams.jsonl"
    path.write_text(
        json.dumps({"questions": {"team": team}})
        + "\n"
        + "".join(
            json.dumps({"text": t, "question": "team", "label": lab}) + "\n" for t, lab in tickets
        )
    )
    env = {k: v for k, v in ENV.items() if k != "CI"}
    result = runner.invoke(
        app,
        ["verify", str(path), "--take-at", "0", "--precision", "0.5", "--coverage", "1", "--json"],
        env=env,
    )
    assert result.exit_code in (0, 1, 2), result.output
    out = json.loads(result.stdout)
    engine = ab.DecisionEngine.from_env({})
    labels = [engine.decide(t, {"team": team})["team"].label for t, _ in tickets]
    assert out["taken"] == 4  # take_at 0 takes every decision
    assert out["right"] == sum(got == want for got, (_, want) in zip(labels, tickets))


def test_an_unexpected_failure_is_an_error_not_a_block(files, monkeypatch):
    import agentbranch.audit.verdict as verdict_module

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(verdict_module, "verify", broken)
    path, cassette = files["pass"]
    result = verdict(path, cassette)
    assert result.exit_code == 3
    assert "RuntimeError: a bug" in result.stderr


def test_an_engine_the_environment_cannot_build_is_an_error_not_inconclusive(tmp_path):
    # load_engine's own exit status is 2, which verify would print as INCONCLUSIVE.
    path = labelled(tmp_path / "labelled.jsonl", PASSING)
    args = [str(path), "--take-at", "0.9", "--precision", "0.9", "--coverage", "0.5"]
    env = {**ENV, "AGENTBRANCH_ENGINE": "nonsense"}
    result = runner.invoke(app, ["verify", *args], env=env)
    assert result.exit_code == 3, result.output
    assert "AGENTBRANCH_ENGINE='nonsense' is not an engine" in result.stderr
