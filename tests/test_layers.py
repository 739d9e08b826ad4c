"""The folders are the layers, and imports only run downwards (docs/design.md, "Layers").

Read from the source with ``ast`` (nothing is imported): every ``import`` and
``from ... import`` in ``src/``, at module level or inside a function, is an edge from the
importing module to the imported one. Two rules:

* **Downwards only.** A module may import its own layer and the layers below it. Layers
  that share a rank are peers and do not import each other (``audit`` and ``replay``).
* **No circles** between modules, lazy imports included: a lazy import that closes a
  circle only hides it. Imports under ``if TYPE_CHECKING:`` never run, so they are not
  edges of that check; inside ``policy`` and ``audit`` they count too (two modules that
  name each other's types cannot be read apart either).

Earned trust is a layer of its own (``trust``: ``agentbranch.policy.earned``) above
``policy``, which declares the seam it implements (``agentbranch.policy.trust``) and
never imports it; ``agentbranch.policy`` (the package's ``__init__``) is the public face
that re-exports it, so it sits in the ``trust`` layer. And no module outside the trust
package imports one of its private (``_``) modules: outside, only its public face.

``test_an_upward_import_is_caught`` shows the check failing on a deliberately added
upward import, so it cannot pass by reading nothing (and
``test_a_private_trust_import_is_caught`` the same for the private modules).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

#: Bottom to top. A layer is named by its folder under ``agentbranch/`` (or by a top-level
#: package); layers in one tuple are peers.
LAYERS: list[tuple[str, ...]] = [
    ("core",),  # questions, decisions, errors, state rendering, reads; logs, files
    ("engine",),  # plan, canvas, batching, readers/, capacity/, selection from the env
    ("calibration",),  # fitting temperatures from labelled files
    ("policy",),  # bands, fallbacks, auditing while a policy runs; the trust seam
    ("trust",),  # earned trust (policy/earned/), behind the seam; agentbranch.policy's face
    ("audit", "replay"),  # reports over audit records; cassettes
    ("integrations", "testing"),  # LangGraph, LangChain, middleware; test doubles
    ("public",),  # agentbranch/__init__.py and the public faces langgraph/langchain/middleware
    ("demo", "deploy"),  # the demo graph; manifests
    ("cli",),  # one module per command group
]

#: The only imports that run upwards, each with its reason (none: a reader's own chat
#: model is built above it, ``LocalChatModel.on(reader)`` from ``Reader.generator()``).
ALLOWED_UPWARD: set[tuple[str, str]] = set()

PUBLIC_FACES = {
    "agentbranch",
    "agentbranch.langgraph",
    "agentbranch.langchain",
    "agentbranch.middleware",
}


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


#: The trust package, a layer of its own inside the ``policy`` folder, and the policy
#: package's ``__init__``, which re-exports it (``agentbranch.policy.Earned``).
TRUST = "agentbranch.policy.earned"
TRUST_FACES = {"agentbranch.policy"}


def layer_of(module: str) -> str:
    if module in PUBLIC_FACES:
        return "public"
    if module in TRUST_FACES or module == TRUST or module.startswith(TRUST + "."):
        return "trust"
    parts = module.split(".")
    if parts[0] != "agentbranch":
        return parts[0]
    return parts[1]


def rank(layer: str) -> int:
    for i, names in enumerate(LAYERS):
        if layer in names:
            return i
    raise AssertionError(f"{layer!r} is in no layer: add it to LAYERS in {__file__}")


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def import_edges(src: Path, *, type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the agentbranch modules it imports (a ``from pkg import mod`` names ``pkg.mod``);
    with ``type_checking``, the imports under ``if TYPE_CHECKING:`` too."""
    files = {module_name(p, src): p for p in src.rglob("*.py")}
    modules = set(files)
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        found: set[str] = set()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree) if type_checking else _runtime_nodes(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in modules
                    else node.module
                    for alias in node.names
                ]
            else:
                continue
            found.update(t for t in targets if t.split(".")[0] == "agentbranch")
        # A submodule's own package __init__ runs first anyway; importing a parent
        # package is not an edge of its own (``import agentbranch.x.y`` names x.y).
        edges[name] = {t for t in found if t in modules and t != name}
    return edges


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(edges.items()):
        low = layer_of(module)
        for target in sorted(targets):
            high = layer_of(target)
            if high == low or (low, high) in ALLOWED_UPWARD:
                continue
            if rank(high) >= rank(low):
                kind = "a peer" if rank(high) == rank(low) else "a higher layer"
                wrong.append(f"{module} ({low}) imports {target}, {kind} ({high})")
    return wrong


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def private_trust_imports(edges: dict[str, set[str]]) -> list[str]:
    """Imports of a private module of the trust package (a ``_`` part below it) by a
    module outside it."""
    inside = TRUST + "."
    wrong = []
    for module, targets in sorted(edges.items()):
        if module == TRUST or module.startswith(inside):
            continue
        for target in sorted(targets):
            below = target[len(inside) :].split(".") if target.startswith(inside) else []
            if any(part.startswith("_") for part in below):
                wrong.append(f"{module} imports {target}, private to {TRUST}")
    return wrong


def test_every_module_belongs_to_a_layer():
    for module in import_edges(SRC):
        rank(layer_of(module))


def test_imports_run_downwards_only():
    assert upward_imports(import_edges(SRC)) == []


def test_policy_imports_nothing_of_the_trust_package():
    # The arrow itself is upward (policy -> trust), so the downwards check already fails on
    # it; this names the rule on its own, lazy imports and the type checker's included.
    edges = import_edges(SRC, type_checking=True)
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(edges.items())
        if layer_of(module) == "policy"
        for target in sorted(targets)
        if layer_of(target) == "trust"
    ]
    assert wrong == []


def test_only_the_trust_package_imports_its_private_modules():
    assert private_trust_imports(import_edges(SRC, type_checking=True)) == []


def test_no_import_circles():
    assert circles(import_edges(SRC)) == []


def test_no_import_circles_counting_type_checking_imports():
    """A circle under ``if TYPE_CHECKING:`` is still two modules that cannot be read
    apart: none anywhere (a module names the type it needs by a protocol instead)."""
    assert circles(import_edges(SRC, type_checking=True)) == []


def test_a_type_checking_circle_is_caught(tmp_path):
    src = _tree(
        tmp_path,
        {
            "agentbranch/__init__.py": "",
            "agentbranch/policy/__init__.py": "",
            "agentbranch/policy/a.py": "from agentbranch.policy import b\n",
            "agentbranch/policy/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from agentbranch.policy.a import A\n"
            ),
        },
    )
    assert circles(import_edges(src)) == []
    assert circles(import_edges(src, type_checking=True)) == [
        ["agentbranch.policy.a", "agentbranch.policy.b"]
    ]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_an_upward_import_is_caught(tmp_path):
    src = _tree(
        tmp_path,
        {
            "agentbranch/__init__.py": "",
            "agentbranch/core/__init__.py": "",
            "agentbranch/core/questions.py": "def f():\n    from agentbranch.policy import bands\n",
            "agentbranch/policy/__init__.py": "",
            "agentbranch/policy/bands.py": "from agentbranch.core import questions\n",
        },
    )
    edges = import_edges(src)
    assert upward_imports(edges) == [
        "agentbranch.core.questions (core) imports agentbranch.policy.bands, a higher layer (policy)"
    ]
    assert circles(edges) == [["agentbranch.core.questions", "agentbranch.policy.bands"]]


def test_a_private_trust_import_is_caught(tmp_path):
    src = _tree(
        tmp_path,
        {
            "agentbranch/__init__.py": "",
            "agentbranch/policy/__init__.py": "from agentbranch.policy.earned import Earned\n",
            "agentbranch/policy/bands.py": "",
            "agentbranch/policy/earned/__init__.py": "from agentbranch.policy.earned import _a\n",
            "agentbranch/policy/earned/_a.py": "from agentbranch.policy import bands\n",
            "agentbranch/policy/earned/learn/__init__.py": "",
            "agentbranch/policy/earned/learn/_b.py": "from agentbranch.policy.earned import _a\n",
            "agentbranch/audit/__init__.py": (
                "from agentbranch.policy.earned import Earned\n"
                "def f():\n    from agentbranch.policy.earned.learn import _b\n"
            ),
            "agentbranch/audit/report.py": "from agentbranch.policy.earned import _a\n",
        },
    )
    edges = import_edges(src)
    assert private_trust_imports(edges) == [
        "agentbranch.audit imports agentbranch.policy.earned.learn._b, private to "
        "agentbranch.policy.earned",
        "agentbranch.audit.report imports agentbranch.policy.earned._a, private to "
        "agentbranch.policy.earned",
    ]
    # the policy package's face may import it; a policy module may not
    assert upward_imports(edges) == []
    (src / "agentbranch/policy/bands.py").write_text(
        "def f():\n    from agentbranch.policy.earned import Earned\n"
    )
    assert upward_imports(import_edges(src)) == [
        "agentbranch.policy.bands (policy) imports agentbranch.policy.earned, a higher layer "
        "(trust)"
    ]


def test_a_peer_import_is_caught(tmp_path):
    src = _tree(
        tmp_path,
        {
            "agentbranch/__init__.py": "",
            "agentbranch/audit/__init__.py": "import agentbranch.replay.keys\n",
            "agentbranch/replay/__init__.py": "",
            "agentbranch/replay/keys.py": "",
        },
    )
    assert upward_imports(import_edges(src)) == [
        "agentbranch.audit (audit) imports agentbranch.replay.keys, a peer (replay)"
    ]


def test_an_unknown_folder_is_named(tmp_path):
    src = _tree(tmp_path, {"agentbranch/__init__.py": "", "agentbranch/misc/__init__.py": ""})
    with pytest.raises(AssertionError, match="'misc' is in no layer"):
        for module in import_edges(src):
            rank(layer_of(module))


#: A module this long needs a reason in its docstring ("Over 500 lines: ...").
LONG = 500


def test_a_long_module_says_why():
    unexplained = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > LONG:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if f"Over {LONG} lines:" not in doc:
                unexplained.append(str(path.relative_to(SRC)))
    assert unexplained == [], (
        f"modules over {LONG} lines without a reason in their docstring: split them by job "
        f"or say why one module must hold it ('Over {LONG} lines: ...')"
    )


def test_the_wheel_ships_the_library_alone():
    # The benchmark harness lives in benchmarks/ beside its scripts, not in src/ or the wheel.
    import tomllib

    assert sorted(p.name for p in SRC.iterdir() if p.is_dir() and "." not in p.name) == [
        "agentbranch"
    ]
    pyproject = tomllib.loads((SRC.parent / "pyproject.toml").read_text("utf-8"))
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [
        "src/agentbranch"
    ]
