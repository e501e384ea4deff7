"""``alias``: no undeclared in-place writes or shared storage, forward or backward."""

from __future__ import annotations

import torch

from audit.checks.interface import Check, Violation
from audit.checks.tensors import differentiable, grad_outputs, outputs_of


def run(subject, case) -> None:
    """Mutation and aliasing against ``mutates``/``views`` (and an op's schema), in forward and backward."""
    entry = subject.entry
    leaves = subject.args(case)
    args = [a.clone() if isinstance(a, torch.Tensor) and i in entry.mutates else a for i, a in enumerate(leaves)]
    before = [(a.detach().clone(), a._version) if isinstance(a, torch.Tensor) else None for a in args]
    result = subject.target.fn(*args)
    outputs = outputs_of(result)
    if entry.kind == "op":
        _against_schema(entry, subject.target.obj, args, before)
    _mutations(entry, args, before, kind=entry.kind)
    _aliases(entry, args, outputs)
    _backward(subject, leaves, outputs)


def _changed(arg: torch.Tensor, before) -> bool:
    copy, version = before
    values_differ = not torch.equal(arg.detach().nan_to_num(), copy.nan_to_num())
    return arg._version != version or values_differ


def _mutations(entry, args, before, kind: str) -> None:
    for i, (arg, saved) in enumerate(zip(args, before)):
        if saved is None:
            continue
        changed = _changed(arg, saved)
        if changed and i not in entry.mutates:
            raise Violation(f"forward modified input {i} in place, but mutates does not declare it: declare "
                            f"mutates: [{i}] (and ctx.mark_dirty it), or write into a copy")
        if i in entry.mutates and not changed:
            raise Violation(f"input {i} is declared in mutates but forward left it unchanged")
        if i in entry.mutates and kind == "function" and arg.requires_grad and _is_clone(arg):
            raise Violation(f"forward modified input {i} in place without ctx.mark_dirty: gradients "
                            "through it will be silently wrong; call ctx.mark_dirty on the modified input")


def schema_mutable(op) -> set[int] | None:
    """Positions of the arguments an operator's schema marks as written (``Tensor(a!)``)."""
    overload = getattr(op, "default", op)
    schema = getattr(overload, "_schema", None)
    if schema is None:
        return None
    return {i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write}


def _against_schema(entry, op, args, before) -> None:
    mutable = schema_mutable(op)
    if mutable is None:
        return
    name = entry.target
    if mutable != set(entry.mutates):
        raise Violation(f"the schema of {name} marks arguments {sorted(mutable)} as mutable, but the registry's "
                        f"mutates says {sorted(entry.mutates)}: make them agree")
    for i, (arg, saved) in enumerate(zip(args, before)):
        if saved is not None and i not in mutable and _changed(arg, saved):
            raise Violation(f"{name} modified argument {i} in place, but its schema does not mark it mutable: "
                            "add it to mutates_args (Tensor(a!) in the schema)")


def _is_clone(arg: torch.Tensor) -> bool:
    return arg.grad_fn is not None and type(arg.grad_fn).__name__.startswith("CloneBackward")


def _aliases(entry, args, outputs) -> None:
    allowed = set(entry.views) | set(entry.mutates)
    for k, out in enumerate(outputs):
        for i, arg in enumerate(args):
            if isinstance(arg, torch.Tensor) and i not in allowed and _shares(out, arg):
                raise Violation(f"output {k} shares storage with input {i} (a view or the input itself where a "
                                f"copy was promised): return a copy (.clone()), or declare views: [{i}]")


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0:
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _backward(subject, leaves, outputs) -> None:
    inputs = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
    outputs = differentiable(outputs)
    if not inputs or not outputs:
        return
    cotangents = grad_outputs(outputs, subject.seed)
    saved = [(g.clone(), g._version) for g in cotangents]
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    for k, (g, (copy, version)) in enumerate(zip(cotangents, saved)):
        if g._version != version or not torch.equal(g, copy):
            raise Violation(f"backward modified grad_output {k} in place: another branch of the graph may share "
                            "it; compute into a new tensor (grad * 2, not grad.mul_(2))")
    present = [(i, g) for i, g in enumerate(grads) if g is not None]
    for a, (i, gi) in enumerate(present):
        for j, gj in present[a + 1:]:
            if _shares(gi, gj):
                raise Violation(f"the gradients of inputs {i} and {j} share storage: return separate tensors")


CHECK = Check(
    name="alias",
    contract="forward modifies only the inputs declared in mutates (values and version counters compared), "
             "and those it must modify and mark dirty; an output shares storage with an input only if "
             "declared in views (or mutates); backward leaves grad_output untouched; no two returned "
             "gradients share storage",
    run=run,
    script="""\
before = [a.detach().clone() if torch.is_tensor(a) else a for a in args]
out = fn(*args)
for i, (a, b) in enumerate(zip(args, before)):
    if torch.is_tensor(a):
        print("input", i, "changed:", not torch.equal(a.detach(), b),
              "shares storage with output:", a.untyped_storage().data_ptr() == out.untyped_storage().data_ptr())
""",
)
