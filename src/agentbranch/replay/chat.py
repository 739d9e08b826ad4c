"""``CassetteCache``: LangChain's cache interface backed by a cassette.

Attach it to any LangChain chat model (``cache=cassette.chat_cache``) and its calls are
recorded and replayed with the run's decisions, as the cassette's record mode says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache

if TYPE_CHECKING:
    from agentbranch.replay._cassette_protocol import CassetteStore


class CassetteCache(BaseCache):
    """A ``BaseCache`` whose entries are the cassette's chat exchanges."""

    def __init__(self, cassette: CassetteStore) -> None:
        self.cassette = cassette

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        mode = self.cassette.mode
        if mode == "passthrough":
            return None
        hit = self.cassette.lookup_chat(prompt, llm_string)  # mode all: None, a repeat counted
        if hit is None and mode == "none":
            raise self.cassette.chat_miss(prompt, llm_string)
        return hit

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        self.cassette.record_chat(prompt, llm_string, list(return_val))

    def clear(self, **kwargs: Any) -> None:
        """Forget the cassette's chat exchanges (the file is rewritten without them)."""
        self.cassette.clear_chats()

    # No I/O worth a thread: the async path calls the same code directly.
    async def alookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        return self.lookup(prompt, llm_string)

    async def aupdate(self, prompt: str, llm_string: str, return_val: Sequence[Any]) -> None:
        self.update(prompt, llm_string, return_val)

    async def aclear(self, **kwargs: Any) -> None:
        self.clear(**kwargs)

    def __repr__(self) -> str:
        return f"CassetteCache({self.cassette!r})"


__all__ = ["CassetteCache"]
