"""Issue 38, "seen, not believed": ``agentbranch audit report`` shows, per learning
question, its labels, the version of the read in force and those on trial, the read's
accuracy against the teacher over time (in the diagram too), coverage, the threshold
and why; and ``Earned.stored()`` tests each learned version's key at that version's own
share of the error, as the live policy does."""

from __future__ import annotations

import json
import math
import re

import matplotlib.figure
import pytest
from _earned_fixtures import observe_fallback
from _evidence_records import evidence
from _learn_store import learn_store
from typer.testing import CliRunner

from agentbranch.audit.earned_learning import learning
from agentbranch.audit.earned_report import earned_report
from agentbranch.audit.earned_sources import evidence_rows
from agentbranch.cli import app
from agentbranch.policy import Earned
from agentbranch.policy.earned import QuestionKey
from agentbranch.policy.earned._state import replay
from agentbranch.policy.earned.learn import ladder as ld
from agentbranch.policy.earned.learn.ladder import version_share

runner = CliRunner()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("learn") / "evidence.jsonl"
    earned = learn_store(path, n=700)
    return earned, path


def _rungs(earned):
    (q,) = earned.learner._questions.values()
    return q, q.ladder


def test_stored_tests_every_version_at_its_own_share(run):
    earned, path = run
    q, ladder = _rungs(earned)
    assert len(ladder.rungs) >= 3
    stored = earned.stored()
    other = Earned(precision=0.8, min_evidence=20, refresh_s=0, store=str(path), learn=True)
    elsewhere = other.stored()  # another process reading the same store
    at_full_level_differs = False
    by_file = earned_report(path)
    by_policy = earned_report(earned)
    assert by_policy.as_dict()["learning"] == by_file.as_dict()["learning"]  # NaN: None
    for rung in ladder.rungs:
        key = earned.key(QuestionKey("sport", rung.model, q.key.reader, q.key.model))
        live = rung.trust.threshold(QuestionKey("sport", rung.model, q.key.reader, q.key.model))
        for got in (stored[key], elsewhere[key]):
            assert (got.take_at, got.trust) == (live.take_at, live.trust), rung.index
        assert rung.trust.level == pytest.approx(1 - 0.05 * version_share(rung.index))
        full = replay(earned.evidence.load(key), earned)
        at_full_level_differs |= (full.take_at, full.trust) != (live.take_at, live.trust)
        # the report, from the policy itself or from its file, shows the same threshold
        assert by_policy.questions[key].take_at == live.take_at
        assert by_file.questions[key].take_at == live.take_at
        assert by_policy.questions[key].target.level == by_file.questions[key].target.level
        assert by_policy.questions[key].target.level == rung.trust.level
    # The store makes the difference visible: at the policy's full level some version
    # would hold a threshold the live policy does not (what stored() used to show).
    assert at_full_level_differs
    assert (
        set(stored)
        == set(elsewhere)
        == {
            earned.key(QuestionKey("sport", r.model, q.key.reader, q.key.model))
            for r in ladder.rungs
        }
    )


def test_every_record_of_a_learning_policy_says_its_version(run):
    earned, path = run
    q, ladder = _rungs(earned)
    keys = {
        earned.key(QuestionKey("sport", r.model, q.key.reader, q.key.model)): r.index
        for r in ladder.rungs
    }
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert all(x["version"] == keys[x["key"]] for x in lines)
    v1 = {x["earned"]["level"] for x in lines if x["version"] == 1}
    assert v1 == {1 - 0.05 * version_share(1)}


def _expected_curve(lines):
    deciding = [x for x in lines if "state" in x]
    block = max(10, math.ceil(len(deciding) / 10))
    return [
        round(sum(x["correct"] for x in deciding[i : i + block]) / len(deciding[i : i + block]), 2)
        for i in range(0, len(deciding), block)
    ]


def _cells(table: str) -> dict[str, str]:
    """A rich key/value table's rows, wrapped values joined."""
    out, name = {}, None
    for line in table.splitlines():
        parts = line.split("│")
        if len(parts) < 4:
            continue
        key, value = parts[1].strip(), parts[2].strip()
        if key:
            name = key
            out[name] = value
        elif name is not None:
            out[name] += " " + value
    return out


def live_why(earned, q, ladder):
    from agentbranch.audit.earned_now import from_state

    rung = ladder.deciding
    st = rung.trust.state(QuestionKey("sport", rung.model, q.key.reader, q.key.model))
    return from_state(st, rung.trust).why


def test_the_report_shows_the_learning_section(run):
    earned, path = run
    q, ladder = _rungs(earned)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    res = runner.invoke(app, ["audit", "report", "--details", str(path)], terminal_width=200)
    assert res.exit_code == 0, res.output
    out = res.output
    n_labels = sum("state" in x for x in lines)
    assert (
        f"sport (scripted, scripted): learning from the teacher, version {ladder.in_force} "
        "in force" in out
    )
    assert f"{n_labels} labels learned from" in out
    live = ladder.deciding.trust.threshold(
        QuestionKey("sport", ladder.deciding.model, q.key.reader, q.key.model)
    )
    cells = _cells(out.split("learning from the teacher")[1])
    assert cells["in force"].startswith(
        f"v{ladder.in_force} (fitted on the first {ld.refit_at(ladder.in_force)} labels): "
        f"{live.trust}, take_at "
        f"{live.take_at:g}, tested at level 0.995 (its share 0.1 of 1 - 0.95)"
    )
    assert cells["on trial"].startswith(f"v2 (fitted on the first {ld.refit_at(2)} labels)")
    shown = re.findall(r"\d+: ([\d.]+) \(v", cells["read vs teacher"])
    assert shown == [f"{a:.2f}" for a in _expected_curve(lines)]
    assert cells["why"].startswith(live_why(earned, q, ladder))
    assert cells["coverage"].endswith("lately")

    res = runner.invoke(app, ["audit", "report", "--details", str(path), "--json"])
    assert res.exit_code == 0, res.output
    (lq,) = json.loads(res.stdout)["learning"].values()
    assert lq["in_force"] == ladder.in_force and lq["labels"] == n_labels
    assert [round(p["accuracy"], 2) for p in lq["curve"]] == _expected_curve(lines)
    assert lq["take_at"] == live.take_at and lq["trust"] == live.trust
    assert [v["version"] for v in lq["versions"]] == [r.index for r in ladder.rungs]
    assert lq["on_trial"] == [r.index for r in ladder.fed[1:]]
    # the read learned: the accuracy of its last blocks beats its first ones
    assert lq["curve"][-1]["accuracy"] > lq["curve"][2]["accuracy"]


def test_the_diagram_has_the_learning_panel(run, tmp_path, monkeypatch):
    earned, path = run
    seen = []
    save = matplotlib.figure.Figure.savefig

    def spy(fig, *a, **kw):
        seen.append([ax.get_title() for ax in fig.axes])
        return save(fig, *a, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    out = tmp_path / "learning.png"
    res = runner.invoke(app, ["audit", "report", "--details", str(path), "--diagram", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (titles,) = seen
    keys = len(earned.stored())
    assert len(titles) == keys + 1  # a panel per evidence key, and the learning one
    assert titles[-1].startswith("sport: learning, version 1 in force (earned, take_at")


def test_a_store_without_learning_has_no_learning_section(tmp_path):
    path = tmp_path / "plain.jsonl"
    earned = Earned(precision=0.8, min_evidence=10, store=str(path))
    for i in range(30):
        key = QuestionKey("q", "Is it?", "r", "m")
        observe_fallback(earned, "yes" if i % 10 else "no", 0.9, key)
    assert all("version" not in json.loads(x) for x in path.read_text().splitlines())
    rep = earned_report(path)
    assert rep.learning == {} and "learning" not in rep.as_dict()
    res = runner.invoke(app, ["audit", "report", "--details", str(path)], terminal_width=200)
    assert res.exit_code == 0 and "learning from the teacher" not in res.output


def _rec(key, version, state, correct, i, band="fallback", rate=1.0, take_at=None):
    return evidence(
        key=key,
        question_id="q",
        reader="r",
        model="m",
        band=band,
        confidence=0.5,
        teacher_label="yes" if correct else "no",
        rate=rate,
        take_at=take_at,
        trust="learning",
        version=version,
        time=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
        **({"state": state} if state else {}),
    )


def test_the_section_follows_the_versions_records_say():
    recs = [_rec("k0", 0, f"s{i}", i % 2 == 0, i) for i in range(60)]
    recs += [_rec("k1", 1, None, True, 60 + i) for i in range(5)]  # trial reads of v1
    recs += [_rec("k1", 1, f"t{i}", True, 65 + i) for i in range(10)]  # v1 decides
    rows = evidence_rows(recs)
    groups = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    (lq,) = learning(groups, {}).values()
    assert lq.labels == 70 and [v.version for v in lq.versions] == [0, 1]
    assert lq.versions[1].trial_reads == 5 and lq.versions[1].deciding_labels == 10
    assert lq.in_force == 1 and lq.began == [[0, 0], [1, 60]]
    # blocks of 10 labels: 5 of 10 right in each of v0's, then v1's 10 of 10
    assert [p.accuracy for p in lq.curve] == [0.5] * 6 + [1.0]
    assert lq.curve[-1].versions == [1]


def test_a_precision_asked_of_the_report_is_asked_at_each_versions_share(run):
    earned, path = run
    q, ladder = _rungs(earned)
    v1 = earned.key(QuestionKey("sport", ladder.rungs[1].model, q.key.reader, q.key.model))
    own = earned_report(path, precision=0.8)  # the policy's own precision: no what if
    assert all(x.what_if is None for x in own.questions.values())
    res = runner.invoke(
        app, ["audit", "report", "--details", str(path), "--target-precision", "0.8"]
    )
    assert res.exit_code == 0 and "what if" not in res.output
    other = earned_report(path, precision=0.9).questions[v1].what_if
    assert (other.precision, other.level) == (0.9, pytest.approx(1 - 0.05 * version_share(1)))


def test_labels_without_their_state_are_no_curve_and_no_trial():
    from agentbranch.audit.earned_render import learning_rows

    rows = evidence_rows([_rec("k0", 0, None, True, i) for i in range(5)])
    (lq,) = learning({"k0": rows}, {}).values()
    assert lq.labels == 0 and lq.curve == [] and lq.versions[0].trial_reads == 0
    cells = dict(learning_rows(lq))
    assert cells["read vs teacher"] == "no label with its state yet"
    assert cells["coverage"] == "-"
    assert "tested at level" not in cells["in force"]  # the records do not say the level


def test_a_version_that_decides_again_is_shown_again():
    """The newest version reads while none holds a threshold; when an older one earns
    its threshold it decides again, and the report says so (not only first starts)."""
    recs = [_rec("k0", 0, f"s{i}", True, i) for i in range(20)]
    recs += [_rec("k1", 1, f"t{i}", True, 20 + i) for i in range(10)]
    recs += [_rec("k2", 2, f"u{i}", True, 30 + i) for i in range(10)]
    recs += [_rec("k1", 1, f"v{i}", True, 40 + i) for i in range(10)]
    rows = evidence_rows(recs)
    groups = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    (lq,) = learning(groups, {}).values()
    assert lq.began == [[0, 0], [1, 20], [2, 30], [1, 40]]
