"""Background work at interpreter exit.

agentbranch's background threads are daemon threads, so they never keep a process
alive; at exit (``atexit``) each gets to finish its work in flight, up to
``EXIT_WAIT_S`` seconds in all. ``finish_at_exit`` registers a finisher, ``join_at_exit``
a thread to join after them, ``finish_first`` moves this exit work before the handlers
registered so far (each docstring says why).
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
    keep its object alive; a plain function is held as is.

    agentbranch's background threads (the coalescer's workers, a timed read's own thread,
    the audit worker) are daemon threads, so they never keep a process alive. But Python
    stops daemon threads wherever they are when it exits: one stopped inside a native
    forward (torch) aborts the process ("terminate called without an active exception"),
    and audits still queued are lost. So at exit (``atexit``, which runs before Python stops
    daemon threads) each of them gets to finish its work in flight, up to ``EXIT_WAIT_S``
    seconds in all: first the audit worker (its teacher may still read through an engine),
    then the coalescers (each stops taking batches and waits for its workers), then timed
    reads, then engine workers (vLLM's: the reads already handed to vLLM), last every thread
    registered with ``join_at_exit`` that still runs (a timed read, a coalescer worker ending
    by itself). Whatever is still running after that is left.
    """
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
    deadline, if it is still running then (why: below). For
    threads that end by themselves; one that waits for work forever would only use up
    the deadline. Holds the thread weakly.

    Why threads are joined last: a worker that ends by itself (a coalescer's worker idle too long, a
    timed read's thread once it has answered) may hold the last reference to a reader, and
    then it is the thread that frees the model, after its work is done. torch frees a tensor
    in native code that lets go of the GIL and takes it back; if Python started finalizing
    meanwhile, taking the GIL back ends the thread (``pthread_exit``) inside that native
    frame, and the C++ runtime aborts the process. A finisher cannot see such a thread (its
    object is being freed, so its weakly held finisher is gone): so its thread is joined
    here, until it has really ended.
    """
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
    """Run agentbranch's exit work before every ``atexit`` handler registered so far.

    ``atexit`` runs the handler registered last first. A library that shuts down at exit
    what a read in flight still uses (vLLM's ``LLM``: its engine core is freed by a
    ``weakref.finalize``, which hooks into ``atexit`` when the first ``LLM`` is built, after
    ``import agentbranch``) would pull it from under the read: the read fails, or the
    process aborts. ``finish_first()`` moves agentbranch's exit work before the handlers
    registered so far; ``VLLMReader`` calls it once its ``LLM`` exists.
    """
    atexit.unregister(_finish_all)
    atexit.register(_finish_all)


atexit.register(_finish_all)
