"""The embeddings of the states a reader read most recently: a state read again soon (a
learned version on trial reading the state a teacher just labelled, moments after the
decision read it) is not embedded again."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

#: States kept (the most recently read).
STATES_KEPT = 64


class RecentStates:
    """Each recent state's embedding and whether it holds readable text."""

    def __init__(self, size: int = STATES_KEPT) -> None:
        self.size = size
        self._kept: OrderedDict[str, tuple[Any, bool]] = OrderedDict()

    def fresh(self, states: list[str]) -> list[str]:
        """The states of ``states`` not kept (each once, in order): to embed."""
        return [s for s in dict.fromkeys(states) if s not in self._kept]

    def read(
        self, states: list[str], fresh: list[str], embedded: Any, flags: list[bool], torch: Any
    ) -> tuple[Any, list[bool]]:
        """The embeddings and readability of ``states``: the ``fresh`` ones just
        embedded (the first rows of ``embedded``, ``flags``), the others as kept; the
        fresh ones kept from now on."""
        got = {s: self._kept[s] for s in states if s in self._kept}
        for i, s in enumerate(fresh):
            got[s] = (embedded[i].clone(), flags[i])
        for s in states:
            self._kept[s] = got[s]
            self._kept.move_to_end(s)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
        if not states:
            return embedded[:0], []
        return torch.stack([got[s][0] for s in states]), [got[s][1] for s in states]

    def clear(self) -> None:
        self._kept.clear()


__all__ = ["STATES_KEPT", "RecentStates"]
