"""Labels lost to a store that cannot be written (a full disk, a read-only remount):
serving goes on, and one ``LabelLoss`` per store (keyed by its ``repr``) counts them,
logging one ERROR per burst of losses and one WARNING when the store is written again
(``labels_lost()``, the ``agentbranch.labels.lost`` metric).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.errors import AgentBranchError, ConfigurationError

__all__ = ["LabelLostError", "append_counted", "labels_lost"]

log = logging.getLogger("agentbranch")


class LabelLostError(AgentBranchError, OSError):
    """A label was not stored (already counted and logged by its store's ``LabelLoss``)."""


class LabelLoss:
    """The labels one store lost: ``total`` ever, ``burst`` since the last one stored."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.total = 0
        self.burst = 0
        self._lock = threading.Lock()

    def failed(self, question_id: str, error: BaseException) -> LabelLostError:
        """Count one lost label; the error to raise to the caller."""
        with self._lock:
            self.total += 1
            self.burst += 1
            first = self.burst == 1
        telemetry.label_lost(question_id)
        why = f"{type(error).__name__}: {error}"
        if first:
            log.error(
                "agentbranch.earned: evidence store %s cannot be written (%s): teacher labels "
                "are being lost until it can (serving goes on; thresholds learn nothing "
                "new). Free space or make the store writable; lost labels are counted "
                "(agentbranch.labels.lost, labels_lost()), this is logged once per burst",
                self.where,
                why,
            )
        return LabelLostError(f"evidence store {self.where}: label not stored ({why})")

    def stored(self, question_id: str, label: bool = True) -> None:
        """Count one stored label (ending a burst of losses, if one was going on);
        ``label=False``: a stored record that is no new label ends the burst only."""
        if label:
            telemetry.label_stored(question_id)
        if not self.burst:  # the usual case: no lock taken
            return
        with self._lock:
            lost, self.burst = self.burst, 0
        if lost:
            log.warning(
                "agentbranch.earned: evidence store %s is written again; %d label(s) were "
                "lost while it could not be (%d in all since the process started)",
                self.where,
                lost,
                self.total,
            )


def append_counted(store: Any, rec: Any, label: bool = True) -> None:
    """``store.append([rec])``, counted: stored, or lost (``LabelLostError``) when the
    store cannot be written (a ``ConfigurationError`` raises as it is). ``label=False``:
    a record that is no new teacher label (its loss still counts, its storing does not)."""
    loss = loss_for(store)
    try:
        store.append([rec])
    except ConfigurationError:
        raise  # not an evidence store: the caller is told
    except Exception as e:  # noqa: BLE001 - a full disk, a read-only store: counted
        raise loss.failed(rec.question_id, e) from None
    loss.stored(rec.question_id, label)


_losses: dict[str, LabelLoss] = {}


def loss_for(store: Any) -> LabelLoss:
    """The ``LabelLoss`` of ``store`` (one per store this process writes)."""
    where = repr(store)
    return _losses.get(where) or _losses.setdefault(where, LabelLoss(where))  # (atomic)


def labels_lost(store: Any = None) -> int:
    """Labels this process could not store: in ``store`` (an evidence store, an ``Earned``,
    a LangGraph ``BaseStore`` or a JSON Lines path), or in every store when ``None``."""
    if store is None:
        return sum(loss.total for loss in list(_losses.values()))
    found = _losses.get(_store_name(store))
    return 0 if found is None else found.total


def _store_name(store: Any) -> str:
    """The name ``loss_for`` counts ``store``'s losses under (the store's ``repr``)."""
    from agentbranch.policy.earned._any_store import as_store
    from agentbranch.policy.earned._stores import EvidenceStore

    if isinstance(store, str | os.PathLike):
        return f"JsonlEvidenceStore({str(store)!r})"  # that store's repr (nothing opened)
    if not isinstance(store, EvidenceStore):
        try:
            store = store.evidence  # an ``Earned``: its store
        except AttributeError:
            store = as_store(store)  # a LangGraph store, or a clear error
    return repr(store)
