"""``FakeToolCallingModel``: a scripted chat model that ``create_agent`` can bind tools to."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import Field, model_validator

from agentbranch.core.errors import ConfigurationError

__all__ = ["FakeToolCallingModel"]


class FakeToolCallingModel(GenericFakeChatModel):
    """A scripted chat model for agent tests, offline: each call answers with the next of
    ``responses`` (an ``AIMessage`` — one with ``tool_calls`` proposes those calls — or a
    string), and ``bind_tools`` works, as ``create_agent`` needs.

    Binding changes nothing (the model answers from its script); the tool names of each
    binding are recorded in ``bound_tools`` (one list per call of ``bind_tools``) and the
    messages of each call in ``received``. Running out of responses is a clear error.

        model = FakeToolCallingModel(responses=[
            AIMessage("", tool_calls=[{"name": "shell", "args": {"cmd": "ls"}, "id": "c1"}]),
            "Done.",
        ])
        agent = create_agent(model, tools=[shell], middleware=[...])
    """

    responses: list[Any]
    bound_tools: list[list[str]] = Field(default_factory=list)
    received: list[list[Any]] = Field(default_factory=list)
    messages: Any = None

    @model_validator(mode="after")
    def _script(self) -> FakeToolCallingModel:
        for r in self.responses:
            if not isinstance(r, AIMessage | str):
                raise TypeError(
                    f"FakeToolCallingModel responses are AIMessages or strings, got {r!r}"
                )
        self.messages = iter(list(self.responses))
        return self

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeToolCallingModel:
        self.bound_tools.append([_tool_name(t) for t in tools])
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any):
        self.received.append(list(messages))
        try:
            return super()._generate(messages, stop, run_manager, **kwargs)
        except StopIteration:
            raise ConfigurationError(
                f"FakeToolCallingModel was called {len(self.received)} times but has "
                f"{len(self.responses)} response(s); script one response per model call"
            ) from None

    @property
    def _llm_type(self) -> str:
        return "agentbranch-fake-tool-calling"


def _tool_name(tool: Any) -> str:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    if isinstance(tool, dict) and "name" in tool:
        return str(tool["name"])
    return str(convert_to_openai_tool(tool)["function"]["name"])
