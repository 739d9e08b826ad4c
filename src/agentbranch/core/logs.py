"""Logging: stdlib ``logging`` under the ``"agentbranch"`` logger, silent by default.

The package installs a ``NullHandler`` on ``logging.getLogger("agentbranch")`` (as
langchain_core does for its loggers) and never configures handlers, levels or formats:
nothing is written unless the application configures logging, and
``logging.disable(...)`` or a level on ``"agentbranch"`` silences it like any library.

Events are structlog-shaped: ``event(logger, level, "agentbranch.decision", **fields)``
logs a readable message (``agentbranch.decision question_id=team label=billing ...``)
and passes the fields as ``extra=``, so they are attributes of the ``LogRecord``
(``record.question_id``, ``record.event``). An application that routes stdlib records
through structlog (``structlog.stdlib.ProcessorFormatter`` with
``structlog.stdlib.ExtraAdder()`` in its ``foreign_pre_chain``) gets the event name and
every field as key/values. See docs/langgraph.md ("Decision log").
"""

from __future__ import annotations

import logging
from typing import Any

#: The package logger; modules log through it or its children (``agentbranch.canvas``).
logger = logging.getLogger("agentbranch")


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_show(v)}" for k, v in value.items()) + "}"
    text = str(value)
    return repr(text) if not text or any(c.isspace() for c in text) else text


def event(log: logging.Logger, level: int, name: str, /, **fields: Any) -> None:
    """Log the structlog-style event ``name`` with key/value ``fields`` (``None``
    values are left out of the message but kept on the record)."""
    if not log.isEnabledFor(level):
        return
    shown = " ".join(f"{k}={_show(v)}" for k, v in fields.items() if v is not None)
    log.log(level, "%s %s", name, shown, extra={"event": name, **fields}, stacklevel=2)


__all__ = ["event", "logger"]
