"""Decision identity: which teacher labels are labels of the same decision.

``Earned`` counts one label per decision, so every decision an ``Earned`` policy makes
carries an identity (``decision_id`` in its record, ``decision`` in its evidence):
``decision_identity`` builds it (what it hashes and why: its docstring), and
``langgraph_thread`` finds the LangGraph thread that scopes it.
"""

from __future__ import annotations

import hashlib
import json


def langgraph_thread() -> str | None:
    """The thread id of the LangGraph run this call is part of (``None`` outside a run,
    or when the run has no thread)."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except Exception:  # noqa: BLE001 - outside a runnable context (RuntimeError) or no langgraph
        return None
    thread = (config.get("configurable") or {}).get("thread_id")
    return None if thread is None else str(thread)


def decision_identity(question_id: str, state_text: str, thread: str | None = None) -> str:
    """The identity of the decision on ``question_id`` about ``state_text`` (the rendered
    state the engine read) in LangGraph thread ``thread``.

    A node retried after a later failure, a graph resumed or re-invoked on the same thread,
    a queue that delivers a message twice: each runs the same decision again, and its
    teacher label would be evidence again. ``Earned`` counts one label per decision, so
    every decision an ``Earned`` policy makes carries an identity (``decision_id`` in its
    record, ``decision`` in its evidence):

        sha256(question id, LangGraph thread id (when the run has one), rendered state)

    * Inside a LangGraph run with a checkpointer, the thread (``configurable.thread_id``)
      scopes it: within one thread the same question asked of the same rendered state is
      one decision, however often the node runs (retries, resumes, replays and forks keep
      the thread; a re-invocation with the same input too). The node and its task id are
      deliberately not part of it: a task id changes on every re-invocation, and two nodes
      asking the same question of the same text get the same confidence and the same
      teacher answer, which is one observation, not two.
    * Without a thread (no checkpointer, or outside LangGraph), the question and the
      rendered state alone: every repeat of the same text counts once.

    Genuine repeats of the same text (another user in another thread sending the same
    words) count again across threads, because the guarantee is about the decisions the
    service takes, where a frequent text weighs as often as it comes. Within one thread, or
    without threads, a repeat cannot be told from a redelivery, so it counts once: the
    label is not lost, it is not counted twice (a duplicate would make 25 labels look like
    50 and open trust 25 do not show). The price is that without threads the test is about
    distinct texts: a text that comes often and is often wrong weighs once.
    """
    blob = json.dumps([question_id, thread, state_text], ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


__all__ = [
    "decision_identity",
    "langgraph_thread",
]
