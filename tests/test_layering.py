"""The package's import graph: no cycle, and no arrow from a lower layer to a higher one.

The layers are those of docs/how-it-works.md (section Layout), listed here from the bottom up. A module may
import its own layer and any layer below, never one above; an import inside a function counts as much as one at
the top, since it ties the two modules together just the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "audit"

#: Bottom first. A name is a module (``audit.registry.model``) or a package (``audit.registry`` and what is under
#: it); a module lies in the layer of its longest listed prefix. The entry model sits below the check declarations
#: (they read entries), and the declarations below the rest of the registry (which validates check names against
#: them); the checking machinery (:mod:`audit.checking`: judgement, replayable, reference...) sits above the results.
LAYERS = (
    ("audit", "audit.core", "audit.kit"),
    ("audit.registry.model",),
    ("audit.catalog",),
    ("audit.registry",),
    ("audit.inputs",),
    ("audit.toolkit",),
    ("audit.runtime",),
    ("audit.results",),
    ("audit.checking",),
    ("audit.checks",),
    ("audit.engine",),
    ("audit.behaviour",),
    ("audit.mutate",),
    ("audit.reporters", "audit.scan"),
    ("audit.app",),
    ("audit.commands",),
    ("audit.cli", "audit.api", "audit.pytest_plugin", "audit.__main__"),
)


def module_name(path: Path) -> str:
    """``audit/engine/runner.py`` -> ``audit.engine.runner``; a package's ``__init__`` is the package."""
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every ``audit`` module or package the file imports, at any depth of its code."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "audit" or name.startswith("audit.")}


def layer_of(name: str) -> int:
    """The index of the layer ``name`` lies in (its longest matching prefix); -1 for the bare package."""
    best, depth = None, -1
    for index, members in enumerate(LAYERS):
        for member in members:
            if (name == member or name.startswith(member + ".")) and member.count(".") > depth and member != "audit":
                best, depth = index, member.count(".")
    return best if best is not None else 0


def graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (a name that is an attribute, not a module, counts as its module)."""
    modules = {module_name(path): path for path in ROOT.rglob("*.py")}

    def resolve(name: str) -> str:
        while name not in modules and "." in name:
            name = name.rpartition(".")[0]
        return name

    return {name: {resolve(i) for i in imports(path)} - {name} for name, path in modules.items()}


def test_every_module_has_a_layer():
    """A new top-level module or package must be placed in LAYERS (and the Layout in docs/how-it-works.md) on
    purpose."""
    unplaced = [name for name in graph() if name != "audit" and layer_of(name) == 0
                and not any(name == m or name.startswith(m + ".") for m in LAYERS[0][1:])]
    assert not unplaced, f"modules in no layer: {unplaced}"


@pytest.mark.parametrize("lower", range(len(LAYERS)))
def test_no_arrow_points_up(lower):
    """No module of a layer imports a module of a higher one."""
    upward = sorted(f"{a} -> {b}" for a, bs in graph().items() if layer_of(a) == lower
                    for b in bs if layer_of(b) > lower)
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_cycle():
    """No module reaches itself through its imports (whatever the layers say)."""
    edges, state, cycle = graph(), {}, []

    def visit(node: str, path: list[str]) -> bool:
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                trail = path + [node]
                cycle.extend(trail[trail.index(nxt):] + [nxt])
                return True
            if nxt not in state and visit(nxt, path + [node]):
                return True
        state[node] = "done"
        return False

    assert not any(visit(n, []) for n in sorted(edges) if n not in state), " -> ".join(cycle)
