"""The functions of an entry that mutants change: found in its modules' source, without importing them.

For a ``kind: function`` entry, the target class's ``forward``, ``setup_context``, ``backward``, ``jvp`` and
``vjp``; for every other kind, those of every ``torch.autograd.Function`` subclass in the target's module and in
its ``load`` modules, and the functions those modules hand to ``register_autograd`` (backward and
``setup_context``). A ``@triton.jit`` kernel is named and left alone: Triton compiles its source text, not the
Python function's code, so a swapped code object would not change what runs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from audit.engine.cache import importable_from, module_file
from audit.mutate.operators import ROLES
from audit.registry.model import Entry, EntryKind
from audit.runtime.native import is_native


@dataclass(frozen=True)
class Site:
    """A function mutants change: where it lives, the role it plays, and its source (the ``def``, dedented by
    :func:`audit.mutate.operators.mutations`)."""

    module: str
    qualname: str
    role: str
    file: str
    line: int
    source: str


@dataclass(frozen=True)
class Found:
    """An entry's sites, and what was left alone and why (a Triton kernel, a module not found)."""

    sites: tuple[Site, ...]
    notes: tuple[str, ...] = ()


def sites(entry: Entry, base: Path) -> Found:
    """The functions of ``entry`` that can be mutated (see the module's docstring)."""
    importable_from(base)
    module, _, qualname = entry.target.partition(":")
    modules = ([module] if entry.kind != EntryKind.OP else []) + [m for m in entry.load if not is_native(m)]
    found: list[Site] = []
    notes: list[str] = []
    for name in dict.fromkeys(modules):
        path = module_file(name)
        if path is None:
            notes.append(f"{name}: no Python source found")
            continue
        text = path.read_text()
        tree = ast.parse(text, str(path))
        only = qualname if entry.kind == EntryKind.FUNCTION and name == module else None
        found += _in_module(name, path, text, tree, only)
        notes += [f"{name}:{k.name}: a Triton kernel, not mutated (Triton compiles its source text, not the "
                  "function's code)" for k in tree.body if isinstance(k, ast.FunctionDef) and _is_triton(k)]
    return Found(tuple(found), tuple(notes))


def _in_module(module: str, path: Path, text: str, tree: ast.Module, only: str | None) -> list[Site]:
    lines = text.splitlines(keepends=True)
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and (node.name == only if only else _is_function_class(node)):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in ROLES:
                    found.append(_site(module, f"{node.name}.{item.name}", item.name, path, lines, item))
    if only:
        return found
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for call in ast.walk(tree):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_autograd"):
            named = [(a, "backward") for a in call.args if isinstance(a, ast.Name)]
            named += [(k.value, "setup_context") for k in call.keywords
                      if k.arg == "setup_context" and isinstance(k.value, ast.Name)]
            for ref, role in named:
                if ref.id in functions:
                    found.append(_site(module, ref.id, role, path, lines, functions[ref.id]))
    return found


def _site(module: str, qualname: str, role: str, path: Path, lines: list[str], node: ast.FunctionDef) -> Site:
    return Site(module, qualname, role, str(path), node.lineno, "".join(lines[node.lineno - 1:node.end_lineno]))


def _is_function_class(node: ast.ClassDef) -> bool:
    return any(ast.unparse(base).split(".")[-1] in ("Function", "InplaceFunction") for base in node.bases)


def _is_triton(node: ast.FunctionDef) -> bool:
    return any(("triton" in ast.unparse(d) and "jit" in ast.unparse(d)) or ast.unparse(d) == "jit"
               for d in node.decorator_list)
