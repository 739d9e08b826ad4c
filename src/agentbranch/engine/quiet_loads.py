"""transformers' progress bars and chatter held back for the loads the library makes.

The library never prints: :func:`quiet_loads` holds back bars and records below ERROR
for the calling thread only; the user's settings are never changed.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["quiet_loads"]

_lock = threading.Lock()
#: Thread ident -> how many quiet blocks it is inside.
_quiet: Counter[int] = Counter()
#: What the first block replaced, restored by the last: the previous hook, the handlers
#: filtered.
_saved: dict[str, Any] = {}


def _keep(record: logging.LogRecord) -> bool:
    """The handlers' filter while a quiet block is open: drops transformers' records below
    ERROR logged by a thread inside one (a handler shared with others keeps theirs)."""
    return (
        record.levelno >= logging.ERROR
        or record.thread not in _quiet
        or not record.name.startswith("transformers")
    )


def _hook(factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """transformers' tqdm hook while a quiet block is open: an empty bar for the threads
    inside one, the previous hook's (or transformers' own) bar for every other."""
    if threading.get_ident() in _quiet:
        from transformers.utils.logging import EmptyTqdm

        return EmptyTqdm(*args, **kwargs)
    previous = _saved.get("previous")
    if previous is not None:
        return previous(factory, args, kwargs)
    return factory(*args, **kwargs)


@contextmanager
def quiet_loads() -> Iterator[None]:
    """No transformers progress bar and no transformers record below ERROR from this
    thread for the block; other threads and the user's settings are untouched
    (transformers' own switches are process-wide: ``_hook`` and ``_keep`` ask
    which thread is inside a block, and the last block to close takes them out)."""
    from transformers.utils import logging as hf_logging

    me = threading.get_ident()
    with _lock:
        if not _quiet:
            _saved["handlers"] = list(logging.getLogger("transformers").handlers)
            for handler in _saved["handlers"]:
                handler.addFilter(_keep)
            # set_tqdm_hook (transformers >= 5.11) returns the hook it replaces; ours wraps it.
            _saved["previous"] = hf_logging.set_tqdm_hook(_hook)
        _quiet[me] += 1
    try:
        yield
    finally:
        with _lock:
            _quiet[me] -= 1
            if _quiet[me] <= 0:
                del _quiet[me]
            if not _quiet:
                for handler in _saved.pop("handlers", []):
                    handler.removeFilter(_keep)
                current = hf_logging.set_tqdm_hook(_saved.pop("previous", None))
                if current is not _hook:  # someone set a hook of their own meanwhile: keep it
                    hf_logging.set_tqdm_hook(current)
