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

import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol

from agentbranch.policy.earned._state import Ledger, QuestionWindow, Source
from agentbranch.policy.earned._stores import EvidenceStore


class Configured(Source, Protocol):
    """What a checkpoint depends on besides the log: the settings states are made with."""

    min_evidence: int
    evidence: EvidenceStore


log = logging.getLogger("agentbranch")

#: Bump when the statistics or the state's layout change: older checkpoints are rebuilt.
STATE_FORMAT = 2
#: Write a checkpoint each time this many more bytes of the log were read.
CHECKPOINT_BYTES = 32 << 20
#: Window chunks kept per question in a checkpoint.
KEEP_CHUNKS = 4


def fingerprint(earned: Configured) -> dict[str, Any]:
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


def path_for(store: EvidenceStore) -> Path | None:
    """Where a store's checkpoint goes (``None``: the store has none)."""
    if not store.resumable or store.path is None:
        return None
    return Path(str(store.path) + ".state")


def save(earned: Configured, ledger: Ledger) -> None:
    """Write the checkpoint of ``ledger``'s states (caller holds the feed lock)."""
    store = earned.evidence
    target = path_for(store)
    if target is None:
        return
    body = {
        "fingerprint": fingerprint(earned),
        "store": store.position(),
        "windows": {k: w.to_dict(KEEP_CHUNKS) for k, w in ledger.windows.items()},
    }
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    try:
        data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        # the store's permissions (owner-only by default), whatever the umask allows
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, store.mode)
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


def restore(earned: Configured, ledger: Ledger) -> bool:
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
            windows = {
                k: QuestionWindow.from_dict(k, earned, ledger.fresh, raw)
                for k, raw in body["windows"].items()
            }
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
    ledger.windows = windows
    return True


__all__ = [
    "CHECKPOINT_BYTES",
    "KEEP_CHUNKS",
    "STATE_FORMAT",
    "fingerprint",
    "path_for",
    "restore",
    "save",
]
