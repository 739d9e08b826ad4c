"""A checkpoint of every question's compact state beside a JSON Lines store, so a store
of millions of labels opens in seconds.

The log stays the source of truth. The checkpoint (``<store>.state``, JSON) holds the
byte offset it covers, the SHA-256 of the log's bytes before that offset, a fingerprint
of the ``Earned`` configuration and of the code (``agentbranch`` version and
``STATE_FORMAT``), and per question its live state plus the last ``KEEP_CHUNKS`` chunks
of its window (so labels arriving late just after a restart still insert without a
replay). Opening verifies all of it (hashing the prefix reads the file once, at disk
speed) and then reads only the lines after the offset; anything that does not match is
logged at WARNING and the state is rebuilt from the log. Written atomically (a temporary
file renamed over the old one) each time ``CHECKPOINT_BYTES`` more of the log has been
read; never by a frozen ``Earned``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentbranch.policy.cells import Cells, DriftState
from agentbranch.policy.digests import DigestSet
from agentbranch.policy.trust import Event, Threshold, TrustState
from agentbranch.policy.window import Label, QuestionWindow, _Chunk

if TYPE_CHECKING:
    from agentbranch.policy.earned import Earned

log = logging.getLogger("agentbranch")

#: Bump when the statistics or the state's layout change: older checkpoints are rebuilt.
STATE_FORMAT = 2
#: Write a checkpoint each time this many more bytes of the log were read.
CHECKPOINT_BYTES = 32 << 20
#: Window chunks kept per question in a checkpoint.
KEEP_CHUNKS = 4


def fingerprint(earned: Earned) -> dict[str, Any]:
    """What the states depend on besides the log: the configuration and the code."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("agentbranch")
    except PackageNotFoundError:  # a checkout on sys.path
        release = "unknown"
    return {
        "format": STATE_FORMAT,
        "agentbranch": release,
        "precision": earned.precision,
        "level": earned.level,
        "min_evidence": earned.min_evidence,
        "candidates": list(earned.candidates),
        "start_at": earned.start_at,
        "looks": repr(earned.looks),
        "resume": earned.resume,
        "second_walk_from": earned.second_walk_from,
    }


def _b64(a: Any) -> str:
    return base64.b64encode(bytes(a)).decode("ascii")


def _state(st: TrustState) -> dict[str, Any]:
    c, d = st._cells, st._drift
    return {
        "take_at": st.take_at,
        "trust": st.trust,
        "labels": st.labels,
        "looks": st.looks,
        "audit_right": st.audit_right,
        "audit_wrong": st.audit_wrong,
        "records": st.records,
        "question_id": st.question_id,
        "last": None if st.last is None else list(st.last),
        "events": [dataclasses.asdict(e) for e in st.events],
        "extra": list(st._extra),
        "evalue": st._evalue,
        "cells": None
        if c is None
        else {
            "boundaries": list(c.boundaries),
            "n": _b64(c.n),
            "right": _b64(c.right),
            "weight": _b64(c.weight),
            "conf": _b64(c.conf),
            "in_force": [[k, v] for k, v in c.in_force.items()],
        },
        "drift": None
        if d is None
        else {
            "precision": d.precision,
            "right": d.right,
            "wrong": d.wrong,
            "evalue": d.evalue,
            "sums": d._sums,
            "started": d._started,
        },
    }


def _unstate(raw: dict[str, Any]) -> TrustState:
    st = TrustState(take_at=raw["take_at"], trust=raw["trust"])
    for name in ("labels", "looks", "audit_right", "audit_wrong", "records", "question_id"):
        setattr(st, name, raw[name])
    st.last = None if raw["last"] is None else tuple(raw["last"])
    st.events = [Event(**e) for e in raw["events"]]
    st._extra, st._evalue = tuple(raw["extra"]), raw["evalue"]
    st._pair = Threshold(st.take_at, st.trust)
    if (c := raw["cells"]) is not None:
        cells = Cells(c["boundaries"])
        for name, code in (("n", "q"), ("right", "q"), ("weight", "d"), ("conf", "d")):
            values = array(code, base64.b64decode(c[name]))
            if len(values) != len(getattr(cells, name)):
                raise ValueError("cells of another size")
            setattr(cells, name, values)
        cells.in_force = {float(k): int(v) for k, v in c["in_force"]}
        st._cells = cells
    if (d := raw["drift"]) is not None:
        drift = DriftState(d["precision"])
        drift.right, drift.wrong, drift.evalue = d["right"], d["wrong"], d["evalue"]
        drift._sums, drift._started = [float(x) for x in d["sums"]], d["started"]
        st._drift = drift
    return st


def _window(w: QuestionWindow) -> dict[str, Any]:
    import numpy as np  # here: `import agentbranch` loads no numpy

    dropped = w._chunks[:-KEEP_CHUNKS]
    seen = w.seen.to_array()
    extra = [x.id for c in dropped for x in c.labels]
    extra_dec = [
        x.decision
        for c in dropped
        for x, k in zip(c.labels, c.counted)
        if k and x.decision is not None
    ]
    from agentbranch.policy.digests import digest

    folded = np.union1d(
        seen, np.array([digest("id:" + i) for i in extra] + extra_dec, dtype=np.uint64)
    )
    return {
        "live": _state(w.live),
        "chunks": [
            {
                "start": _state(c.start),
                "labels": [
                    [
                        x.id,
                        x.time,
                        x.question_id,
                        x.band,
                        x.confidence,
                        x.correct,
                        x.rate,
                        x.take_at,
                        x.decision,
                    ]
                    for x in c.labels
                ],
                "counted": c.counted,
            }
            for c in w._chunks[-KEEP_CHUNKS:]
        ],
        "seen": _b64(folded.astype("<u8").tobytes()),
        "folded": w._folded or bool(dropped),
        "announced": sorted(list(a) for a in w._announced),
    }


def _unwindow(key: str, earned: Earned, raw: dict[str, Any]) -> QuestionWindow:
    import numpy as np  # here: `import agentbranch` loads no numpy

    w = QuestionWindow(key, earned, earned._ledger._fresh)
    chunks = []
    for c in raw["chunks"]:
        chunk = _Chunk(_unstate(c["start"]))
        for fields in c["labels"]:
            rec = Label.__new__(Label)
            (
                rec.id,
                rec.time,
                rec.question_id,
                rec.band,
                rec.confidence,
                rec.correct,
                rec.rate,
                rec.take_at,
                rec.decision,
            ) = fields
            rec.order = (rec.time, rec.id)
            chunk.labels.append(rec)
        chunk.counted = list(c["counted"])
        chunks.append(chunk)
    w._chunks = chunks
    w.live = _unstate(raw["live"])
    w._ids = {x.id for c in chunks for x in c.labels}
    w._decisions = {
        x.decision
        for c in chunks
        for x, k in zip(c.labels, c.counted)
        if k and x.decision is not None
    }
    w.seen = DigestSet.from_array(np.frombuffer(base64.b64decode(raw["seen"]), dtype="<u8"))
    w._folded = raw["folded"]
    w._announced = {tuple(a) for a in raw["announced"]}
    w._checked = len(w.live.events)
    return w


def path_for(store: Any) -> Path | None:
    """Where a store's checkpoint goes (``None``: the store has none)."""
    path = getattr(store, "path", None)
    return None if path is None or not hasattr(store, "resume") else Path(str(path) + ".state")


def save(earned: Earned) -> None:
    """Write the checkpoint of ``earned``'s states (caller holds the feed lock)."""
    store = earned.evidence
    target = path_for(store)
    if target is None:
        return
    body = {
        "fingerprint": fingerprint(earned),
        "store": store.position(),
        "windows": {k: _window(w) for k, w in earned._ledger.windows.items()},
    }
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    try:
        data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        # the store's permissions (owner-only by default), whatever the umask allows
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, getattr(store, "mode", 0o600))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except OSError as e:
        log.warning(
            "agentbranch.earned: could not write the checkpoint %s (%s); the log "
            "is complete, opening it will just take longer",
            target,
            e,
        )
        tmp.unlink(missing_ok=True)


def restore(earned: Earned) -> bool:
    """Load the checkpoint if it matches the log and the configuration (then only the
    log after it is read); ``False``: there is none or it does not match (logged)."""
    store = earned.evidence
    target = path_for(store)
    if target is None or not target.exists():
        return False
    try:
        body = json.loads(target.read_text(encoding="utf-8"))
        if body["fingerprint"] != json.loads(json.dumps(fingerprint(earned))):
            why = "it was written by another configuration or release"
        elif not store.resume(**body["store"]):
            why = "the log before its offset is not what it covered"
        else:
            why = None
        if why is None:
            windows = {k: _unwindow(k, earned, raw) for k, raw in body["windows"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = f"it is unreadable ({type(e).__name__}: {e})"
    if why is not None:
        log.warning(
            "agentbranch.earned: checkpoint %s not used: %s; the state is rebuilt from the log",
            target,
            why,
        )
        store.resume(offset=0, line=0, sha256=None)
        return False
    earned._ledger.windows = windows
    return True
