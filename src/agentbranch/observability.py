"""Where resolved decision records go besides graph state.

Every decision is logged once. Used directly, the engine logs one ``agentbranch.decision``
event per answer (stdlib ``logging``, logger ``"agentbranch"``, see ``agentbranch.logs``);
under a policy (routers, nodes, the tool) the engine stays quiet and, once the policy has
resolved the decision, ``emit`` sends its record (never the raw state unless
``include_state=True``) to:

* the ``"agentbranch"`` logger: the ``agentbranch.decision`` event, with band and decided_by;
* LangGraph's custom stream, when running inside a graph node
  (``graph.stream(..., stream_mode="custom")`` yields ``{"agentbranch.decision": record}``);
* LangChain callbacks, as the custom event ``"agentbranch.decision"``
  (``on_custom_event`` handlers, ``astream_events`` ``on_custom_event``).

Outside a graph or a traced run the last two are skipped silently.
"""

from __future__ import annotations

import logging
from typing import Any

from agentbranch import logs

log = logging.getLogger("agentbranch")

EVENT = "agentbranch.decision"


def _payload(record: dict[str, Any], state: Any, include_state: bool) -> dict[str, Any]:
    payload = dict(record)
    if include_state:
        from agentbranch.state import render_state

        payload["state"] = render_state(state)
    return payload


def _log(record: dict[str, Any]) -> None:
    logs.event(
        log,
        logging.INFO,
        EVENT,
        question_id=record.get("question_id"),
        type=record.get("type"),
        label=record.get("label"),
        probabilities=record.get("probabilities"),
        entropy=record.get("entropy"),
        confidence=record.get("confidence"),
        label_mass=record.get("label_mass"),
        band=record.get("band"),
        decided_by=record.get("decided_by"),
        goto=record.get("goto"),
        reader=record.get("reader"),
        model=record.get("model"),
        latency_s=record.get("latency_s"),
    )


def _stream(payload: dict[str, Any]) -> None:
    try:
        from langgraph.config import get_stream_writer

        writer = get_stream_writer()
    except Exception:  # not inside a LangGraph run (or langgraph missing)
        return
    writer({EVENT: payload})


def emit(
    record: dict[str, Any],
    *,
    config: Any = None,
    state: Any = None,
    include_state: bool = False,
) -> None:
    """Log, stream and dispatch one resolved record (sync contexts)."""
    _log(record)
    payload = _payload(record, state, include_state)
    _stream(payload)
    try:
        from langchain_core.callbacks.manager import dispatch_custom_event

        dispatch_custom_event(EVENT, payload, config=config)
    except RuntimeError:  # no parent run: nobody is listening
        pass


async def aemit(
    record: dict[str, Any],
    *,
    config: Any = None,
    state: Any = None,
    include_state: bool = False,
) -> None:
    """Log, stream and dispatch one resolved record (async contexts)."""
    _log(record)
    payload = _payload(record, state, include_state)
    _stream(payload)
    try:
        from langchain_core.callbacks.manager import adispatch_custom_event

        await adispatch_custom_event(EVENT, payload, config=config)
    except RuntimeError:
        pass
