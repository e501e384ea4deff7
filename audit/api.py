"""Audit one Function, op or callable from a unit test, with the same checks the command line runs.

    from audit.api import audit

    def test_cube():
        audit(Cube, inputs=[{"shape": ["N"]}], dims={"N": [1, 5]}, supports={"vmap": True}).assert_ok()

The keyword arguments are an entry of ``registry.yaml`` (validated the same way, errors raise
:class:`~audit.core.errors.RegistryError`), except that ``target`` and ``reference`` may be the objects
themselves. Cells run in this process (no worker), on the same seeds: a failure replays by calling
again, and its message carries the shrunk case.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import yaml

from audit.core.contract import Status
from audit.registry.model import EntryKind
from audit.runtime.settings import API, declared, settable, settle

#: What an entry built from objects is called in the registry text it is validated as.
PLACEHOLDER = "audit_api_target:Target"


class AuditAssertionError(AssertionError):
    """Some cell failed the gate; the message says what, where, by how much, and how to replay it."""


@dataclass(frozen=True)
class AuditResult:
    """The judged cells of one audited target."""

    name: str
    cells: tuple
    seed: int

    @property
    def failures(self) -> tuple:
        """Cells that fail the gate (claimed ``fail`` and ``error``)."""
        return tuple(c for c in self.cells if c.gates(strict=False))

    @property
    def ok(self) -> bool:
        """Whether every gating cell passed."""
        return not self.failures

    def status(self, check: str, dtype: str | None = None, device: str = "cpu") -> Status:
        """The status of one cell (the first dtype when none is given)."""
        for cell in self.cells:
            if cell.check == check and dtype in (None, cell.dtype) and cell.device == device:
                return cell.status
        raise KeyError(f"{self.name} has no {check} cell for dtype {dtype}, device {device}")

    def assert_ok(self) -> AuditResult:
        """Raise :class:`AuditAssertionError` listing every failing cell, with its shrunk case."""
        if self.failures:
            lines = [f"{self.name}: {len(self.failures)} cell(s) failed (seed {self.seed}; the same call replays):"]
            for cell in self.failures:
                lines.append(f"  {cell.check} {cell.status.value.upper()} ({cell.dtype}, {cell.device}): "
                             f"{cell.message}")
                if cell.case:
                    lines.append(f"    shrunk case: {cell.case}")
                for other in cell.failures[1:]:  # a further failure of another kind
                    lines += [f"    also: {other.message}", f"      shrunk case: {other.case}"]
            raise AuditAssertionError("\n".join(lines))
        return self


def audit(target, *, inputs, name: str | None = None, owner="@tests", kind: str | None = None, reference=None,
          devices=None, **keys) -> AuditResult:
    """Audit ``target`` (an autograd.Function subclass, a torch.library op, a callable, or a
    ``"module:Qualname"`` / ``"namespace::op"`` string) on the entry described by the keywords.

    The run settings the API takes (:func:`keywords`: ``checks``, ``examples``, ``seed``, ``compile_backend``) are
    keywords too; ``devices`` are the entry's claimed devices."""
    from audit.results.cells import judge
    from audit.checks import builtin
    from audit.engine.cell import run_cell
    from audit.runtime.options import RunOptions
    from audit.engine.plan import claims, plan
    from audit.registry.load import parse_registry, today

    settings = settle({key: keys.pop(key) for key in keywords() if key in keys})
    kind = kind or _kind(target)
    text_target = _target_text(target, kind)
    if not name:
        name = text_target.replace("::", ".") if kind == EntryKind.OP or isinstance(target, str) else target.__name__
    spec = {"name": _safe(name), "owner": owner, "kind": str(kind), "target": text_target, "inputs": inputs, **keys}
    if reference is not None:
        spec["reference"] = reference if isinstance(reference, str) else PLACEHOLDER
    if devices:
        spec.setdefault("supports", {})["devices"] = list(devices)
    text = yaml.safe_dump({"version": 1, "entries": [spec]}, sort_keys=False)
    entry = parse_registry(text.encode(), f"<audit({name})>").entries[0]
    table = builtin()
    keys_ = plan(entry, table, only=set(settings.checks) if settings.checks else None)
    claimed = claims(entry, table, keys_)
    resolved = _resolve(entry, target, reference)
    options = RunOptions.of(settings)
    cells = []
    for key in keys_:
        outcome = run_cell(entry, resolved, table[key.check], key, options, claimed[key])
        cells.append(judge(entry, outcome, claimed=claimed[key], claim=table[key.check].claim, today=today(),
                           repro=f"audit(...) with seed={settings.seed}"))
    return AuditResult(name=entry.name, cells=tuple(cells), seed=settings.seed)


def keywords() -> tuple[str, ...]:
    """The run settings :func:`audit` takes as keywords: those declared for the API (:mod:`audit.runtime.settings`)."""
    return settable(API)


def _signature() -> inspect.Signature:
    """:func:`audit`'s signature with the API's run settings as keywords, each at its default, before ``**keys``."""
    own = inspect.signature(audit)
    named = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
    extra = [inspect.Parameter(d.name, inspect.Parameter.KEYWORD_ONLY, default=d.default, annotation=d.type)
             for d in declared() if d.name in keywords()]
    return own.replace(parameters=[*named, *extra, own.parameters["keys"]])


audit.__signature__ = _signature()  # type: ignore[attr-defined]


def _kind(target) -> EntryKind:
    import torch

    if isinstance(target, str):
        return EntryKind.OP if "::" in target else EntryKind.FUNCTION
    if isinstance(target, type) and issubclass(target, torch.autograd.Function):
        return EntryKind.FUNCTION
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)) or hasattr(target, "_opoverload"):
        return EntryKind.OP
    return EntryKind.CALLABLE


def _target_text(target, kind: str) -> str:
    if isinstance(target, str):
        return target
    if kind == EntryKind.OP:
        op = getattr(target, "_opoverload", target)
        return str(getattr(op, "_name", None) or op.name())
    return PLACEHOLDER


def _resolve(entry, target, reference):
    from dataclasses import replace
    from pathlib import Path

    from audit.runtime.target import Target, resolve

    if isinstance(target, str) and (reference is None or isinstance(reference, str)):
        return resolve(entry, Path.cwd())
    if isinstance(target, str):
        found = resolve(replace(entry, reference=None), Path.cwd())
        return Target(fn=found.fn, reference=reference, digest=found.digest, obj=found.obj)
    obj = getattr(target, "_opoverload", target)
    fn = obj.apply if entry.kind == EntryKind.FUNCTION else obj
    ref = resolve_reference(reference)
    return Target(fn=fn, reference=ref, digest="python-api", obj=obj)


def resolve_reference(reference):
    """A reference given as an object or as ``"module:Qualname"``."""
    from audit.runtime.target import import_object

    if reference is None or callable(reference):
        return reference
    return import_object(reference)


def _safe(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._:-]", "_", name) or "target"
