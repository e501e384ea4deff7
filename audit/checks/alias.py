"""``alias``: no undeclared in-place writes or shared storage in forward; in backward, no writes into
grad_output or the inputs, and no returned gradient whose memory can change a result."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.catalog.interface import tolerance_values
from audit.kit.autograd import differentiable, grad_outputs, vjp
from audit.kit.calls import reseed
from audit.kit.compare import mismatch
from audit.kit.explain import torch_sentence
from audit.kit.tensors import fresh, outputs_of, wide


def alias(fn, ref, args, *, target, kind, mutates, views, seed, tol, device) -> list:
    """Forward on the target itself (unguarded: it copies each input it declares it writes, to watch the write)
    against ``mutates`` and ``views`` (and an op's schema), then backward's writes, then the memory of the
    returned gradients (:func:`gradient_memory`, through ``fn``); the first problem found."""
    leaves = fresh(args)
    xs = with_copies(leaves, mutates)
    before = snapshots(xs)
    try:
        result = target(*xs)
    except RuntimeError as exc:
        if "a leaf Variable that requires grad has been used in an in-place operation" in str(exc):
            found = undeclared_write(target, leaves, mutates, kind)  # which input does it write?
            if found:
                return [found]
        raise
    outputs = outputs_of(result)
    found = ((against_schema(target, mutates, xs, before) if kind == "op" else None)
             or mutations(xs, before, mutates, kind) or aliases(xs, outputs, mutates, views)
             or backward_writes(leaves, outputs, seed)
             or gradient_memory(Passes(fn, args, mutates, seed, device), tol))
    return [found] if found else []


def with_copies(leaves, mutates) -> list:
    """The call's arguments: the leaves, with a copy for each input forward declares it writes."""
    return [a.clone() if isinstance(a, torch.Tensor) and i in mutates else a for i, a in enumerate(leaves)]


def snapshots(xs) -> list:
    """A copy and the version counter of each tensor of ``xs`` (None for anything else)."""
    return [(x.detach().clone(), x._version) if isinstance(x, torch.Tensor) else None for x in xs]


def changed(x, saved) -> bool:
    """Whether ``x`` was written since ``saved`` (its version counter moved, or its values differ; NaN equals NaN)."""
    copy, version = saved
    return x._version != version or not torch.equal(x.detach().nan_to_num(), copy.nan_to_num())


def undeclared_write(target, leaves, mutates, kind) -> str | None:
    """The input written, found by calling again on copies of every tensor (as real code would)."""
    xs = [a.clone() if isinstance(a, torch.Tensor) else a for a in leaves]
    before = snapshots(xs)
    target(*xs)
    return mutations(xs, before, mutates, kind)


def mutations(xs, before, mutates, kind) -> str | None:
    """An input written that ``mutates`` does not declare, one declared and left as it was, or (a Function) one
    written without ctx.mark_dirty."""
    for i, (x, saved) in enumerate(zip(xs, before)):
        if saved is None:
            continue
        written = changed(x, saved)
        if written and i not in mutates:
            return (f"forward modified input {i} in place, but mutates does not declare it: declare mutates: [{i}] "
                    "(and ctx.mark_dirty it), or write into a copy")
        if i in mutates and not written:
            return f"input {i} is declared in mutates but forward left it unchanged"
        if i in mutates and kind == "function" and x.requires_grad and x.grad_fn is not None \
                and type(x.grad_fn).__name__.startswith("CloneBackward"):
            return (f"forward modified input {i} in place without ctx.mark_dirty: gradients through it will be "
                    "silently wrong; call ctx.mark_dirty on the modified input")
    return None


def schema_mutable(op) -> set[int] | None:
    """Positions of the arguments an operator's schema marks as written (``Tensor(a!)``)."""
    schema = getattr(getattr(op, "default", op), "_schema", None)
    if schema is None:
        return None
    return {i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write}


def against_schema(op, mutates, xs, before) -> str | None:
    """The schema's written arguments against ``mutates``, and no other argument written."""
    mutable = schema_mutable(op)
    if mutable is None:
        return None
    name = getattr(op, "default", op)._schema.name
    if mutable != set(mutates):
        return (f"the schema of {name} marks arguments {sorted(mutable)} as mutable, but the registry's mutates "
                f"says {sorted(mutates)}: make them agree")
    for i, (x, saved) in enumerate(zip(xs, before)):
        if saved is not None and i not in mutable and changed(x, saved):
            return (f"{name} modified argument {i} in place, but its schema does not mark it mutable: add it to "
                    "mutates_args (Tensor(a!) in the schema)")
    return None


def aliases(xs, outputs, mutates, views) -> str | None:
    """An output sharing storage with an input not declared in ``views`` (or ``mutates``)."""
    allowed = set(views) | set(mutates)
    for k, out in enumerate(outputs):
        for i, x in enumerate(xs):
            if isinstance(x, torch.Tensor) and i not in allowed and out.numel() and x.numel() \
                    and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
                return (f"output {k} shares storage with input {i} (a view or the input itself where a copy was "
                        f"promised): return a copy (.clone()), or declare views: [{i}]")
    return None


def grad_positions(args) -> list[int]:
    """The positions of the arguments that require grad."""
    return [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]


def backward_writes(leaves, outputs, seed: int) -> str | None:
    """A backward that writes into grad_output or into an input."""
    positions, outputs = grad_positions(leaves), differentiable(outputs)
    if not positions or not outputs:
        return None
    inputs = [leaves[i] for i in positions]
    cotangents = grad_outputs(outputs, seed)
    saved, before = snapshots(cotangents), snapshots(inputs)
    vjp(outputs, inputs, cotangents, fill=False)
    for k, (g, kept) in enumerate(zip(cotangents, saved)):
        if changed(g, kept):
            return (f"backward modified grad_output {k} in place: another branch of the graph may share it; compute "
                    "into a new tensor (grad * 2, not grad.mul_(2))")
    for i, x, kept in zip(positions, inputs, before):
        if changed(x, kept):
            return (f"backward modified input {i} in place: the caller's tensor is overwritten; compute the gradient "
                    "into a new tensor")
    return None


# Gradient memory. Sharing by itself is harmless: torch's own add returns one tensor for both inputs and
# torch.cat's backward returns views of grad_output, and the engine copies a gradient before it keeps one
# that something else references. What can change a result is shown, not suspected: a returned gradient
# that the Function writes again, or whose in-place update (grad += 1, as accumulation and in-place
# clipping do to gradients the caller holds) changes an input, an output or a later gradient.

class Pass:
    """One forward and backward of the target on fresh arguments, its graph kept for another backward."""

    def __init__(self, leaves, positions, outputs, grads):
        self.leaves, self.positions, self.outputs, self.grads = leaves, positions, outputs, grads

    @property
    def inputs(self) -> list:
        """The arguments the gradients are taken with respect to."""
        return [self.leaves[i] for i in self.positions]

    def again(self, seed: int) -> list:
        """A second backward through the same graph, with the cotangents drawn from ``seed``."""
        return vjp(self.outputs, self.inputs, seed, retain_graph=True, fill=False)


class Passes:
    """How the gradient-memory stage runs the target: ``fn`` on fresh copies of ``args`` (a copy passed for each
    input it declares it writes), torch's generator reset to the cell's ``seed`` (a stochastic target draws the same
    values on every pass) and put back after."""

    def __init__(self, fn, args, mutates, seed: int, device: str):
        self.fn, self.args, self.mutates, self.seed, self.device = fn, args, mutates, seed, device

    def run(self, seed: int) -> Pass | None:
        """A forward and backward, cotangents drawn from ``seed``; None when nothing is differentiable."""
        leaves = fresh(self.args)
        positions = grad_positions(leaves)
        with torch.random.fork_rng(devices=[] if self.device == "cpu" else None):
            reseed(self.seed)
            outputs = differentiable(outputs_of(self.fn(*with_copies(leaves, self.mutates))))
            if not positions or not outputs:
                return None
            grads = vjp(outputs, [leaves[i] for i in positions], seed, retain_graph=True, fill=False)
        return Pass(leaves, positions, outputs, list(grads))


def gradient_memory(passes: Passes, tol) -> str | None:
    """Returned gradients are not rewritten later, and updating them in place changes nothing else."""
    first = passes.run(passes.seed)
    if first is None:
        return None
    return rewritten(passes, first) or updated(passes, first, tol)


def rewritten(passes: Passes, first: Pass) -> str | None:
    """A returned gradient keeps its values when the target runs again, with other cotangents."""
    kept = copies(first.grads)
    passes.run(passes.seed + 1)
    found = unchanged(first, kept, "the next call (forward and backward)", "a buffer kept between calls")
    if found:
        return found
    try:
        first.again(passes.seed + 1)
    except Exception:  # a graph that cannot run backward twice is no sign of shared memory
        return None
    return unchanged(first, kept, "a second backward through the same graph (retain_graph=True)", "a workspace on ctx")


def unchanged(run: Pass, kept: list, when: str, where: str) -> str | None:
    """A gradient of ``run`` no longer what ``kept`` holds."""
    for i, grad, copy in zip(run.positions, run.grads, kept):
        change = delta(grad, copy)
        if change:
            return (f"the gradient of input {i} changed by max |delta| = {change:.3g} when {when} ran with other "
                    f"cotangents: backward returns memory it writes again ({where}); return a new tensor")
    return None


def updated(passes: Passes, first: Pass, tol) -> str | None:
    """Update every returned gradient in place; on a change, name the one gradient that causes it alone. Only where
    the target gives the same gradients again without any update is a difference the update's doing (a stochastic
    or non-reentrant backward is not this check's): ``same_graph``, ``next_call``."""
    try:
        same_graph = same(first.again(passes.seed), first.grads, tol)
    except Exception:  # a graph that cannot run backward twice
        same_graph = False
    again = passes.run(passes.seed)
    if again is None:  # differentiable the first time, not now: nothing to compare
        return None
    next_call = same(again.outputs + again.grads, first.outputs + first.grads, tol)
    problem = after_update(passes, first, None, same_graph, next_call, tol)
    if problem is None:
        return None
    for n in range(len(first.grads)):
        fresh_pass = passes.run(passes.seed)
        alone = after_update(passes, fresh_pass, n, same_graph, next_call, tol) if fresh_pass else None
        if alone:
            return alone
    return problem


def after_update(passes: Passes, run: Pass, n, same_graph: bool, next_call: bool, tol) -> str | None:
    """What changes after an in-place update of gradient ``n`` of ``run`` (every gradient when None): an input or
    an output (the gradient is its memory), the next call's gradients, a second backward's."""
    named = [(f"input {i}", a) for i, a in enumerate(run.leaves) if isinstance(a, torch.Tensor)]
    named += [(f"output {k}", o) for k, o in enumerate(run.outputs)]
    before, grads = copies([t for _, t in named]), copies(run.grads)
    if not any([bump(g) for k, g in enumerate(run.grads) if n in (None, k)]):  # noqa: C419 (bump each, not the first)
        return None
    said = ("an in-place update of the gradient of " + ("each input" if n is None else f"input {run.positions[n]}")
            + " (grad += 1, as accumulation or in-place clipping does)")
    for (label, now), then in zip(named, before):
        change = delta(now, then)
        if change:
            return (f"after {said}, {label} changed: max |delta| = {change:.3g}; the gradient is {label}'s own "
                    "memory: return a new tensor (compute it out of place, or .clone())")
    following = passes.run(passes.seed) if next_call else None
    problem = difference(following.grads, grads, run.positions, tol) if following else None
    if problem:
        return (f"after {said}, the next call gives a different result: {problem}; backward returns memory kept "
                "between calls (a cache or workspace): return a new tensor")
    if not same_graph:
        return None
    try:
        problem = difference(run.again(passes.seed), grads, run.positions, tol)
    except Exception as exc:  # e.g. autograd's version counter: the update reached a saved tensor
        problem = f"it raises {type(exc).__name__}: {torch_sentence(exc)}"
    if problem:
        return (f"after {said}, a second backward through the same graph gives a different result: {problem}; "
                "backward returns memory kept on ctx and read again: return a new tensor")
    return None


def difference(got: list, expected: list, positions: list, tol) -> str | None:
    """The first gradient of ``got`` that is not ``expected``'s (None where it is)."""
    for i, g, e in zip(positions, got, expected):
        if (g is None) != (e is None):
            return f"the gradient of input {i} is {'None' if g is None else 'a tensor'} where it was not"
        problem = None if g is None else mismatch(g, e, tol)
        if problem:
            return f"gradient of input {i}: {problem}"
    return None


def same(got: list, expected: list, tol) -> bool:
    """Whether ``got`` and ``expected`` agree, tensor by tensor, within ``tol``."""
    return difference(got, expected, list(range(len(got))), tol) is None


def bump(grad) -> bool:
    """``grad += 1`` in place; False where torch refuses (an expanded gradient, which the engine copies
    before it writes) or there is nothing to write."""
    if grad is None or grad.numel() == 0:
        return False
    try:
        with torch.no_grad():
            grad.add_(1)
    except RuntimeError:
        return False
    return True


def copies(tensors) -> list:
    """A detached copy of each tensor (None stays None)."""
    return [None if t is None else t.detach().clone() for t in tensors]


def delta(now, then) -> float:
    """The largest change of a tensor against its earlier copy (0 when unchanged; NaN equals NaN)."""
    if now is None:
        return 0.0
    now, then = now.detach().nan_to_num(), then.nan_to_num()
    if torch.equal(now, then):
        return 0.0
    return float((wide(now) - wide(then)).abs().max())


CHECK = declared(
    "alias",
    replay=alias,
    replay_helpers=(with_copies, snapshots, changed, undeclared_write, mutations, schema_mutable, against_schema,
                    aliases, grad_positions, backward_writes, Pass, Passes, gradient_memory, rewritten, unchanged,
                    updated, after_update, difference, same, bump, copies, delta),
    script_values=tolerance_values,
)
