"""A self-contained replay script for a failing cell: nothing but torch and the target's package.

A script is the replay kit's source (:mod:`audit.kit`), the check's property and the helpers it names
(``Check.replay``, ``Check.replay_helpers``), the target, the shrunk case written out exactly, and one call of the
property with the values the cell called it with (:func:`audit.checking.replayable.values`). The audit's check calls
that same function on that same case: what the script prints is what the cell found.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.kit import MODULES
from audit.kit.calls import called
from audit.catalog.interface import Check
from audit.checking.replayable import UNGUARDED, accepted
from audit.core.contract import COMPLEX_DTYPES
from audit.inputs.case import Case, TensorArg, ValueArg
from audit.registry.model import Entry, EntryKind

HEADER = '''\
"""Replays {name} {check} ({dtype}, {device}), as found by autograd-audit (seed {seed}).

{message}

Owner: {owners}. Needs only torch and the target's package; run: python {{this file}}
"""
from __future__ import annotations

import sys

sys.path.insert(0, {base!r})
import torch
'''


def replay_script(entry: Entry, check: Check, case: Case, *, dtype: str, device: str, seed: int, message: str,
                  base: str, values: dict[str, Any], reference: bool = True) -> str:
    """The script's text. ``values`` are those the cell called ``check.replay`` with (a :class:`Case`, or a list of
    cases, written as argument lists), ``reference`` whether it passed the entry's reference (not when the
    reference draws its random numbers otherwise than the target)."""
    lines = [HEADER.format(name=entry.name, check=check.name, dtype=dtype, device=device, seed=seed,
                           message=_comment(message), owners=", ".join(entry.owners), base=base)]
    if entry.triton == "interpret":  # before anything imports triton, as the audit's worker does
        lines.append("import os\n\nif not torch.cuda.is_available():  # Triton kernels through Triton's interpreter\n"
                     "    os.environ.setdefault('TRITON_INTERPRET', '1')")
    lines += [f"import {module}" for module in entry.load]
    kit_at = len(lines)
    prop = (check.model_replay if _kind(entry) == "model" else check.replay) or called
    if prop is not called:
        lines += [f"# -- the property (the check {check.name!r}: {prop.__module__}) ---",
                  "\n\n".join(_source(f) for f in (*check.replay_helpers, prop))]
    lines += ["", "# -- the target ---", _target_line("target", entry.target, _kind(entry))]
    lines.append(_target_line("reference", entry.reference, "callable") if entry.reference else "reference = None")
    if "proxy" in _unguarded(prop, entry):
        lines.append(_target_line("proxy", entry.proxy, "callable") if entry.proxy else "proxy = None")
    if "declared_vjp" in _unguarded(prop, entry):  # a rule of values, called as it is
        lines.append(_target_line("declared_vjp", entry.vjp, "callable") if entry.vjp else "declared_vjp = None")
    lines.append(f"dtype, device = torch.{dtype}, {device!r}")
    lines.append(f"seed = {values.get('seed', 0)!r}  # the cell's seed: cotangents are drawn from it")
    if _kind(entry) == "module":
        lines.append("torch.manual_seed(0)\n"
                     "target = make().to(dtype=dtype, device=device)  # built from the audit's seed")
    if entry.backward_only:  # every gradient through torch.autograd.backward, as the audit takes them
        lines.append("target = backward_only(target)  # the target refuses torch.autograd.grad")
    cases = {name: value for name, value in values.items() if _is_cases(value)}
    lines.append("# -- the values the cell called the property with ---")
    used = list(accepted(prop, values))
    lines += [f"{name} = {value!r}" for name, value in values.items()
              if name not in cases and name not in _WRITTEN and (name in used or name == "mutates")]
    lines += _case_lines({name: value for name, value in cases.items() if name in used}, dtype)
    lines.append("args = [")
    lines += _rendered(case, dtype)
    lines.append("]")
    names = ", ".join(f"{name}={name}" for name in used + _unguarded(prop, entry))
    if _kind(entry) == "model":
        lines.append(f"sys.exit(report({prop.__name__}(target, None, None, {names})))")
    else:
        lines.append("fn = guarded(target, mutates, seed)  # as the audit calls it: mutated arguments cloned, reseeded")
        lines.append("ref = guarded(through_dense(reference), mutates, seed) if reference is not None else None"
                     if reference else "ref = None  # the reference draws otherwise than the target: not compared")
        if entry.proxy and "proxy" in _unguarded(prop, entry):
            lines.append("proxy = guarded(through_dense(proxy), mutates, seed)  # its gradient is the intended one")
        lines.append(f"sys.exit(report({prop.__name__}(fn, ref, args, {names})))")
    lines[kit_at:kit_at] = ["", "# -- the replay kit (audit/kit/): the helpers used below, as the audit's checks "
                            "call them ---", kit_source("\n".join(lines[kit_at:])), ""]
    return "\n".join(lines) + "\n"


#: Values the script writes on lines of their own, before the others.
_WRITTEN = ("seed", "dtype", "device")


def _unguarded(prop: Callable[..., Any], entry: Entry) -> list[str]:
    """The names of :data:`~audit.checking.replayable.UNGUARDED` that ``prop`` takes: the script's own ``target``,
    ``reference`` and (a module's) ``make``."""
    parameters = inspect.signature(prop).parameters
    return [name for name in UNGUARDED if name in parameters and (name != "make" or _kind(entry) == "module")]


def kit_source(used_by: str = "") -> str:
    """The replay kit's source as one module (:func:`kit_text`); with ``used_by`` (the code that follows it in a
    script), only its imports and the definitions that code reaches, directly or through each other, in the kit's
    order: a script carries what it runs, not the whole kit."""
    if not used_by:
        return kit_text()
    parts = _kit_parts()
    bound = {name: part for part in parts for name in part.bound}
    wanted, pending = set(), list(_read(ast.parse(used_by)) & bound.keys())
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            pending += bound[name].reads & bound.keys()
    kept = [part for part in parts if not part.bound or part.bound & wanted]
    imports = "\n".join(part.text for part in kept if part.imports)
    return "\n\n\n".join([imports] + [part.text for part in kept if not part.imports]) + "\n"


@dataclass(frozen=True)
class _Part:
    """One top-level statement of :func:`kit_text`: the names it binds and mentions, its source, whether it imports."""

    bound: frozenset[str]
    reads: frozenset[str]
    text: str
    imports: bool


@functools.cache
def _kit_parts() -> tuple[_Part, ...]:
    """:func:`kit_text` as its top-level statements, parsed once a process (every failure's script walks them)."""
    body = kit_text()
    lines = body.splitlines()
    parts = []
    for stmt in ast.parse(body).body:
        imports = isinstance(stmt, (ast.Import, ast.ImportFrom))
        start = stmt.lineno if imports else _first_line(stmt, lines)
        parts.append(_Part(frozenset(_bound(stmt)), frozenset(_read(stmt)),
                           "\n".join(lines[start - 1:stmt.end_lineno]), imports))
    return tuple(parts)


@functools.cache
def kit_text() -> str:
    """The kit's modules (:data:`audit.kit.MODULES`, in that order) as one module's source: their imports of torch
    and the standard library once each, then every definition; no docstring, no ``from __future__`` line (the
    script has its own), no import of one kit module from another (they are all there)."""
    imports: dict[str, None] = {}
    definitions = []
    for name in MODULES:
        text = inspect.getsource(importlib.import_module(f"audit.kit.{name}"))
        lines = text.splitlines()
        for stmt in ast.parse(text).body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # the module's docstring
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                module = stmt.module if isinstance(stmt, ast.ImportFrom) else None
                if module != "__future__" and not (module or "").startswith("audit."):
                    imports.setdefault("\n".join(lines[stmt.lineno - 1:stmt.end_lineno]))
                continue
            definitions.append("\n".join(lines[_first_line(stmt, lines) - 1:stmt.end_lineno]))
    return "\n".join(imports) + "\n\n\n" + "\n\n\n".join(definitions) + "\n"


def _bound(stmt: ast.stmt) -> set[str]:
    """The names a top-level statement defines (none for an import: imports are always kept)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def _read(node: ast.AST) -> set[str]:
    """Every name ``node``'s code mentions (a superset of the globals it reads, which is all that matters here)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _first_line(stmt: ast.stmt, lines: list[str]) -> int:
    """Where ``stmt`` starts with its decorators and the ``#:`` comment lines that document it just above."""
    decorators: list[ast.expr] = getattr(stmt, "decorator_list", [])
    start = min([stmt.lineno] + [d.lineno for d in decorators])
    while start > 1 and lines[start - 2].startswith("#:"):
        start -= 1
    return start


def _source(function: Callable[..., Any]) -> str:
    return inspect.getsource(function).rstrip() + "\n"


def _kind(entry: Entry) -> str:
    return EntryKind(entry.kind).value


def _rendered(case: Case, dtype: str, indent: str = "    ") -> list[str]:
    """One line per argument of ``case`` in a ``dtype`` cell: its exact values, dtype, shape and memory layout."""
    return [f"{indent}{_laid_out(_arg(a, dtype), case.layout(i))}," for i, a in enumerate(case.args)]


def _is_cases(value: object) -> bool:
    """Whether a ``script_values`` value is a case, or a list of cases, to write as argument lists."""
    return isinstance(value, Case) or (isinstance(value, list) and bool(value)
                                       and all(isinstance(v, Case) for v in value))


def _case_lines(cases: dict[str, Any], dtype: str) -> list[str]:
    """A ``script_values`` :class:`Case` as its argument list, a list of cases as a list of argument lists."""
    lines = []
    for name, value in cases.items():
        if isinstance(value, Case):
            lines += [f"{name} = [", *_rendered(value, dtype), "]"]
            continue
        lines.append(f"{name} = [")
        for item in value:
            lines += ["    [", *_rendered(item, dtype, "        "), "    ],"]
        lines.append("]")
    return lines


def _laid_out(expression: str, layout: str) -> str:
    return expression if layout == "contiguous" else f"laid_out({expression}, {layout!r})"


def _comment(message: str) -> str:
    return message.replace('"""', "'''").replace("\\", "\\\\")


def _target_line(name: str, target: str, kind: str) -> str:
    if kind == "op":
        namespace, _, rest = target.partition("::")
        return f"{name} = torch.ops.{namespace}.{rest}"
    module, _, qualname = target.partition(":")
    if kind == "module":  # the factory: the module is built once dtype and device are known
        return f"import {module}\nmake = {module}.{qualname}  # the factory"
    if kind == "model":  # the factory of (model, make_batch, loss); build() calls it from the audit's seed
        return f"import {module}\n{name} = {module}.{qualname}"
    suffix = ".apply" if kind == "function" else ""
    return f"import {module}\n{name} = {module}.{qualname}{suffix}"


def _arg(arg: TensorArg | ValueArg, cell_dtype: str) -> str:
    if not isinstance(arg, TensorArg):
        return repr(arg.value)
    dtype = f"torch.{arg.dtype}" if arg.dtype else "dtype"
    flat = arg.values.reshape(-1)
    grad = ".requires_grad_()" if arg.requires_grad else ""
    shape = list(arg.values.shape)
    if np.iscomplexobj(flat) and (arg.dtype or cell_dtype) in COMPLEX_DTYPES:
        # real and imaginary parts as float64 lists: exact, signed zeros included (a branch cut tells them apart)
        dense = (f"torch.complex(torch.tensor({flat.real.tolist()!r}, dtype=torch.float64), "
                 f"torch.tensor({flat.imag.tolist()!r}, dtype=torch.float64)).to(dtype={dtype}, device=device)"
                 f".reshape({shape!r})")
    else:  # real values (a real cell of an entry that also claims complex takes the real parts)
        dense = f"torch.tensor({flat.real.tolist()!r}, dtype={dtype}, device=device).reshape({shape!r})"
    if arg.sparse_layout and arg.pattern is not None:  # the values everywhere, and which of them it holds
        pattern = (f"torch.tensor({arg.pattern.reshape(-1).tolist()!r}, dtype=torch.bool, device=device)"
                   f".reshape({shape!r})")
        return f"sparse_from({dense}, {pattern}, {arg.sparse_layout!r}){grad}"
    return f"{dense}{grad}"
