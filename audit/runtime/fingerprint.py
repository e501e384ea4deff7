"""What an import can change in torch itself, fingerprinted: a worker whose torch was changed is not reused.

Isolation (:mod:`audit.runtime.isolation`) puts back torch's *settings* after every cell and entry; it cannot put
back torch itself. A package may patch torch when it is imported: replace ``torch.softmax``, a ``Tensor`` method or
a ``torch.nn.functional`` member, register a global module hook, leave a dispatch or torch-function mode on the stack,
or register a Python kernel for an ``aten`` operator. Every later entry in that process would then compute
something else. So a worker takes a :class:`Fingerprint` at start-up and compares it (:func:`changes`) after each
entry's target loads and after each cell; on a change the entry's cells still run there (the patch is the package's
behaviour, as its users see it), each records what changed, and the worker retires after the entry.

What torch changes in itself (a module of torch's imported on first use, such as Dynamo wrapping
``torch.manual_seed``) is no change: a replacement whose code lies in torch's own package is torch's. Not seen: a
C++ extension's kernel that overrides an ``aten`` kernel (only Python registrations are listed by torch), and an
``aten`` operator defined during a cell rather than on import (listing every operator takes 10 ms: it is done after
the target loads, the rest after every cell, in 0.3 ms: what is unchanged since the last look is not listed again).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

#: The namespaces whose public callables are compared by identity.
NAMESPACES = ("torch", "torch.Tensor", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special")
#: The metric a cell records what was changed under (a list of sentences, one per change).
METRIC = "torch_patched"


@dataclass(frozen=True)
class Change:
    """One change to torch: what it was (``replaced torch.softmax``) and the module whose code did it ("" when
    that cannot be told)."""

    what: str
    by: str = ""

    def sentence(self, fallback: str) -> str:
        """``importing pkg replaced torch.softmax`` (``fallback`` names the module when the change does not)."""
        return f"importing {self.by or fallback} {self.what}"


@dataclass(frozen=True)
class Fingerprint:
    """torch's public callables (by name, the objects themselves), its global module hooks (each registry's
    handles), the mode stacks (the modes' types) and the Python kernels of ``aten`` operators."""

    members: dict[str, Any]
    hooks: dict[str, tuple[Any, ...]]
    modes: tuple[type, ...]
    kernels: frozenset[tuple[str, str]]


def take(operators: bool = True) -> Fingerprint:
    """torch as it is now, in this process: about 10 ms, 0.3 ms without listing every ``aten`` operator where nothing
    changed since the last look (an import defines operators; the Python kernels registered for them are listed
    either way)."""
    return Fingerprint(_members(), _hooks(), _modes(), _kernels(operators))


def changes(before: Fingerprint, after: Fingerprint) -> tuple[Change, ...]:
    """What changed from ``before`` to ``after``, torch's own changes left out; empty when nothing did."""
    return (_replaced(before, after) + _hooked(before, after) + _moded(before, after)
            + _registered(before, after))


def _namespaces() -> dict[str, Any]:
    import torch
    import torch.nn.functional

    return {"torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.functional": torch.nn.functional,
            "torch.linalg": torch.linalg, "torch.fft": torch.fft, "torch.special": torch.special}


def _members() -> dict[str, Any]:
    """torch's public callables by name; the same dict as the last call's where no namespace's own dict changed (a
    comparison by identity, 0.1 ms, where listing them again takes 2-3 ms after every cell), so that
    :func:`_replaced` sees at once that nothing was."""
    global _LAST
    spaces = [(prefix, list(reversed(space.__mro__)) if isinstance(space, type) else [space])  # a class's, inherited
              for prefix, space in _namespaces().items()]
    layers = [(layer, dict(vars(layer))) for _, own in spaces for layer in own]
    if _LAST is not None and _same(_LAST[0], layers):
        return _LAST[1]
    found: dict[str, Any] = {}
    for prefix, own in spaces:
        merged: dict[str, Any] = {}
        for layer in own:
            merged.update(vars(layer))
        found.update({f"{prefix}.{name}": value for name, value in merged.items()
                      if not name.startswith("_") and callable(value)})
    _LAST = (layers, found)
    return found


#: The namespaces' own dicts when :func:`_members` last listed them, and what it found.
_LAST: tuple[list, dict[str, Any]] | None = None


def _same(before: list, now: list) -> bool:
    """Whether every namespace layer holds the same objects under the same names (dict equality tries identity
    first; a value whose own ``==`` cannot answer counts as changed)."""
    try:
        return len(before) == len(now) and all(
            old_layer is new_layer and old == new for (old_layer, old), (new_layer, new) in zip(before, now))
    except Exception:
        return False


def _hooks() -> dict[str, tuple[Any, ...]]:
    from torch.nn.modules import module

    found: dict[str, tuple[Any, ...]] = {}
    for name, value in vars(module).items():
        if name.startswith("_global_"):
            found[name] = tuple(value.values()) if isinstance(value, dict) else (value,)
    return found


def _modes() -> tuple[type, ...]:
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return tuple(type(m) for m in [*_get_current_dispatch_mode_stack(), *_get_current_function_mode_stack()])


def _kernels(operators: bool) -> frozenset[tuple[str, str]]:
    """(operator, dispatch key) of every Python kernel registered for an aten operator (Meta kernels left out: they
    compute shapes, not values), and with ``operators`` (operator, "") for every aten operator."""
    import torch

    global _IMPLS
    impls = frozenset(getattr(torch.library, "_impls", ()))  # "aten/_softmax/CPU"; 1,800 of them, read in 1 ms
    if _IMPLS is None or _IMPLS[0] != impls:
        python = set()
        for impl in impls:
            namespace, op, key = (impl.split("/") + ["", ""])[:3]
            if namespace == "aten" and key != "Meta":
                python.add((op, key))
        _IMPLS = (impls, frozenset(python))
    if not operators:
        return _IMPLS[1]
    ops = {(n.partition("::")[2], "") for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")}
    return _IMPLS[1] | ops


#: torch.library's registrations when :func:`_kernels` last read them, and the aten Python kernels among them.
_IMPLS: tuple[frozenset[str], frozenset[tuple[str, str]]] | None = None


def _registered(before: Fingerprint, after: Fingerprint) -> tuple[Change, ...]:
    found = []
    for op, key in sorted(after.kernels - before.kernels):
        where = _registered_at(op, key)
        if not _in_torch(where):
            what = f"registered a Python kernel for aten::{op} ({key})" if key else f"defined the operator aten::{op}"
            found.append(Change(what, _module_at(where)))
    return tuple(found)


def _registered_at(op: str, key: str) -> str:
    """The file that registered the kernel of ``aten::op`` for ``key`` (torch's dispatcher records it), or ""."""
    import torch

    try:
        table = torch._C._dispatch_dump(f"aten::{op}")
    except RuntimeError:
        return ""
    prefix = f"{key}: registered at " if key else "schema: registered at "
    line = next((line for line in table.splitlines() if line.startswith(prefix)), "")
    return line.removeprefix(prefix).split(" ")[0].rpartition(":")[0]


def _replaced(before: Fingerprint, after: Fingerprint) -> tuple[Change, ...]:
    if after.members is before.members:  # listed from the same namespaces, unchanged (see :func:`_members`)
        return ()
    found = []
    for name, old in before.members.items():
        new = after.members.get(name)
        if new is None:
            found.append(Change(f"removed {name}"))
        elif new is not old and not _torch_own(new):
            found.append(Change(f"replaced {name}", _module_of(new)))
    return tuple(found)


def _hooked(before: Fingerprint, after: Fingerprint) -> tuple[Change, ...]:
    found = []
    for name, hooks in after.hooks.items():
        old = before.hooks.get(name, ())
        if len(hooks) != len(old) or any(h is not o for h, o in zip(hooks, old)):
            new = [h for h in hooks if all(h is not o for o in old)]
            kind = name.removeprefix("_global_").replace("_", " ").rstrip("s")
            found.append(Change(f"registered a global module {kind} (torch.nn.modules.module.{name})",
                                _module_of(new[0]) if new else ""))
    return tuple(found)


def _moded(before: Fingerprint, after: Fingerprint) -> tuple[Change, ...]:
    if after.modes == before.modes:
        return ()
    left = [m for m in after.modes if m not in before.modes] or list(after.modes)
    return tuple(Change(f"left the mode {m.__qualname__} on torch's mode stack", m.__module__) for m in left[:3]) or (
        Change("popped a mode off torch's mode stack"),)


def _origin(value: Any) -> str:
    """The file that holds ``value``'s code ("" when none is known)."""
    call = vars(type(value)).get("__call__")  # a callable object: its class's code
    for candidate in (value, getattr(value, "__func__", None), call):
        code = getattr(candidate, "__code__", None)
        if code is not None:
            return os.path.abspath(code.co_filename)
    module = sys.modules.get(getattr(value, "__module__", None) or "")
    return os.path.abspath(getattr(module, "__file__", None) or "") if module else ""


def _torch_own(value: Any) -> bool:
    """Whether ``value`` is torch's: its code is in torch's package, or (a builtin) its module is torch's."""
    origin = _origin(value)
    if origin:
        return _in_torch(origin)
    return (getattr(value, "__module__", None) or "").split(".")[0] == "torch"


def _in_torch(path: str) -> bool:
    """Whether the file ``path`` is in torch's package."""
    import torch

    return bool(path) and os.path.abspath(path).startswith(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)


def _module_of(value: Any) -> str:
    """The name of the module whose code ``value`` is ("" when none is found)."""
    return _module_at(_origin(value))


def _module_at(origin: str) -> str:
    """The name of the imported module whose file is ``origin`` ("" when none is)."""
    origin = os.path.abspath(origin) if origin else ""
    for name, module in list(sys.modules.items()):
        if origin and os.path.abspath(getattr(module, "__file__", None) or "") == origin:
            return name
    return ""
