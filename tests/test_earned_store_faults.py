"""Store file faults while serving (issue 37, points 7 and 8): a torn last line, another
tool's file, the store moved or deleted. The service keeps answering; nothing is taken
that was not earned; the operator sees an ERROR saying what happened."""

from __future__ import annotations

import json
import logging

import pytest
from _earned_fixtures import observe_fallback
from _evidence_records import evidence

from agentbranch.core.errors import InvalidFileError
from agentbranch.policy import Earned, QuestionKey


def _observe(earned: Earned, conf: float = 0.99, right: bool = True):
    return observe_fallback(earned, "yes" if right else "no", conf)


def _state(earned: Earned):
    return earned.state(QuestionKey("q", {"q": 1}, "r", "m"))


def _earn(earned: Earned, n: int = 60) -> None:
    for _ in range(n):
        _observe(earned)
    assert _state(earned).trust == "earned"


def test_a_torn_last_line_is_moved_aside_and_serving_continues(tmp_path, caplog):
    path = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    for _ in range(5):
        _observe(earned)
    good = path.read_bytes()
    torn = good.splitlines(keepends=True)[-1][:57]  # a writer died mid-append
    with open(path, "ab") as f:
        f.write(torn)
    with caplog.at_level(logging.ERROR, logger="agentbranch"):
        for _ in range(3):
            _observe(earned)
    assert f"byte offset {len(good)}" in caplog.text and "torn" in caplog.text
    assert (tmp_path / "evidence.jsonl.torn").read_bytes() == torn + b"\n"
    lines = path.read_bytes().splitlines()
    assert len(lines) == 8 and all(json.loads(x)["schema"] for x in lines)
    fresh = Earned(precision=0.8, min_evidence=20, store=path)
    assert _state(fresh).labels == 8


def test_another_tools_file_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "settings.json"
    content = b'{"theme": "dark", "fontSize": 14}'
    path.write_bytes(content)
    earned = Earned(precision=0.8, min_evidence=20, store=path)
    with pytest.raises(InvalidFileError, match="does not start with an agentbranch evidence"):
        _observe(earned)
    assert path.read_bytes() == content


def test_another_tools_file_with_a_final_newline_is_refused_too(tmp_path):
    path = tmp_path / "settings.json"
    content = b'{"theme": "dark"}\n'
    path.write_bytes(content)
    earned = Earned(precision=0.8, min_evidence=20, store=path)
    with pytest.raises(InvalidFileError):
        _state(earned)
    with pytest.raises(InvalidFileError):
        _observe(earned)
    assert path.read_bytes() == content


@pytest.mark.parametrize("fault", ["deleted", "moved", "replaced"])
def test_a_store_lost_while_serving_means_learning_and_an_error(tmp_path, caplog, fault):
    path = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0, start_at=0.5)
    _earn(earned)
    if fault == "deleted":
        path.unlink()
    elif fault == "moved":
        path.rename(tmp_path / "evidence.jsonl.1")  # log rotation
    else:
        path.rename(tmp_path / "old.jsonl")
        path.write_bytes(b"")
    with caplog.at_level(logging.ERROR, logger="agentbranch"):
        st = _state(earned)  # the decision path: no exception
    assert (st.trust, st.take_at) == ("learning", None)  # nothing taken, even with start_at
    assert "learning again" in caplog.text and str(path) in caplog.text
    _observe(earned)  # a new store file is started
    assert len(path.read_bytes().splitlines()) == 1
    st = _state(earned)
    assert (st.trust, st.labels) == ("learning", 1)


def test_a_store_deleted_before_an_append_is_started_again(tmp_path, caplog):
    path = tmp_path / "evidence.jsonl"
    earned = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=3600)
    _earn(earned)
    path.unlink()
    with caplog.at_level(logging.ERROR, logger="agentbranch"):
        _observe(earned)
    assert "learning again" in caplog.text
    assert _state(earned).trust == "learning"
    assert len(path.read_bytes().splitlines()) == 1


def test_a_record_from_a_fast_clock_is_skipped_with_a_warning_not_an_outage(tmp_path, caplog):
    """A replica whose clock runs ahead writes a record dated past the allowed skew: the
    others skip that one record (logged) and keep serving on the rest."""
    import json as _json

    from agentbranch.policy.earned import Earned as _Earned

    path = tmp_path / "evidence.jsonl"
    who = dict(key="k", question_id="q", reader="r", model="m", confidence=0.5)
    labels = dict(options=["a", "b"], engine_label="a", teacher_label="a")
    good = evidence(**who, **labels)
    ahead = evidence(**who, **labels).to_json() | {"time": "2099-01-01T00:00:00.000+00:00"}
    path.write_text(_json.dumps(good.to_json()) + "\n" + _json.dumps(ahead) + "\n")
    earned = _Earned(store=str(path))
    with caplog.at_level("WARNING", logger="agentbranch"):
        assert [r.id for r in earned.evidence.load("k")] == [good.id]
        earned.refresh()
    assert any("in the future" in r.getMessage() for r in caplog.records)
    assert sum(st.records for st in earned.stored().values()) == 1


def test_a_store_emptied_in_place_and_refilled_is_noticed_not_an_outage(tmp_path, caplog):
    """copytruncate-style rotation: the file is emptied in place and another writer
    appends past where this reader had read. The reader notices (the bytes before its
    position changed), reports it once and reads the new file from its start."""
    path = tmp_path / "e.jsonl"
    a = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    b = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    for _ in range(5):
        _observe(a, 0.9)
    b.refresh()
    assert sum(st.records for st in b.stored().values()) == 5
    path.write_text("")
    for _ in range(8):
        _observe(a, 0.912345)
    with caplog.at_level(logging.WARNING, logger="agentbranch"):
        b.refresh()  # old code: InvalidFileError (read on from the middle of a line)
        b.refresh()
    noticed = [r for r in caplog.records if "emptied and written again" in r.getMessage()]
    assert len(noticed) == 1, [r.getMessage() for r in caplog.records]
    # the refilled file is read from its start: its 8 records, not 5 + 8 nor a tail of it
    assert sum(st.records for st in b.stored().values()) == 8


def _first_record(tmp_path) -> bytes:
    scratch = Earned(precision=0.8, min_evidence=20, store=tmp_path / "scratch.jsonl")
    _observe(scratch)
    return (tmp_path / "scratch.jsonl").read_bytes()


@pytest.mark.parametrize("indent", [b"", b"  "])
def test_a_store_holding_only_a_torn_first_record_is_ours_and_repaired(tmp_path, indent):
    """A writer died mid-append on an empty store: the one line is the start of one of
    our records (no newline), so the store is ours; the fragment is moved aside."""
    path = tmp_path / "evidence.jsonl"
    torn = indent + _first_record(tmp_path)[:57]
    path.write_bytes(torn)
    earned = Earned(precision=0.8, min_evidence=20, store=path, refresh_s=0)
    _observe(earned)
    assert (tmp_path / "evidence.jsonl.torn").read_bytes() == torn + b"\n"
    assert len(path.read_bytes().splitlines()) == 1


def test_a_first_line_that_only_starts_like_a_record_is_refused(tmp_path):
    """A first line that begins like a record but is not one, followed by more lines, is
    not a torn record of ours (a torn line is only ever the last): refused, untouched."""
    path = tmp_path / "evidence.jsonl"
    content = _first_record(tmp_path)[:57] + b"\n" + b'{"theme": "dark"}\n'
    path.write_bytes(content)
    earned = Earned(precision=0.8, min_evidence=20, store=path)
    with pytest.raises(InvalidFileError, match="does not start with an agentbranch evidence"):
        _observe(earned)
    assert path.read_bytes() == content
