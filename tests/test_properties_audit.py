"""Property-based suite (hypothesis) over the file formats of audits and calibration:
whatever a file holds, loading it gives valid records or one of our clear errors
(``AgentBranchError``) that names the file — never another exception.

* ``test_audit_files`` — JSON Lines files of generated audit records, most of them valid
  and the rest with one field replaced by arbitrary JSON, deleted, or the line replaced by
  arbitrary JSON, a truncated line or random bytes: ``load_records`` returns records that
  ``audit_report`` and ``calibrate_from_audit`` turn into a report (every precision and
  agreement in [0, 1]), or raises ``InvalidFileError`` naming the file.
* ``test_audit_records_in_python`` — the same records handed over in Python.
* ``test_labelled_files`` — labelled JSON Lines (header, example lines, arbitrary JSON
  in any field): examples whose labels are options, or an ``AgentBranchError``.

900 examples per run, under a minute on 2 cores; no example database is written.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from _hostile_inputs import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from agentbranch import calibration as cal
from agentbranch.audit import audit_report, calibrate_from_audit, load_records
from agentbranch.core.decisions import confidence_from
from agentbranch.core.errors import AgentBranchError, InvalidFileError

EXAMPLES = {"files": 350, "python": 300, "labelled": 250}


def fuzz(name: str):
    return fuzz_settings(EXAMPLES[name])


JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
NAME = st.from_regex(r"[a-z][a-z_]{0,7}", fullmatch=True)


@st.composite
def valid_record(draw) -> dict:
    if draw(st.booleans()):
        qtype, options = "noul", ["yes", "no"]
        spec = {"type": "noul", "instructions": "Is it urgent?"}
    else:
        qtype = "choice"
        options = draw(st.lists(NAME, min_size=2, max_size=5, unique=True))
        spec = {"type": "choice", "instructions": "Which?", "criteria": dict.fromkeys(options)}
    weights = draw(st.lists(st.floats(0, 1), min_size=len(options), max_size=len(options)))
    total = sum(weights)
    probs = [w / total for w in weights] if total > 0 else [1 / len(options)] * len(options)
    kind = draw(st.sampled_from(["audit", "fallback"]))
    top = options[max(range(len(probs)), key=probs.__getitem__)]
    return {
        "kind": kind,
        "question_id": draw(st.sampled_from(["team", "urgent", "mood"])),
        "type": qtype,
        "options": options,
        "probabilities": dict(zip(options, probs)),
        "confidence": confidence_from(probs),
        "band": "take" if kind == "audit" else "fallback",
        "engine_label": top,
        "teacher_label": draw(st.sampled_from(options)),
        "rate": draw(st.floats(0.001, 1.0)) if kind == "audit" else 1.0,
        "temperature": draw(st.sampled_from([1.0, 0.5, 2.0])),
        "take_at": draw(st.floats(0, 1)),
        "spec": spec,
    }


@st.composite
def record(draw) -> object:
    """A valid record three times in four; else one field broken."""
    rec = draw(valid_record())
    how = draw(st.sampled_from(["valid", "valid", "valid", "replace", "delete", "value"]))
    if how == "replace":
        rec[draw(st.sampled_from(sorted(rec)))] = draw(JSON)
    elif how == "delete":
        del rec[draw(st.sampled_from(sorted(rec)))]
    elif how == "value":
        return draw(JSON)
    return rec


def line(draw_record: object) -> bytes:
    return json.dumps(draw_record).encode()  # NaN/Infinity as Python writes them


LINE = st.one_of(
    record().map(line),
    record().map(line),
    record().map(line),
    record().map(lambda r: line(r)[: len(line(r)) // 2]),  # a torn write
    st.binary(max_size=40),
    st.sampled_from([b"", b"   ", b"[" * 5000 + b"]" * 5000, b"\xef\xbb\xbf{}", b"\xff\xfe"]),
)


def check_report(records: list) -> None:
    try:
        report = audit_report(records, bins=5)
    except AgentBranchError as e:  # records that load are reportable
        raise AssertionError(f"valid records refused by the report: {e}") from None
    for q in report.questions.values():
        tb = q.take_band
        assert 0 <= tb.low <= tb.high <= 1
        assert math.isnan(tb.precision) or 0 <= tb.precision <= 1
        assert all(math.isnan(b.agreement) or 0 <= b.agreement <= 1 for b in q.bins)
    try:
        fitted = calibrate_from_audit(records, holdout=0.0)
    except AgentBranchError:
        return
    assert all(t > 0 and math.isfinite(t) for t in fitted.calibration.temperatures.values())


@fuzz("files")
@given(lines=st.lists(LINE, max_size=8))
def test_audit_files(lines):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audits.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        try:
            records = load_records(path)
        except InvalidFileError as e:
            assert str(path) in str(e)
            return
    assert records
    check_report(records)


@fuzz("python")
@given(records=st.lists(record(), max_size=8))
def test_audit_records_in_python(records):
    try:
        report = audit_report(records)
    except AgentBranchError:
        return
    # A mutation may set question_id to any other string: the report keeps the ids given.
    assert set(report.questions) <= {r.get("question_id") for r in records if isinstance(r, dict)}
    check_report(records)


TEAM = {"type": "choice", "instructions": "Which team?", "criteria": {"a": None, "b": None}}


@st.composite
def labelled_line(draw) -> object:
    kind = draw(st.sampled_from(["example", "example", "labels", "text", "header", "junk"]))
    if kind == "header":
        return {"questions": draw(st.just({"team": TEAM}) | JSON)}
    if kind == "junk":
        return draw(JSON)
    line = {"state" if kind != "text" else "text": draw(st.text(max_size=10) | JSON)}
    label = draw(st.sampled_from(["a", "b", 0, 1, 2, True]) | JSON)
    if kind == "labels":
        line["labels"] = draw(st.just({"team": label}) | JSON)
    elif kind == "example":
        line["question"] = draw(st.just("team") | JSON)
        line["label"] = label
    else:
        line["label"] = label
    return line


@fuzz("labelled")
@given(lines=st.lists(labelled_line(), max_size=6), default=st.sampled_from([None, "team"]))
def test_labelled_files(lines, default):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "labelled.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        try:
            examples = cal.load_labelled(path, {"team": TEAM}, default_question=default)
        except AgentBranchError as e:
            assert str(path) in str(e) or "question" in str(e)
            return
    for ex in examples:
        assert ex.question_id == "team" and ex.label in ("a", "b")
