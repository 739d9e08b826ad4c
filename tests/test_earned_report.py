"""The earned-trust report (``agentbranch.audit.earned_report``, ``agentbranch audit
report``) on evidence written by a real ``Earned`` policy run."""

from __future__ import annotations

import json
import math

import pytest
from _earned_fixtures import URGENT, Oracle, engine, state
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

import agentbranch as ab
from agentbranch.audit.earned_render import earned_diagram
from agentbranch.audit.earned_report import earned_report
from agentbranch.audit.earned_sources import is_evidence_file
from agentbranch.cli import app
from agentbranch.core.errors import ConfigurationError
from agentbranch.policy import Earned, Generate, Policy
from agentbranch.policy.resolving import Resolver

runner = CliRunner()


def _drifting_run(store, *, audit_sink=None):
    """20 labels to learn, 30 confident right answers (audited at rate 0.5), then the
    truth turns until the band is withdrawn, then 10 more."""
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0, store=store)
    audit = ab.Audit(rate=0.5, seed=1, sink=audit_sink)
    r = Resolver(
        engine(),
        {"urgent": URGENT},
        Policy(take_at=earned, fallbacks=[Generate(Oracle())], audit=audit),
    )
    records = []
    for i in range(50):
        records.append(r.resolve(state(i, "yes", 0.99, "yes"))["urgent"])
        audit.flush()
    for i in range(50, 200):
        records.append(r.resolve(state(i, "yes", 0.99, "no"))["urgent"])
        audit.flush()
        if records[-1]["trust"] == "withdrawn":
            break
    for i in range(200, 210):
        records.append(r.resolve(state(i, "yes", 0.99, "no"))["urgent"])
    audit.flush()
    audit.close()
    return earned, records


@pytest.fixture(scope="module")
def evidence_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("earned")
    path = d / "evidence.jsonl"
    earned, records = _drifting_run(str(path), audit_sink=str(d / "audits.jsonl"))
    return path, d / "audits.jsonl", earned, records


def test_report_shows_threshold_over_time_coverage_precision_and_drift(evidence_file):
    path, _, earned, records = evidence_file
    rep = earned_report(path, precision=0.8, level=0.95)
    (q,) = rep.questions.values()
    assert q.question_id == "urgent" and q.reader == "scripted"
    assert q.labels == sum(1 for _ in path.open())
    assert q.labels_to_open == 20  # the first look, at min_evidence
    kinds = [e.kind for e in q.events]
    assert kinds[:2] == ["opened", "withdrawn"]
    opened, withdrawn = q.events[0], q.events[1]
    assert opened.take_at is not None and opened.labels == 20
    assert withdrawn.take_at is None and withdrawn.was == opened.take_at
    assert "audited takes agreed with the teacher" in withdrawn.reason
    # The thresholds the records carry, in order: None, then earned, then withdrawn.
    in_force = [rec["take_at"] for rec in records]
    assert {p.take_at for p in q.timeline} <= set(in_force)
    assert q.take_at is None and q.trust == "withdrawn"
    # Each audited take stands for 1/rate = 2 decisions; every fallback label for one.
    taken = sum(rec["decided_by"] == "engine" for rec in records)
    assert 0 < q.coverage < 1
    assert q.decisions == pytest.approx(len(records), rel=0.35)
    assert q.coverage == pytest.approx(taken / len(records), abs=0.2)
    # The band was withdrawn: no audited takes since it (last) opened... it did not reopen
    assert q.take_band.n > 0 and q.take_band.precision < 0.8
    assert q.take_band.lower <= q.take_band.precision
    assert q.take_band.drift_evalue >= 1 / 0.05  # what withdrew it
    # Same report from the Earned object itself and from its records (the Earned also
    # knows whether its audits arrive: the file cannot say)
    live, from_file = earned_report(earned, precision=0.8).as_dict(), rep.as_dict()
    (q_live,) = live["questions"].values()
    assert q_live.pop("suspended") is False
    (q_file,) = from_file["questions"].values()
    assert q_file.pop("suspended") is None
    # ... and how many labels its process lost (the file cannot know what never reached it)
    assert live.pop("labels_lost") == 0 and "labels_lost" not in from_file
    assert live == from_file


def test_report_from_a_langgraph_store():
    store = InMemoryStore()
    earned, records = _drifting_run(store)
    rep = earned_report(store, precision=0.8)
    (q,) = rep.questions.values()
    assert [e.kind for e in q.events][:2] == ["opened", "withdrawn"]
    assert json.dumps(rep.as_dict())  # JSON-safe


def test_report_from_audit_records_of_an_earned_policy(evidence_file):
    _, audits, _, _ = evidence_file
    rows = [json.loads(line) for line in audits.open()]
    assert all("trust" in r and "take_at" in r for r in rows)
    rep = earned_report(rows, precision=0.8)
    (q,) = rep.questions.values()
    assert q.question_id == "urgent"
    assert "withdrawn" in [e.kind for e in q.events]


def test_a_band_never_audited_has_unknown_coverage(tmp_path):
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0, store=str(tmp_path / "e.jsonl"))
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    )
    for i in range(30):  # 20 to open, then 10 taken: nothing records those
        r.resolve(state(i, "yes", 0.99, "yes"))
    # Unsure decisions still go to the fallback: their records say the band is open.
    assert r.resolve(state(30, "yes", 0.55, "yes"))["urgent"]["band"] == "fallback"
    (q,) = earned_report(tmp_path / "e.jsonl", precision=0.8).questions.values()
    assert q.take_at is not None and math.isnan(q.coverage)


def test_diagram_is_written(evidence_file, tmp_path):
    path, *_ = evidence_file
    out = earned_diagram(earned_report(path, precision=0.8), tmp_path / "trust.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_reads_an_evidence_store(evidence_file, tmp_path):
    path, *_ = evidence_file
    assert is_evidence_file(path)
    png = tmp_path / "t.png"
    res = runner.invoke(
        app,
        [
            "audit",
            "report",
            "--details",
            str(path),
            "--target-precision",
            "0.8",
            "--diagram",
            str(png),
        ],
        terminal_width=200,
    )
    assert res.exit_code == 0, res.output
    assert "urgent: nothing taken (withdrawn)" in res.output
    assert "precision 0.8 at level 0.95: the policy's own" in res.output
    assert "what if" not in res.output  # 0.8 is the policy's own precision
    assert "withdrawn at" in res.output and "audits since it opened" in res.output
    assert png.is_file()
    res = runner.invoke(app, ["audit", "report", "--details", str(path), "--json"])
    assert res.exit_code == 0
    assert json.loads(res.stdout)["questions"]


def test_cli_adds_earned_trust_to_an_audit_report(evidence_file):
    path, audits, *_ = evidence_file
    res = runner.invoke(
        app,
        ["audit", "report", "--details", str(audits), "--evidence", str(path)],
        terminal_width=200,
    )
    assert res.exit_code == 0, res.output
    # One report, one threshold per question: no hand-chosen take_at beside the earned
    # one (old code printed "take_at for 90%" above an earned section at 0.9).
    assert res.output.count("urgent: ") == 1 and "take_at for" not in res.output
    assert "urgent: nothing taken (withdrawn)" in res.output
    assert "agreement by confidence" in res.output and "audits in audits.jsonl" in res.output
    res = runner.invoke(
        app, ["audit", "report", "--details", str(audits), "--evidence", str(path), "--json"]
    )
    both = json.loads(res.stdout)
    assert set(both) == {"audit", "earned"}
    assert "threshold" not in both["audit"]["questions"]["urgent"]
    # The audit file alone (its records carry take_at, trust and the policy's settings).
    res = runner.invoke(app, ["audit", "report", "--details", str(audits)], terminal_width=200)
    assert "urgent: nothing taken (withdrawn)" in res.output
    assert "as recorded at the latest label" in res.output
    assert "precision 0.8 at level 0.95: the policy's own" in res.output


def test_cli_corrupt_evidence_is_a_clear_error(evidence_file, tmp_path):
    path, audits, *_ = evidence_file
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text() + '{"schema": "agentbranch.earned/1", "id": 3}\n')
    res = runner.invoke(app, ["audit", "report", "--details", str(bad)])
    assert res.exit_code == 2
    assert "not an agentbranch evidence record" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(
        app, ["audit", "report", "--details", str(audits), "--evidence", str(tmp_path / "no")]
    )
    assert res.exit_code == 2 and "no evidence file" in res.output


@pytest.mark.parametrize("kw", [{"precision": float("nan")}, {"level": 1.0}, {"windows": 0}])
def test_bad_report_settings_are_clear_errors(kw, evidence_file):
    with pytest.raises(ConfigurationError):
        earned_report(evidence_file[0], **kw)


def test_foreign_records_are_clear_errors():
    with pytest.raises(ConfigurationError, match="not a valid audit record"):
        earned_report([{"hello": 1}])
    with pytest.raises(ConfigurationError, match="not an evidence record"):
        earned_report([{"schema": "agentbranch.earned/1", "id": "x"}])


def test_cli_on_a_fifo_or_a_directory_is_a_clear_error(tmp_path):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target in (fifo, tmp_path):
        assert not is_evidence_file(target)
        res = runner.invoke(app, ["audit", "report", "--details", str(target)])
        assert res.exit_code == 2 and "Traceback" not in res.output
        res = runner.invoke(
            app, ["audit", "report", "--details", str(target), "--evidence", str(target)]
        )
        assert res.exit_code == 2


def test_exported_from_agentbranch_audit():
    import agentbranch.audit as audit

    assert audit.earned_report is earned_report and audit.earned_diagram is earned_diagram


def test_report_and_cli_on_a_sqlite_store(tmp_path):
    from langgraph.store.sqlite import SqliteStore

    db = tmp_path / "evidence.sqlite"
    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
        _drifting_run(store)
    rep = earned_report(db, precision=0.8)
    (q,) = rep.questions.values()
    assert [e.kind for e in q.events][:2] == ["opened", "withdrawn"]
    res = runner.invoke(
        app,
        ["audit", "report", "--details", str(db), "--target-precision", "0.8"],
        terminal_width=200,
    )
    assert res.exit_code == 0, res.output
    assert "urgent: nothing taken (withdrawn)" in res.output and "withdrawn at" in res.output


def test_report_and_cli_on_a_postgres_store(postgres_uri):
    from langgraph.store.postgres import PostgresStore

    uri = postgres_uri
    with PostgresStore.from_conn_string(uri) as store:
        store.setup()
        _drifting_run(store)
    (q,) = earned_report(uri, precision=0.8).questions.values()
    assert "withdrawn" in [e.kind for e in q.events]
    res = runner.invoke(app, ["audit", "report", uri, "--target-precision", "0.8", "--json"])
    assert res.exit_code == 0, res.output
    (shown,) = json.loads(res.stdout)["questions"].values()
    assert shown["labels"] == q.labels


def test_a_foreign_sqlite_database_is_left_untouched(tmp_path):
    import sqlite3

    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("create table t (x)").connection.commit()
    before = other.read_bytes()
    res = runner.invoke(app, ["audit", "report", "--details", str(other)])
    assert res.exit_code == 2 and "not a LangGraph store" in res.output
    assert other.read_bytes() == before


def test_from_an_earned_the_threshold_is_the_one_in_force_now(tmp_path):
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0, store=str(tmp_path / "e.jsonl"))
    r = Resolver(
        engine(), {"urgent": URGENT}, Policy(take_at=earned, fallbacks=[Generate(Oracle())])
    )
    for i in range(20):  # the 20th label opens the band; its record says "learning"
        r.resolve(state(i, "yes", 0.99, "yes"))
    (from_file,) = earned_report(tmp_path / "e.jsonl", precision=0.8).questions.values()
    (now,) = earned_report(earned, precision=0.8).questions.values()
    # The latest record says what was in force for it; the report shows beside it what
    # the policy computes from the records now (replayed under the recorded settings).
    assert from_file.recorded_trust == "learning" and from_file.recorded_take_at is None
    assert from_file.recomputed and from_file.trust == "earned"
    assert now.trust == "earned" and now.take_at is not None
    assert from_file.take_at == now.take_at and "shown down to" in from_file.why


def test_the_report_on_a_large_store_costs_little_memory_per_record(tmp_path):
    """Issue 64: the report on a 200 MB store (270,288 records) took 3.2 GB: every record
    was held several times as a validated model (about 11 kB each). It now reads the
    store one record at a time and keeps each as the report needs it. Measured in fresh
    processes at two sizes (``benchmarks/bench_report_memory.py``, whose full size is
    200 MB): what each further record costs, and the peak of the larger."""
    import bench_report_memory as bench  # benchmarks/ (on the path: pyproject's pythonpath)

    records = bench.written_records(tmp_path, n=100)
    peaks = []
    sizes = (4_000, 32_000)
    for n in sizes:
        store = tmp_path / f"evidence-{n}.jsonl"
        bench.write_store(store, records, n)
        peaks.append(bench.report_peak(store)[0])
    per_record = (peaks[1] - peaks[0]) / (sizes[1] - sizes[0])
    assert per_record < 2_000, f"{per_record:,.0f} bytes per record ({peaks})"
    assert peaks[1] < 300e6, peaks
    rep = earned_report(tmp_path / "evidence-4000.jsonl")  # the same report as before
    (q,) = rep.questions.values()
    assert q.labels == 4_000


def test_the_report_keeps_every_field_of_an_evidence_record():
    """The report replays each version's trust from the records it keeps, so a field it
    drops makes it disagree with the live policy: it once dropped ``bet_alpha`` (the
    bar a learned version's label is checked at), and replayed those versions at their
    own, higher bar."""
    from _evidence_records import evidence

    from agentbranch.audit.earned_sources import Kept, _Keeper
    from agentbranch.policy.earned._evidence import Evidence

    assert set(Kept.__slots__) == set(Evidence.model_fields)
    kept = _Keeper().row(evidence(key="k", question_id="q", floor=0.5, bet_alpha=0.004)).record
    assert (kept.bet_alpha, kept.floor) == (0.004, 0.5)
