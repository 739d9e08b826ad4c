"""Every Python snippet of docs/langchain.md runs, in order, in one namespace; a snippet
followed by a ```text block must print exactly that."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "langchain.md"
BLOCK = re.compile(r"```(python|text)\n(.*?)```", re.DOTALL)


def snippets() -> list[tuple[str, str | None]]:
    """(code, expected output or None) for each python block."""
    blocks = [(m.group(1), m.group(2), m.start(), m.end()) for m in BLOCK.finditer(DOC.read_text())]
    doc = DOC.read_text()
    out = []
    for i, (kind, body, _, end) in enumerate(blocks):
        if kind != "python":
            continue
        expected = None
        if (
            i + 1 < len(blocks)
            and blocks[i + 1][0] == "text"
            and not doc[end : blocks[i + 1][2]].strip()
        ):
            expected = blocks[i + 1][1]
        out.append((body, expected))
    return out


@pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
def test_docs_snippets_run_and_print_what_the_docs_show(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    found = snippets()
    assert len(found) >= 5
    namespace: dict = {"__name__": "docs_langchain"}
    for n, (code, expected) in enumerate(found, 1):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(compile(code, f"docs/langchain.md snippet {n}", "exec"), namespace)
        if expected is not None:
            assert buffer.getvalue() == expected, f"snippet {n} printed:\n{buffer.getvalue()}"
