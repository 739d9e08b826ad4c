"""Old import paths that still work, for a while: a module that moved leaves a forwarding
module behind.

``forward("agentbranch.state", "agentbranch.core.state")`` is the ``__getattr__`` of the old
module: every name the new module has is found through it, with a ``DeprecationWarning``
that says where to import it from now and the release that removes the old path
(``since``: the release that moved it; ``removal``: the one that removes it, like
LangGraph's ``since``/``expected_removal``). Nothing is copied, so the objects are the
very same.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["REMOVAL", "SINCE", "forward", "names"]

#: The release that moved the forwarded paths, and the one that removes them.
SINCE = "0.1"
REMOVAL = "0.3"


def forward(
    old: str, new: str, *, since: str = SINCE, removal: str = REMOVAL
) -> Callable[[str], Any]:
    """The module ``__getattr__`` for ``old``, which moved to ``new`` in agentbranch
    ``since`` and is removed in agentbranch ``removal``."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):  # __path__, __all__ probes by import machinery and tools
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(new), name)  # AttributeError if it is gone
        warnings.warn(
            f"{old} moved to {new} in agentbranch {since}: import {name} from {new} "
            f"({old} is removed in agentbranch {removal})",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    return __getattr__


def names(new: str) -> Callable[[], list[str]]:
    """The module ``__dir__`` for a forwarding module: the names of ``new``."""
    return lambda: sorted(n for n in dir(importlib.import_module(new)) if not n.startswith("_"))
