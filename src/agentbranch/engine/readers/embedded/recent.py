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

    def peek(self, texts: list[str], fresh: list[str], embedded: Any, torch: Any) -> Any:
        """The embeddings of ``texts``: the ``fresh`` ones just embedded (the rows of
        ``embedded``), the others as kept; nothing kept or moved (other texts than
        states, e.g. a fit's labelled states, leave the recent states as they were)."""
        if not texts:
            return embedded[:0]
        new = dict(zip(fresh, embedded))
        return torch.stack([new[t] if t in new else self._kept[t][0] for t in texts])

    def clear(self) -> None:
        self._kept.clear()


__all__ = ["STATES_KEPT", "RecentStates"]
