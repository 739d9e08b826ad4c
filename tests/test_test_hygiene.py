"""The tests' own manners: no test module imports another test module (a helper two test
files share lives in a ``tests/_*.py`` module or a conftest fixture), none skips on a
package the project or its test extra installs (a broken install must fail, not skip),
and no test module edits ``sys.path`` (pytest puts ``tests/`` and ``benchmarks/`` on it: pyproject's
``pythonpath``). A test module that imports another runs that module's tests' setup,
ties the two files' edits together and breaks when either is renamed or split."""

from __future__ import annotations

import ast
import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

TESTS = Path(__file__).resolve().parent
TEST_MODULES = sorted(TESTS.rglob("test_*.py"))


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """Every module ``tree`` imports, anywhere in it (inside functions too), with its
    line: ``import m``, ``from m import x``, ``importlib.import_module("m")``,
    ``__import__("m")``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and _name(node.func) in ("importlib.import_module", "import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node.lineno, node.args[0].value))
    return out


def imports_of_test_modules(tree: ast.AST) -> list[str]:
    """The imports in ``tree`` that name a test module (``test_x``, ``tests.test_x``)."""
    return [
        f"line {line}: {name}"
        for line, name in imported_modules(tree)
        if any(part.startswith("test_") for part in name.split("."))
    ]


def _installed() -> set[str]:
    """The distributions the project's dependencies and its test extra name."""
    project = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["test"]
    return {canonicalize_name(Requirement(r).name) for r in reqs}


INSTALLED = _installed()
#: Each importable top-level module's distributions (read once: it scans every one).
DISTRIBUTIONS = importlib.metadata.packages_distributions()


def skips_on_installed(tree: ast.AST) -> list[str]:
    """The ``pytest.importorskip`` calls in ``tree`` whose module comes from a
    distribution the project or its test extra installs."""
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and _name(node.func) == "pytest.importorskip"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            module = str(node.args[0].value)
            top = module.split(".")[0]
            if any(canonicalize_name(d) in INSTALLED for d in DISTRIBUTIONS.get(top, [])):
                out.append(f"line {node.lineno}: importorskip({module!r})")
    return out


def sys_path_edits(tree: ast.AST) -> list[str]:
    """The places ``tree`` changes ``sys.path`` (a call on it, or an assignment to it);
    code in a string (a script a test runs in a child process) is not code here."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if _name(node.func.value) == "sys.path":
                out.append(f"line {node.lineno}: sys.path.{node.func.attr}(...)")
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if _name(t.value if isinstance(t, ast.Subscript) else t) == "sys.path":
                    out.append(f"line {node.lineno}: sys.path assigned")
    return out


def _name(node: ast.AST) -> str:
    """The dotted name ``node`` spells (``sys.path``), or ``""``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _name(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_there_are_test_modules_to_check() -> None:
    assert len(TEST_MODULES) > 100 and Path(__file__).resolve() in TEST_MODULES


#: What a test module must not do: the scanner that finds it, and what to do instead.
RULES = {
    "imports a test module": (
        imports_of_test_modules,
        "move what it shares into a helper module tests/_<name>.py or a conftest fixture",
    ),
    "skips on a package it installs": (
        skips_on_installed,
        "import it: the project or its test extra installs it, so a broken install must fail",
    ),
    "edits sys.path": (
        sys_path_edits,
        "tests/ and benchmarks/ are on it already (pyproject's [tool.pytest.ini_options] "
        "pythonpath)",
    ),
}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("path", TEST_MODULES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_module_breaks_a_rule(path: Path, rule: str) -> None:
    scan, instead = RULES[rule]
    found = scan(_tree(path))
    assert not found, f"{path.relative_to(TESTS)} {rule} ({'; '.join(found)}): {instead}"


def test_the_checks_see_what_they_look_for() -> None:
    """The scanners find each form they forbid, and pass what they allow."""
    bad = ast.parse(
        "import test_learn_loop\n"
        "from tests.test_x import y\n"
        "def f():\n"
        "    from test_learn_loop import stream\n"
        "    importlib.import_module('test_a')\n"
        "    sys.path.insert(0, 'x')\n"
        "    sys.path[:0] = ['y']\n"
        "sys.path += ['z']\n"
        "sys.path = []\n"
    )
    assert len(imports_of_test_modules(bad)) == 4
    assert len(sys_path_edits(bad)) == 4
    skips = ast.parse("pytest.importorskip('torch')\npytest.importorskip('jevcompat.mock')\n")
    assert len(skips_on_installed(skips)) == 2
    fine = ast.parse(
        "import _learn_fixtures\n"
        "from _lg_fixtures import sure\n"
        "import pytest, sys\n"
        "SCRIPT = 'import sys; sys.path.insert(0, \"src\")'\n"
        "print(sys.path[0])\n"
    )
    assert imports_of_test_modules(fine) == [] and sys_path_edits(fine) == []
    assert skips_on_installed(ast.parse("pytest.importorskip('vllm')\n")) == []
