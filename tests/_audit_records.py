"""Audit records for the report, calibration and CLI tests: a choice question whose
engine put ``top`` on 'billing', and files of them."""

from __future__ import annotations

import json
import random
from pathlib import Path

from agentbranch.audit import calibrate_from_audit
from agentbranch.calibration import apply_temperature
from agentbranch.core.decisions import confidence_from

OPTIONS = ["billing", "outage", "bug"]
SPEC = {
    "type": "choice",
    "instructions": "Which team?",
    "criteria": {"billing": None, "outage": None, "bug": None},
}


def record(top: float, agree: bool, *, kind="audit", rate=0.1, qid="team", temperature=1.0):
    """An audit record whose engine put ``top`` on 'billing'."""
    probs = {"billing": top, "outage": (1 - top) * 0.7, "bug": (1 - top) * 0.3}
    return {
        "kind": kind,
        "id": f"{random.random()}",
        "question_id": qid,
        "type": "choice",
        "options": OPTIONS,
        "probabilities": probs,
        "confidence": confidence_from(list(probs.values())),
        "band": "take" if kind == "audit" else "fallback",
        "decided_by": "engine" if kind == "audit" else "fallback",
        "engine_label": "billing",
        "teacher_label": "billing" if agree else "outage",
        "agree": agree,
        "rate": rate if kind == "audit" else 1.0,
        "temperature": temperature,
        "take_at": 0.5,
        "spec": SPEC,
    }


def overconfident_records(n: int, seed: int = 0, temperature: float = 1.0) -> list[dict]:
    """An engine that says 0.9-0.99 while the teacher agrees only ~70% of the time."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        top = rng.uniform(0.9, 0.99)
        agree = rng.random() < 0.7
        rec = record(top, agree, kind="audit" if rng.random() < 0.7 else "fallback")
        if temperature != 1.0:  # as an engine calibrated with T would have logged it
            probs = apply_temperature([rec["probabilities"][o] for o in OPTIONS], temperature)
            rec["probabilities"] = dict(zip(OPTIONS, probs))
            rec["confidence"] = confidence_from(probs)
            rec["temperature"] = temperature
        out.append(rec)
    return out


def audits_file(tmp_path: Path, n: int = 200, seed: int = 0) -> Path:
    rng = random.Random(seed)
    recs = [record(p := rng.uniform(0.4, 0.99), rng.random() < p) for _ in range(n)]
    path = tmp_path / "audits.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def worse_audits(tmp_path: Path) -> Path:
    """30 records of a calibrated engine: a fit on 21 of them (split seed 0) makes the
    other 9 worse by ECE and Brier alike (found by trying data seeds)."""
    path = audits_file(tmp_path, 30, seed=6)
    report = calibrate_from_audit(path, seed=0)
    assert report.worse and report.after.ece > report.before.ece
    assert report.after.brier > report.before.brier
    return path
