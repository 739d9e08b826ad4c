"""A checkpoint beside a JSON Lines store (issue 42: a store of a million labels opens in
seconds): used only when it matches the log and the configuration, rebuilt otherwise."""

from __future__ import annotations

import json
import logging
import random

import pytest
from _earned_fixtures import observe_fallback

from agentbranch.policy import Earned
from agentbranch.policy.earned import QuestionKey
from agentbranch.policy.earned import _checkpoint as ck
from agentbranch.policy.earned._state import Ledger, replay


def _fill(earned: Earned, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    for i in range(n):
        conf = rng.random()
        key = QuestionKey(f"q{i % 2}", {"q": i % 2}, "r", "m")
        observe_fallback(earned, "yes" if rng.random() < 0.2 + conf else "no", conf, key)


def _states(earned: Earned) -> dict:
    return {
        k: (s.take_at, s.trust, s.labels, s.looks, s.records, s.events, s.last)
        for k, s in earned.stored().items()
    }


@pytest.fixture
def small_checkpoints(monkeypatch):
    monkeypatch.setattr(ck, "CHECKPOINT_BYTES", 20_000)


def _replayed(path) -> dict:
    earned = Earned(precision=0.8, min_evidence=20, store=path)
    return {
        k: (s.take_at, s.trust, s.labels, s.looks, s.records, s.events, s.last)
        for k in earned.evidence.keys()
        for s in [replay(earned.evidence.load(k), earned)]
    }


def test_a_checkpoint_is_written_and_gives_the_replayed_state(tmp_path, small_checkpoints, caplog):
    path = tmp_path / "e.jsonl"
    writer = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    _fill(writer, 300)
    writer.refresh()
    assert (tmp_path / "e.jsonl.state").exists()
    first = (tmp_path / "e.jsonl.state").read_text()
    covered = json.loads(first)["store"]["offset"]
    _fill(writer, 40, seed=1)  # more after the checkpoint: read from the log
    caplog.set_level(logging.WARNING, logger="agentbranch")
    opened = Earned(precision=0.8, min_evidence=20, store=path)
    opened.refresh()
    assert opened._saved_at > 0
    assert _states(opened) == _replayed(path)
    # It was used, not rebuilt (a rebuild gives the same states and says so at WARNING).
    assert not [r for r in caplog.records if "not used" in r.getMessage()]
    # A log that ends exactly where its checkpoint does (nothing after it) resumes too.
    exact = tmp_path / "exact.jsonl"
    with path.open("rb") as f:
        exact.write_bytes(f.read(covered))
    (tmp_path / "exact.jsonl.state").write_text(first)
    reopened = Earned(precision=0.8, min_evidence=20, store=exact, refresh_s=0)
    assert ck.restore(reopened, Ledger(reopened)) is True
    assert not [r for r in caplog.records if "not used" in r.getMessage()]


def test_a_checkpoint_that_does_not_match_the_log_is_rebuilt(tmp_path, small_checkpoints, caplog):
    path = tmp_path / "e.jsonl"
    writer = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    _fill(writer, 300)
    writer.refresh()
    data = path.read_bytes()
    at = data.index(b'"id": "') + 7 + 14  # a hex digit of the first id: same length, valid
    path.write_bytes(data[:at] + (b"a" if data[at : at + 1] != b"a" else b"b") + data[at + 1 :])
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        opened = Earned(precision=0.8, min_evidence=20, store=path)
        got = _states(opened)
    assert "checkpoint" in caplog.text and "not used" in caplog.text
    assert got == _replayed(path)


def test_a_checkpoint_of_another_configuration_is_not_used(tmp_path, small_checkpoints, caplog):
    path = tmp_path / "e.jsonl"
    writer = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    _fill(writer, 300)
    writer.refresh()
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        other = Earned(precision=0.7, min_evidence=20, store=path)
        other.refresh()
    assert "another configuration" in caplog.text
    assert other._saved_at == 0 or "not used" in caplog.text


def test_a_frozen_earned_writes_no_checkpoint(tmp_path, small_checkpoints):
    path = tmp_path / "e.jsonl"
    _fill(Earned(precision=0.8, min_evidence=20, store=path, refresh_s=3600), 300)
    (tmp_path / "e.jsonl.state").unlink(missing_ok=True)
    Earned(precision=0.8, min_evidence=20, store=path, frozen=True).refresh()
    assert not (tmp_path / "e.jsonl.state").exists()


def test_a_large_store_is_read_in_bounded_pieces(tmp_path, monkeypatch):
    """Opening a store never holds all of its records at once (a million labels peaked
    at 3 GB when every record was parsed in one read)."""
    from agentbranch.policy import JsonlEvidenceStore
    from agentbranch.policy.earned import _jsonl_store as es

    path = tmp_path / "e.jsonl"
    _fill(Earned(precision=0.8, min_evidence=20, store=path, refresh_s=3600), 60)
    monkeypatch.setattr(es, "READ_BYTES", 2_000)
    store = JsonlEvidenceStore(path)
    pieces = []
    while batch := store.read_new():
        pieces.append(len(batch))
    assert sum(pieces) == 60 and max(pieces) <= 5
    opened = Earned(precision=0.8, min_evidence=20, store=path)
    assert sum(s.records for s in opened.stored().values()) == 60
