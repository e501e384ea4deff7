"""The source an entry's behaviour depends on: its own definition and what that definition uses.

An upgrade diff blames a changed target only when *this* entry's code changed: not when a neighbour in
the same file did. From the target (a class, a function), the closure follows the names its code uses
to functions and classes of the same package, their base classes and the methods they define, and
records the simple module constants it reads; the standard library, torch and other packages are
the environment's, which the matrix records apart.
"""

from __future__ import annotations

import inspect
import sys
import types

#: A closure larger than this stops growing (a digest, not a dependency analysis).
MAX_DEFINITIONS = 200
SIMPLE = (int, float, str, bytes, bool, type(None))


def sources(obj) -> list[str]:
    """The source texts (and simple constants) ``obj``'s behaviour depends on, in a fixed order."""
    package = _package(obj)
    found: dict[str, str] = {}
    stack = [obj]
    while stack and len(found) < MAX_DEFINITIONS:
        item = stack.pop()
        key = f"{getattr(item, '__module__', '')}:{getattr(item, '__qualname__', repr(item))}"
        if key in found:
            continue
        found[key] = _source(item)
        for name, value in _used(item):
            if isinstance(value, SIMPLE) or (isinstance(value, tuple) and all(isinstance(v, SIMPLE) for v in value)):
                found.setdefault(f"{key}:{name}", repr(value))
            elif _ours(value, package):
                stack.append(value)
    return [f"{key}\n{text}" for key, text in sorted(found.items())]


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
