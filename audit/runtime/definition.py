"""The source an entry's behaviour depends on: its own definition and what that definition uses.

An upgrade diff blames a changed target only when *this* entry's code changed: not when a neighbour in
the same file did. From the target (a class, a function), the closure follows the names its code uses
to functions and classes of the same package, their base classes and the methods they define, and
records the simple module constants it reads; the standard library, torch and other packages are
the environment's, which the matrix records apart.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import types
from pathlib import Path

#: A closure larger than this stops growing (a digest, not a dependency analysis).
MAX_DEFINITIONS = 200
SIMPLE = (int, float, str, bytes, bool, type(None))


def sources(obj) -> list[str]:
    """The source texts ``obj``'s behaviour depends on, in a fixed order: its definitions' code, and for each simple
    module constant they read, the statement that assigns it (its value only where no statement is found). A value
    computed at import from the environment (a version check) changes no text: it is not a code change, and
    :func:`constants` reports it apart."""
    found, values = _closure(obj)
    for key, (module, name, value) in values.items():
        found.setdefault(key, _assignment(module, name) or repr(value))
    return [f"{key}\n{text}" for key, text in sorted(found.items())]


def constants(obj) -> dict[str, str]:
    """``module.NAME`` -> the value (its repr, shortened) of each simple module constant ``obj``'s code reads."""
    _, values = _closure(obj)
    return {f"{module.__name__}.{name}" if module else name: repr(value)[:120]
            for module, name, value in (values[key] for key in sorted(values))}


def _closure(obj) -> tuple[dict[str, str], dict[str, tuple]]:
    """The definitions ``obj`` depends on (key -> source) and the simple constants they read (key -> (module,
    name, value))."""
    package = _package(obj)
    found: dict[str, str] = {}
    values: dict[str, tuple] = {}
    stack = [obj]
    while stack and len(found) < MAX_DEFINITIONS:
        item = stack.pop()
        key = f"{getattr(item, '__module__', '')}:{getattr(item, '__qualname__', repr(item))}"
        if key in found:
            continue
        found[key] = _source(item)
        for name, value in _used(item):
            if isinstance(value, SIMPLE) or (isinstance(value, tuple) and all(isinstance(v, SIMPLE) for v in value)):
                values.setdefault(f"{key}:{name}", (sys.modules.get(getattr(item, "__module__", "")), name, value))
            elif _ours(value, package):
                stack.append(value)
    return found, values


def _assignment(module, name: str) -> str:
    """The source of the top-level statements of ``module`` that assign ``name`` ("" when there is none)."""
    tree, text = _parsed(getattr(module, "__file__", None) or "")
    found = []
    for node in tree.body if tree else ():
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if name in names:
            found.append(ast.get_source_segment(text, node) or "")
    return "\n".join(found)


@functools.lru_cache(maxsize=64)
def _parsed(path: str) -> tuple[ast.Module | None, str]:
    """A module file's syntax tree and text (None for a file that cannot be read or parsed)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        return ast.parse(text), text
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None, ""


def _package(obj) -> str:
    return (getattr(obj, "__module__", "") or "").split(".")[0]


def _ours(value, package: str) -> bool:
    value = getattr(value, "__func__", value)
    return (inspect.isfunction(value) or inspect.isclass(value)) and _package(value) == package and package != ""


def _source(item) -> str:
    try:
        return inspect.getsource(item)
    except (OSError, TypeError):
        return repr(item)


def _used(item):
    """(name, value) of every global name the item's code uses, and for a class its bases and methods."""
    module = sys.modules.get(getattr(item, "__module__", ""), None)
    codes = []
    if inspect.isclass(item):
        for base in item.__bases__:
            yield base.__name__, base
        for value in vars(item).values():
            value = getattr(value, "__func__", value)
            if isinstance(value, property):
                value = value.fget
            if inspect.isfunction(value):
                codes.append(value.__code__)
    elif inspect.isfunction(item):
        codes.append(item.__code__)
    for code in codes:
        for name in _names(code):
            if module is not None and hasattr(module, name):
                yield name, getattr(module, name)


def _names(code: types.CodeType):
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)
