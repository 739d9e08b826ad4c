"""Where resolved decision records go besides graph state.

Every decision is logged once: under a policy (routers, nodes, the tool, the middleware)
the engine stays quiet and ``emit_all`` sends each resolved record (never the raw state
unless ``include_state=True``) to the ``"agentbranch"`` logger (the ``agentbranch.decision``
event), LangGraph's custom stream (``{"agentbranch.decision": record}``) and LangChain
callbacks (the custom event ``"agentbranch.decision"``); the last two only inside a graph
or a traced run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from agentbranch.core import _telemetry as telemetry
from agentbranch.core.state import render_state

__all__ = ["EVENT", "NO_HANDLERS", "aemit_all", "emit_all"]

log = logging.getLogger("agentbranch")

EVENT = "agentbranch.decision"

#: Set in a config by a caller that has just found no callback handler for it (a node's
#: fast path): ``emit_all`` then skips building the callback manager a second time (about
#: 30 µs a node call). Never passed on to other runnables.
NO_HANDLERS = "__agentbranch_no_handlers"

#: The record's fields the log event carries, in order.
_LOGGED = (
    "question_id type label probabilities entropy confidence label_mass band take_at trust "
    "decided_by goto reader model latency_s"
).split()


def _callbacks(config: Any, *, is_async: bool) -> Any:
    """The callback manager custom events go to, or ``None`` when no handler would see
    them (no parent run, or no handlers): dispatching would build it for nothing."""
    from langchain_core.runnables.config import (
        ensure_config,
        get_async_callback_manager_for_config,
        get_callback_manager_for_config,
    )

    if isinstance(config, dict) and config.get(NO_HANDLERS):
        return None
    get = get_async_callback_manager_for_config if is_async else get_callback_manager_for_config
    manager = get(ensure_config(config))
    if manager.parent_run_id is None or not manager.handlers:
        return None
    return manager


def _logged_and_streamed(
    records: Iterable[dict[str, Any]], state: Any, include_state: bool
) -> list[dict[str, Any]]:
    """Log each record and write it to the custom stream; the payloads to dispatch."""
    records = list(records)
    telemetry.decisions(records)
    try:  # the running node's custom-stream writer
        from langgraph.config import get_stream_writer

        writer = get_stream_writer()
    except Exception:  # not inside a LangGraph run (or langgraph missing)
        writer = None
    logged = log.isEnabledFor(logging.INFO)
    payloads = []
    for record in records:
        if logged:
            telemetry.event(log, logging.INFO, EVENT, **{k: record.get(k) for k in _LOGGED})
        payload = dict(record)
        if include_state:
            payload["state"] = render_state(state)
        if writer is not None:
            writer({EVENT: payload})
        payloads.append(payload)
    return payloads


def emit_all(
    records: Iterable[dict[str, Any]],
    *,
    config: Any = None,
    state: Any = None,
    include_state: bool = False,
) -> None:
    """Log, stream and dispatch resolved records (sync contexts), one event per record.
    The stream writer and callback manager are looked up once for all of them."""
    payloads = _logged_and_streamed(records, state, include_state)
    manager = _callbacks(config, is_async=False)
    for payload in payloads if manager is not None else ():
        manager.on_custom_event(EVENT, payload, run_id=manager.parent_run_id)


async def aemit_all(
    records: Iterable[dict[str, Any]],
    *,
    config: Any = None,
    state: Any = None,
    include_state: bool = False,
) -> None:
    """Log, stream and dispatch resolved records (async contexts), one event per record."""
    payloads = _logged_and_streamed(records, state, include_state)
    manager = _callbacks(config, is_async=True)
    for payload in payloads if manager is not None else ():
        await manager.on_custom_event(EVENT, payload, run_id=manager.parent_run_id)
