"""Background work at interpreter exit.

agentbranch's background threads are daemon threads, so they never keep a process alive.
But Python stops daemon threads wherever they are when it exits: one stopped inside a
native forward (torch) aborts the process, and queued audits are lost. So at exit
(``atexit`` runs before that) each gets to finish its work in flight, up to
``EXIT_WAIT_S`` seconds in all, in ``order``: the audit worker (its teacher may still read
through an engine), the coalescers, timed reads, engine workers, then the threads given
to ``join_at_exit``. Whatever still runs after that is left.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

__all__ = [
    "EXIT_WAIT_S",
    "AUDITS",
    "COALESCERS",
    "READS",
    "ENGINES",
    "finish_at_exit",
    "finish_first",
    "join_at_exit",
]

#: At interpreter exit, how long (in all) background work gets to finish.
EXIT_WAIT_S = 10.0

#: The order in which work finishes at exit.
AUDITS, COALESCERS, READS, ENGINES = 0, 1, 2, 3

_lock = threading.Lock()
_finishers: list[tuple[int, Callable[[], Callable[[float], Any] | None]]] = []
# A running thread is held by ``threading`` itself, so a weak set loses a thread only
# once it has ended and nobody else holds its object.
_threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def finish_at_exit(finish: Callable[[float], Any], *, order: int) -> None:
    """Call ``finish(deadline)`` at interpreter exit (``deadline``: a ``time.monotonic()``
    value it must not wait past). A bound method is held weakly, so registering does not
    keep its object alive; a plain function is held as is."""
    ref: Callable[[], Callable[[float], Any] | None]
    if hasattr(finish, "__self__"):
        ref = weakref.WeakMethod(finish)  # type: ignore[arg-type]
    else:
        ref = lambda: finish  # noqa: E731 - a strong "reference" with the same call shape
    with _lock:
        _finishers[:] = [(o, r) for o, r in _finishers if r() is not None]
        _finishers.append((order, ref))


def join_at_exit(thread: threading.Thread) -> None:
    """Join ``thread`` at interpreter exit, after every finisher and within the same
    deadline, if it still runs then; for threads that end by themselves. Holds the thread
    weakly.

    Why: a worker ending by itself may hold the last reference to a reader and free the
    model; torch frees a tensor in native code that lets go of the GIL, and if Python
    started finalizing meanwhile, taking it back ends the thread inside that native frame
    and the process aborts. No finisher sees such a thread (its object is being freed)."""
    with _lock:
        _threads.add(thread)


def _finish_all() -> None:
    deadline = time.monotonic() + EXIT_WAIT_S
    with _lock:
        finishers = sorted(_finishers, key=lambda item: item[0])
    for _, ref in finishers:
        finish = ref()
        if finish is not None:
            finish(deadline)
    with _lock:
        threads = [t for t in _threads if t is not threading.current_thread()]
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def finish_first() -> None:
    """Run agentbranch's exit work before every ``atexit`` handler registered so far
    (``atexit`` runs the last registered first): a library that frees at exit what a read
    in flight still uses (vLLM's ``LLM``, through a ``weakref.finalize`` hooked in when the
    first ``LLM`` is built) would pull it from under the read. ``VLLMReader`` calls it."""
    atexit.unregister(_finish_all)
    atexit.register(_finish_all)


atexit.register(_finish_all)
