"""Readers: turn read requests into label logprobs, batched. Import concrete readers
from their modules (``agentbranch.engine.readers.transformers`` ...) or from
``agentbranch``; heavy dependencies (torch, vllm, httpx) load only when used."""

from agentbranch.engine.readers.base import Reader
from agentbranch.engine.readers.scripted import ScriptedReader

__all__ = ["Reader", "ScriptedReader"]
