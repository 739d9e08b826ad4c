"""The public API does not move: every name users import today stays importable there.

``public_api.json`` lists, per public module, the names it exported before the layout
change (its ``__all__`` and the agentbranch classes and functions it offered). Moving code
between folders must keep each of them importable from the same module, by re-exports
where the code moved. A name leaves this list only by a deliberate API change.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

PUBLIC = json.loads((Path(__file__).with_name("public_api.json")).read_text())


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_name_is_still_importable(module):
    imported = importlib.import_module(module)
    missing = [name for name in PUBLIC[module] if not hasattr(imported, name)]
    assert missing == [], f"{module} no longer exports {missing}"


@pytest.mark.parametrize("module", sorted(m for m in PUBLIC if m.count(".") <= 1))
def test_all_names_only_what_exists(module):
    imported = importlib.import_module(module)
    for name in getattr(imported, "__all__", ()):
        assert hasattr(imported, name), f"{module}.__all__ names {name!r}, which is not there"


def test_the_public_faces_are_the_integration_objects():
    # The old import paths re-export the very objects, not copies.
    import agentbranch.langchain
    import agentbranch.langgraph
    import agentbranch.middleware
    from agentbranch.integrations import langchain, langgraph

    assert agentbranch.langgraph.DecisionRouter is langgraph.DecisionRouter
    assert agentbranch.langchain.decision_tool is langchain.decision_tool
    assert agentbranch.langchain.ToolGateMiddleware is agentbranch.middleware.ToolGateMiddleware
