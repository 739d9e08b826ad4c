"""A checkpoint of every question's state beside a JSON Lines store (``<store>.state``),
so a store of millions of labels opens in seconds; the log stays the source of truth.

It holds the offset it covers, the SHA-256 of the log before it, a fingerprint of the
configuration and code, and every question's window; one that does not match is logged
(WARNING) and the state rebuilt from the log. Written atomically every
``CHECKPOINT_BYTES`` read.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from agentbranch.policy.earned._state import Ledger, QuestionWindow, Settings
from agentbranch.policy.earned._stores import EvidenceStore

log = logging.getLogger("agentbranch")

#: Bump when the statistics or the state's layout change: older checkpoints are rebuilt.
STATE_FORMAT = 2
#: Write a checkpoint each time this many more bytes of the log were read.
CHECKPOINT_BYTES = 32 << 20
#: Window chunks kept per question in a checkpoint.
KEEP_CHUNKS = 4


def fingerprint(earned: Settings) -> dict[str, Any]:
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
        "second_walk_from": earned.second_walk_from,
    }


def path_for(store: EvidenceStore) -> Path | None:
    """Where a store's checkpoint goes (``None``: the store has none)."""
    return Path(f"{store.path}.state") if store.resumable and store.path is not None else None


def save(earned: Settings, ledger: Ledger) -> None:
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


def restore(earned: Settings, ledger: Ledger) -> bool:
    """Load the checkpoint if it matches the log and the configuration (then only the
    log after it is read); ``False``: there is none or it does not match (logged)."""
    store = earned.evidence
    target = path_for(store)
    if target is None or not target.exists():
        return False
    try:
        body, why = json.loads(target.read_text(encoding="utf-8")), None
        if body["fingerprint"] != json.loads(json.dumps(fingerprint(earned))):
            why = "it was written by another configuration or release"
        elif not store.resume(**body["store"]):
            why = "the log before its offset is not what it covered"
        else:
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
    "fingerprint",
    "restore",
    "save",
]
