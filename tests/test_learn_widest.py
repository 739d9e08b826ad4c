"""Which shown version decides: the one whose band holds the most decisions.

A newer version shown on a narrower band than the one in force used to replace it at
once (the newest version holding a threshold decided), so learning could take *less*
than the read it replaced. Each shown version holds its own threshold under the union
bound over versions, so choosing among them spends no error; the ladder now keeps the
one whose band holds the largest share of the decisions.
"""

from __future__ import annotations

import json
import math
import zlib
from datetime import UTC, datetime, timedelta

import pytest
from _evidence_records import evidence
from _learn_store import QUESTION, TruthTeacher, stream
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import agentbranch as ab
from agentbranch.cli import app
from agentbranch.policy import Audit, Earned, Generate, Policy, Resolver
from agentbranch.policy.earned._state import replay
from agentbranch.policy.earned.learn import ladder as ld


def _ladder(n: int) -> ld.Ladder:
    lad = ld.Ladder()
    for j in range(n):
        lad.rungs.append(ld.Rung(j, ld.refit_at(j) if j else 0))
    return lad


def test_a_newer_version_on_a_narrower_band_stays_on_trial():
    lad = _ladder(3)
    assert lad.adopt([True, False, False], [0.7, None, None]) is None
    assert lad.deciding.index == 0
    # version 1 is shown, but its band holds less than the written question's
    assert lad.adopt([True, True, False], [0.7, 0.5, None]) is None
    assert lad.deciding.index == 0 and [r.index for r in lad.fed] == [0, 1, 2]
    # its threshold is lowered on more labels: now it takes more, and decides
    assert lad.adopt([True, True, False], [0.7, 0.72, None]).index == 1
    assert lad.deciding.index == 1 and [r.index for r in lad.fed] == [1, 2]


def test_ties_go_to_the_newer_version_and_unknown_shares_to_the_newest():
    lad = _ladder(3)
    assert lad.adopt([True, True, False], [0.6, 0.6, None]).index == 1
    lad = _ladder(3)
    # a share that is not known: the newest holding a threshold, as before
    assert lad.adopt([True, True, False], [0.9, None, None]).index == 1
    assert [r.index for r in lad.fed] == [1, 2]
    # no shares at all (as before): the newest holding a threshold
    assert lad.adopt([True, True]).index == 2 and lad.deciding.index == 2


def test_the_one_in_force_withdrawn_a_narrower_shown_one_decides():
    lad = _ladder(3)
    lad.adopt([True, True, False], [0.7, 0.5, None])
    assert lad.deciding.index == 0
    assert lad.adopt([False, True, False], [None, 0.5, None]).index == 1
    assert lad.adopt([False, False], [None, None]) is None
    assert not lad.open and lad.deciding.index == 2  # nothing open: the newest reads


def test_widest_without_a_threshold_is_none():
    assert ld.widest([False, False], [0.9, 0.8]) is None
    assert ld.widest([], []) is None


def _records(rows: list[tuple[float, bool, float, str]]) -> list:
    epoch = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        evidence(
            question_id="q",
            source="fallback" if band == "fallback" else "audit",
            band=band,
            confidence=conf,
            teacher_label="yes" if right else "no",
            rate=rate,
            time=(epoch + timedelta(milliseconds=i)).isoformat(timespec="milliseconds"),
        )
        for i, (conf, right, rate, band) in enumerate(rows)
    ]


def test_band_share_weighs_each_label_by_its_rate():
    earned = Earned(precision=0.9, level=0.95, start_at=0.5)
    rows = [(0.9, True, 0.2, "take")] * 4 + [(0.3, True, 1.0, "fallback")] * 10
    st = replay(_records(rows), earned)
    assert st.take_at == 0.5
    # 4 audited takes stand for 20 decisions; 10 fallbacks for 10
    assert math.isclose(st.band_share(), 20 / 30)


def test_band_share_is_none_while_nothing_is_taken():
    st = replay(_records([(0.9, True, 1.0, "fallback")] * 5), Earned(precision=0.9, level=0.95))
    assert st.take_at is None and st.band_share() is None


@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 1.0),
            st.booleans(),
            st.sampled_from([0.05, 0.2, 1.0]),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([0.1, 0.5, 0.9]),
)
def test_band_share_is_a_share(rows, start_at):
    earned = Earned(precision=0.9, level=0.95, start_at=start_at)
    recs = _records([(c, r, rate, "take" if rate < 1 else "fallback") for c, r, rate in rows])
    share = replay(recs, earned).band_share()
    if share is not None:
        assert 0.0 <= share <= 1.0
        above = sum(1 / rate for c, _, rate in rows if c >= start_at)
        assert math.isclose(share, above / sum(1 / rate for _, _, rate in rows))


# -- through the public API: a policy, its store, a restart and the report --------------

N = 700  #: decisions: version 1 is shown by then (on about half of them)


def _reader(truth: dict[str, str]) -> ab.ScriptedReader:
    """As written: right on every state at probability 0.9 (confidence 0.53), so its band
    holds every decision. Learned (a version, whose question carries examples): sure and
    right on half the states, unsure and wrong on the rest, so its band holds half."""

    def read(state: str, q) -> dict[str, float]:
        label = truth[state]
        other = "no" if label == "yes" else "yes"
        if not any(q.examples):
            return {label: 0.9, other: 0.1}
        if zlib.crc32(state.encode()) % 2:
            return {label: 0.999, other: 0.001}
        return {other: 0.55, label: 0.45}

    return ab.ScriptedReader({"sport": read})


def _policy(path, truth: dict[str, str]) -> tuple[Earned, Audit, Policy]:
    earned = Earned(precision=0.8, min_evidence=20, refresh_s=0, store=str(path), learn=True)
    earned.learner.background = False
    earned.learner.settle_s = 0  # one writer
    audit = Audit(rate=0.2, seed=1)
    teacher = Generate(TruthTeacher(truth=truth))
    return earned, audit, Policy(take_at=earned, fallbacks=[teacher], audit=audit)


@pytest.fixture(scope="module")
def narrower(tmp_path_factory):
    path = tmp_path_factory.mktemp("widest") / "evidence.jsonl"
    items = stream(N, 1)
    truth = dict(items)
    earned, audit, policy = _policy(path, truth)
    r = Resolver(ab.DecisionEngine(_reader(truth)), {"sport": QUESTION}, policy)
    records = []
    for text, _ in items:
        records.append(r.resolve(text)["sport"])
        audit.flush()
    audit.close()
    (q,) = earned.learner._questions.values()
    return earned, q, records, path, truth


def test_a_version_shown_on_a_narrower_band_does_not_replace_the_written_question(narrower):
    earned, q, records, _, _ = narrower
    written, v1 = (r.trust.state(q.key.asking(r.model)) for r in q.ladder.rungs[:2])
    assert written.take_at is not None and v1.take_at is not None  # both shown
    assert v1.band_share() < 0.6 < 0.95 < written.band_share()
    assert q.ladder.open and q.ladder.in_force == 0 and q.ladder.deciding.index == 0
    # the question as written keeps taking every decision (the version would take half)
    last = records[-100:]
    assert {rec["reader_version"] for rec in last} == {0}
    assert sum(rec["band"] == "take" for rec in last) == len(last)


def test_a_restart_and_the_report_keep_the_wider_band_in_force(narrower):
    _, q, _, path, truth = narrower
    again, _, _ = _policy(path, truth)  # a new process on the same store
    assert again.learner.asked(q.key)[1] == 0
    res = CliRunner().invoke(app, ["audit", "report", str(path), "--json"])
    assert res.exit_code == 0, res.output
    (lq,) = json.loads(res.stdout)["learning"].values()
    assert lq["in_force"] == 0
    shares = {v["version"]: v["band_share"] for v in lq["versions"]}
    assert shares[1] < 0.6 < 0.95 < shares[0]
