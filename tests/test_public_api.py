"""The public API does not move: every name users import today stays importable there.

``public_api.json`` lists, per public module, the names it exported before the layout
change (its ``__all__`` and the agentbranch classes and functions it offered). Moving code
between folders must keep each of them importable from the same module, by re-exports
where the code moved. A name leaves this list only by a deliberate API change.

Every import in a code block of README.md, docs/*.md or examples/ is read from the pages
themselves and must work, without a deprecation, so the next move cannot break one
silently.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import warnings
from pathlib import Path

import pytest

PUBLIC = json.loads((Path(__file__).with_name("public_api.json")).read_text())


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_name_is_still_importable(module):
    missing = []
    for name in PUBLIC[module]:
        try:
            _resolve(module, name)
        except (ImportError, AttributeError):
            missing.append(name)
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


# --- Every import the docs show, read from the docs themselves -------------------------

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_FROM = re.compile(r"\bfrom\s+(agentbranch(?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n]+)")
_IMPORT = re.compile(r"^\s*import\s+(agentbranch(?:\.\w+)*)", re.M)


def _imports_in(text: str) -> set[tuple[str, str]]:
    """``(module, name)`` for each ``from agentbranch... import name``; ``(module, "")``
    for ``import agentbranch...``."""
    found: set[tuple[str, str]] = set()
    for module, names in _FROM.findall(text):
        for part in re.sub(r"#[^\n]*", "", names).strip("()").replace("\n", ",").split(","):
            name = part.split(" as ")[0].strip()
            if re.fullmatch(r"[A-Za-z_]\w*", name):
                found.add((module, name))
    found.update((module, "") for module in _IMPORT.findall(text))
    return found


def documented_imports() -> dict[tuple[str, str], str]:
    """Every import in a code block of README.md or docs/*.md, and in examples/*.py, with
    the first place that shows it."""
    where: dict[tuple[str, str], str] = {}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for block in _FENCE.findall(page.read_text("utf-8")):
            for found in sorted(_imports_in(block)):
                where.setdefault(found, str(page.relative_to(ROOT)))
    for example in sorted((ROOT / "examples").glob("*.py")):
        for found in sorted(_imports_in(example.read_text("utf-8"))):
            where.setdefault(found, str(example.relative_to(ROOT)))
    return where


DOCUMENTED = documented_imports()


def _resolve(module: str, name: str):
    imported = importlib.import_module(module)
    if not name:
        return imported
    if hasattr(imported, name):
        return getattr(imported, name)
    return importlib.import_module(f"{module}.{name}")  # a submodule: from pkg import mod


def test_the_docs_show_imports_to_check():
    # The scan reads real blocks: the README's quickstart import is among them.
    assert ("agentbranch", "") in DOCUMENTED or ("agentbranch", "yes_no") in DOCUMENTED
    assert len({m for m, _ in DOCUMENTED}) >= 10, sorted(DOCUMENTED)


def test_the_scan_reads_parenthesised_and_aliased_imports():
    text = "from agentbranch.policy import (\n    Audit,  # teacher\n    Earned as E,\n)\n"
    assert _imports_in(text) == {("agentbranch.policy", "Audit"), ("agentbranch.policy", "Earned")}


@pytest.mark.parametrize(("module", "name"), sorted(DOCUMENTED), ids=lambda x: x or "-")
def test_every_documented_import_works_without_a_deprecation(module, name):
    # The docs show today's paths: an import they show may not warn (it would mean a page
    # still teaches a moved path) and may not fail.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            _resolve(module, name)
        except (ImportError, AttributeError, DeprecationWarning) as e:
            pytest.fail(f"{DOCUMENTED[(module, name)]} shows an import that fails: {e}")


def test_version_comes_from_the_package_metadata():
    from importlib.metadata import PackageNotFoundError, version

    import agentbranch

    try:
        expected = version("agentbranch")
    except PackageNotFoundError:
        expected = "0+unknown"
    assert agentbranch.__version__ == expected
    assert re.match(r"^\d", agentbranch.__version__)


# --- Every public module says what is public -------------------------------------------

SRC = ROOT / "src"


def _declares_all(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                return True
        if isinstance(node, ast.ImportFrom) and any(a.name == "__all__" for a in node.names):
            return True  # a public face re-exporting the list of the module it fronts
    return False


def modules_without_all(src: Path) -> list[str]:
    """Public modules (no ``_`` part in the path but ``__init__``) without ``__all__``."""
    missing = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        parts = rel.split("/")
        if any(p.startswith("_") and p != "__init__.py" for p in parts):
            continue
        tree = ast.parse(path.read_text("utf-8"))
        if not _declares_all(tree):
            missing.append(rel)
    return missing


def test_every_public_module_has_all():
    # Internal is marked internal: a module is private (_name.py) or says with __all__
    # which of its names are public, so the API is what the package says it is.
    assert modules_without_all(SRC) == [], "add __all__ (or make the module private)"


def test_a_public_module_without_all_is_caught(tmp_path):
    files = {
        "pkg/__init__.py": "__all__ = []\n",
        "pkg/open.py": "def f(): ...\n",
        "pkg/_private.py": "def g(): ...\n",
        "pkg/face.py": "from pkg.open import __all__\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert modules_without_all(tmp_path) == ["pkg/open.py"]
