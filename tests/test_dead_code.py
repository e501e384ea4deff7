"""No dead code: every top-level function and class defined under ``audit/`` is used somewhere in the project
(its own package, the benchmarks, the docs generator, the repository's checks and examples, the tests, or
``pyproject.toml``'s entry points), by name or as a string naming it. A function that nothing calls is deleted,
not kept "in case": merges leave such leftovers, and each one is a second door to the same behaviour.

Like ``tests/test_layering.py`` this reads the syntax tree only; it is vulture at full confidence, with the
project's own notion of "used"."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Where a use counts (a test is a use: a helper the tests pin is part of the package's surface).
USERS = ("audit", "bench", "checks", "examples", "tests", "docs/generate.py")
#: Called by name by Python or a tool, never from this code: module hooks and pytest's plugin hooks.
HOOKS = re.compile(r"^(__\w+__|pytest_\w+|main)$")
_WORD = re.compile(r"[A-Za-z_]\w*")


def _files() -> list[Path]:
    found: list[Path] = []
    for name in USERS:
        path = ROOT / name
        found += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return found


def _definitions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    return [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def _uses(tree: ast.AST, skip: set[int]) -> set[str]:
    """Every name ``tree`` mentions outside the definitions whose ids are in ``skip``: names, attributes, imported
    names, and words of string constants (``"audit.cli:main"``, ``getattr(module, "run")``)."""
    found: set[str] = set()
    pending = [tree]
    while pending:
        node = pending.pop()
        if id(node) in skip:
            pending += [*getattr(node, "decorator_list", []), *getattr(node, "bases", [])]
            continue
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(_WORD.findall(node.value))
        pending += list(ast.iter_child_nodes(node))
    return found


#: Decorators that register what they decorate (a click command, a pytest hook): the registration is the use.
REGISTERING = {"command", "group", "hookimpl"}


def _registers(node) -> bool:
    calls = [d.func if isinstance(d, ast.Call) else d for d in node.decorator_list]
    return any(isinstance(d, ast.Attribute) and d.attr in REGISTERING for d in calls)


def dead(package: Path = ROOT / "audit") -> list[str]:
    """``file:line name`` of each top-level definition under ``package`` that nothing uses."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in _files()}
    defined = {path: _definitions(tree) for path, tree in trees.items() if package in path.parents}
    skip = {id(node) for nodes in defined.values() for node in nodes}
    used = set().union(*(_uses(tree, skip) for tree in trees.values()))
    used |= set(_WORD.findall((ROOT / "pyproject.toml").read_text()))
    # a definition's own body may use another one: walk the bodies of the used, until nothing new is reached
    bodies: dict[str, list] = {}
    for nodes in defined.values():
        for node in nodes:
            bodies.setdefault(node.name, []).append(node)
    pending = [name for name, nodes in bodies.items()  # used, a hook, or registered by a decorator (a command)
               if name in used or HOOKS.match(name) or any(map(_registers, nodes))]
    reached: set[str] = set()
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        for node in bodies[name]:
            pending += [n for n in _uses(node, set()) if n in bodies]
    return [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}" for path, nodes in defined.items() for node in nodes
            if node.name not in reached]


def _imported(tree: ast.AST) -> set[str]:
    """The dotted names of the modules ``tree`` imports (``from audit.checks import reference``: both
    ``audit.checks`` and ``audit.checking.reference``), and string constants that are dotted names."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found |= set(re.findall(r"audit(?:\.\w+)+", node.value))
    return found


def unimported(package: Path = ROOT / "audit") -> list[str]:
    """Each module under ``package`` that no code imports (a built-in check's module is imported by its name,
    :data:`audit.catalog.checks.CATALOG`; ``__main__`` by ``python -m``)."""
    from audit.catalog.checks import CATALOG

    imported = set().union(*(_imported(ast.parse(path.read_text())) for path in _files()))
    imported |= {f"audit.checks.{name}" for name in CATALOG}
    modules = [path for path in package.rglob("*.py") if path.stem not in ("__init__", "__main__")]
    names = {path: ".".join(path.relative_to(ROOT).with_suffix("").parts) for path in modules}
    return sorted(str(path.relative_to(ROOT)) for path, name in names.items() if name not in imported)


def test_every_module_is_imported():
    assert unimported() == [], "a module nothing imports: delete it"


def test_every_definition_is_used():
    assert dead() == [], "dead code: delete it (or use it)"


def test_a_dead_function_is_found():
    """The test can fail: a function added back with no caller is reported."""
    name = "_".join(("never", "called", "anywhere"))  # never written whole here, where it would count as a use
    planted = ROOT / "audit" / "_planted_dead.py"
    planted.write_text(f'"""Planted by tests/test_dead_code.py."""\n\n\ndef {name}():\n    return 1\n')
    try:
        found = dead()
    finally:
        planted.unlink()
    assert f"audit/_planted_dead.py:4 {name}" in found, found
