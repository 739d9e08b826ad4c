"""A learned version opened by its anytime-valid test (``learn.eprocess``) is shown as it
is in force: every record its test writes carries the walks' entries
(``Evidence.entries``), so ``Earned.stored()``, another process reading the store and
``agentbranch audit report`` replay the same bets and show the live threshold, trust
and why. Entries that are not a few numbers in [0, 1] are refused where the store's
other errors are; records that disagree on them open nothing by a bet."""

from __future__ import annotations

import json
import math

import pytest
from _learn_fixtures import learning_resolver, stream
from typer.testing import CliRunner

import agentbranch as ab
from agentbranch.audit.earned_now import from_state
from agentbranch.audit.earned_report import earned_report
from agentbranch.cli import app
from agentbranch.core.errors import InvalidFileError
from agentbranch.policy import Earned, QuestionKey
from agentbranch.policy.earned._evidence import MAX_ENTRIES, Evidence, new_evidence
from agentbranch.policy.earned.learn import ladder as ld

runner = CliRunner()


@pytest.fixture(scope="module")
def opened(tmp_path_factory):
    """A learning policy on the embedded reader run until a learned version holds a
    threshold its anytime-valid test opened (before the looks could: min_evidence 50)."""
    from agentbranch.engine.readers.embedded import EmbeddedReader

    engine = ab.DecisionEngine(EmbeddedReader())
    path = tmp_path_factory.mktemp("bets") / "evidence.jsonl"
    items = stream(300)
    earned = Earned(precision=0.9, min_evidence=50, refresh_s=0, store=path, learn=True)
    r = learning_resolver(engine, earned, dict(items))
    for text, _ in items:
        r.resolve(text)
        (q,) = earned.learner._questions.values()
        for rung in q.ladder.rungs[1:]:
            st = rung.trust.state(QuestionKey("sport", rung.model, q.key.reader, q.key.model))
            if st.take_at is not None and st.events[-1].reason.startswith("anytime-valid test"):
                return earned, path, q, rung
    raise AssertionError("no learned version was opened by its anytime-valid test")


def test_records_of_a_version_carry_the_entries_of_its_test(opened):
    earned, path, q, rung = opened
    assert rung.entry  # the version has an anytime-valid test
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    keys = {
        earned.key(QuestionKey("sport", r.model, q.key.reader, q.key.model)): r
        for r in q.ladder.rungs
    }
    mine = [x for x in lines if keys[x["key"]] is rung]
    # its own decisions' records (it read while nothing was open) and its trial reads
    assert {"state" in x for x in mine} == {True, False}
    for x in lines:
        version = keys[x["key"]]
        if version.entry is None:
            assert "entries" not in x  # the written question; versions without the test
        else:
            assert tuple(x["entries"]) == tuple(version.entry)


def test_stored_and_the_report_show_the_threshold_the_live_policy_holds(opened):
    earned, path, q, rung = opened
    key = earned.key(QuestionKey("sport", rung.model, q.key.reader, q.key.model))
    live = rung.trust.threshold(QuestionKey("sport", rung.model, q.key.reader, q.key.model))
    live_why = from_state(
        rung.trust.state(QuestionKey("sport", rung.model, q.key.reader, q.key.model)), rung.trust
    ).why
    assert live.take_at is not None and live_why.startswith("anytime-valid test")
    elsewhere = Earned(precision=0.9, min_evidence=50, refresh_s=0, store=path, learn=True)
    for states in (earned.stored(), elsewhere.stored()):
        got = states[key]
        assert (got.take_at, got.trust) == (live.take_at, live.trust)
        assert from_state(got, rung.trust).why == live_why
        for other in q.ladder.rungs:  # every version, opened or not
            k = earned.key(QuestionKey("sport", other.model, q.key.reader, q.key.model))
            now = other.trust.threshold(
                QuestionKey("sport", other.model, q.key.reader, q.key.model)
            )
            assert (states[k].take_at, states[k].trust) == (now.take_at, now.trust)

    res = runner.invoke(app, ["audit", "report", "--details", str(path), "--json"])
    assert res.exit_code == 0, res.output
    by_file = json.loads(res.stdout)
    for rep in (earned_report(earned).as_dict(), by_file):
        shown = rep["questions"][key]
        assert (shown["take_at"], shown["trust"]) == (live.take_at, live.trust)
        assert shown["why"] == live_why
        assert shown["target"]["level"] == pytest.approx(rung.trust.level)
        (lq,) = rep["learning"].values()
        reads = q.ladder.deciding
        now = reads.trust.threshold(QuestionKey("sport", reads.model, q.key.reader, q.key.model))
        assert lq["in_force"] == reads.index
        assert (lq["take_at"], lq["trust"]) == (now.take_at, now.trust)
        (v,) = [v for v in lq["versions"] if v["version"] == rung.index]
        assert (v["take_at"], v["trust"], v["why"]) == (live.take_at, live.trust, live_why)
        assert v["entries"] == list(rung.entry)
        assert v["anytime_alpha"] == pytest.approx(rung.trust.anytime[1])

    res = runner.invoke(app, ["audit", "report", "--details", str(path)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "[Anytime-valid betting test:" in res.output
    assert "by an anytime-valid test walking from" in res.output


BASE = {
    "key": "k",
    "question_id": "q",
    "source": "fallback",
    "band": "fallback",
    "confidence": 0.95,
    "options": ["yes", "no"],
    "engine_label": "yes",
    "teacher_label": "yes",
    "rate": 1.0,
    "version": 1,
    "floor": 1.0,
}


@pytest.mark.parametrize(
    "bad",
    [
        [math.nan],
        [math.inf],
        [1.5],
        [-0.1],
        ["0.9"],
        "0.9",
        0.9,
        [True],
        [None],
        [],
        [0.9] * (MAX_ENTRIES + 1),
    ],
)
def test_entries_that_are_not_a_few_numbers_in_0_1_are_refused(bad, tmp_path):
    with pytest.raises(ValueError, match="entries"):
        new_evidence(**BASE, entries=bad)
    # in a store: the store's own error, naming the field; nothing is read from it
    good = new_evidence(**BASE, entries=(0.9,))
    raw = good.to_json() | {"entries": bad}
    path = tmp_path / "evidence.jsonl"
    path.write_text(json.dumps(good.to_json()) + "\n" + json.dumps(raw) + "\n")
    with pytest.raises(InvalidFileError, match="entries"):
        Earned(precision=0.9, store=path, learn=True).stored()
    with pytest.raises(InvalidFileError, match="entries"):
        earned_report(path)


def test_entries_belong_to_learned_versions_and_survive_the_store():
    for version in (None, 0):
        with pytest.raises(ValueError, match="entries belong"):
            new_evidence(**(BASE | {"version": version}), entries=(0.9,))
    rec = new_evidence(**BASE, entries=(0.9, 0.5))
    again = Evidence.model_validate(json.loads(json.dumps(rec.to_json())), context={"stored": True})
    assert again.entries == (0.9, 0.5) and "entries" not in new_evidence(**BASE).to_json()


def _version_records(n: int, entries) -> list[Evidence]:
    """``n`` labels of version 1 (right, confidence 0.95, every decision labelled) as its
    copy of ``Earned(precision=0.9, level=0.95)`` with an anytime-valid test writes them."""
    cfg = ld.version_earned(Earned(precision=0.9, level=0.95), 1, entry=(0.9,))
    out = []
    for i in range(n):
        e = entries(i)
        rec = new_evidence(
            **BASE,
            time=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}.000+00:00",
            earned=cfg.settings,
            **({"entries": e} if e is not None else {}),
        )
        out.append(rec)
    return out


def test_records_that_disagree_on_the_entries_open_nothing_by_a_bet():
    """80 right labels (the looks' first at 50 cannot open at a version's share; the
    bets can): the same test replayed from the records opens, as live; one record
    edited to other entries and no bet is trusted; none carrying any: looks only."""
    agree = _version_records(80, lambda i: (0.9,))
    (q,) = earned_report(agree).questions.values()
    assert q.take_at is not None and q.why.startswith("anytime-valid test")
    live = ld.version_earned(Earned(precision=0.9, level=0.95), 1, entry=(0.9,))
    from agentbranch.policy.earned._state import replay

    assert replay(agree, live).take_at == q.take_at
    edited = _version_records(80, lambda i: (0.5,) if i == 40 else (0.9,))
    (q,) = earned_report(edited).questions.values()
    assert q.take_at is None and not q.why.startswith("anytime-valid test")
    none = _version_records(80, lambda i: None)
    (q,) = earned_report(none).questions.values()
    assert q.take_at is None
