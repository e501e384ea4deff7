"""``alias``: no undeclared in-place writes or shared storage in forward; in backward, no writes into
grad_output or the inputs, and no returned gradient whose memory can change a result."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.toolkit.jacobian import torch_sentence
from audit.toolkit.tensors import differentiable, grad_outputs, mismatch, outputs_of, wide


def run(subject, case) -> None:
    """Mutation and aliasing against ``mutates``/``views`` (and an op's schema), in forward and backward."""
    entry = subject.entry
    leaves = subject.args(case)
    args = _arguments(entry, leaves)
    before = [(a.detach().clone(), a._version) if isinstance(a, torch.Tensor) else None for a in args]
    try:
        result = subject.target.fn(*args)
    except RuntimeError as exc:
        if LEAF_WRITE in str(exc):
            _undeclared_write(subject, leaves)
        raise
    outputs = outputs_of(result)
    if entry.kind == "op":
        _against_schema(entry, subject.target.obj, args, before)
    _mutations(entry, args, before, kind=entry.kind)
    _aliases(entry, args, outputs)
    _backward(subject, leaves, outputs)
    _gradient_memory(subject, case)


#: autograd's refusal of an in-place Function on a leaf: a write forward marked dirty but mutates did not declare.
LEAF_WRITE = "a leaf Variable that requires grad has been used in an in-place operation"


def _undeclared_write(subject, leaves) -> None:
    """Name the input written, found by calling again on copies of every tensor (as real code would)."""
    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in leaves]
    before = [(a.detach().clone(), a._version) if isinstance(a, torch.Tensor) else None for a in args]
    subject.target.fn(*args)
    _mutations(subject.entry, args, before, kind=subject.entry.kind)


def _arguments(entry, leaves) -> list:
    """The call's arguments: the leaves, with a copy for each input forward declares it writes."""
    return [a.clone() if isinstance(a, torch.Tensor) and i in entry.mutates else a for i, a in enumerate(leaves)]


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
    positions = _grad_positions(leaves)
    outputs = differentiable(outputs)
    if not positions or not outputs:
        return
    inputs = [leaves[i] for i in positions]
    cotangents = grad_outputs(outputs, subject.seed)
    saved = [(g.clone(), g._version) for g in cotangents]
    before = [(x.detach().clone(), x._version) for x in inputs]
    torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    for k, (g, (copy, version)) in enumerate(zip(cotangents, saved)):
        if g._version != version or not torch.equal(g, copy):
            raise Violation(f"backward modified grad_output {k} in place: another branch of the graph may share "
                            "it; compute into a new tensor (grad * 2, not grad.mul_(2))")
    for i, x, saved_x in zip(positions, inputs, before):
        if _changed(x, saved_x):
            raise Violation(f"backward modified input {i} in place: the caller's tensor is overwritten; compute "
                            "the gradient into a new tensor")


def _grad_positions(args) -> list[int]:
    return [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]


# Gradient memory. Sharing by itself is harmless: torch's own add returns one tensor for both inputs and
# torch.cat's backward returns views of grad_output, and the engine copies a gradient before it keeps one
# that something else references. What can change a result is shown, not suspected: a returned gradient
# that the Function writes again, or whose in-place update (grad += 1, as accumulation and in-place
# clipping do to gradients the caller holds) changes an input, an output or a later gradient.

#: How the update is described in a message.
_UPDATE = "an in-place update of the gradient of {which} (grad += 1, as accumulation or in-place clipping does)"


@dataclass(frozen=True)
class _Pass:
    """One forward and backward of the target on fresh arguments, its graph kept for another backward."""

    leaves: list
    positions: list[int]
    outputs: list[torch.Tensor]
    grads: list

    @property
    def inputs(self) -> list[torch.Tensor]:
        """The arguments the gradients are taken with respect to."""
        return [self.leaves[i] for i in self.positions]

    def again(self, seed: int) -> list:
        """A second backward through the same graph, with the cotangents drawn from ``seed``."""
        return list(torch.autograd.grad(self.outputs, self.inputs, grad_outputs(self.outputs, seed),
                                        retain_graph=True, allow_unused=True))


@dataclass(frozen=True)
class _Repeats:
    """Whether the target gives the same gradients again without any update: only then is a difference
    after an update the update's doing (a stochastic or non-reentrant backward is not this check's)."""

    same_graph: bool
    next_call: bool


def _pass(subject, case, seed: int) -> _Pass | None:
    """A forward and backward on fresh arguments, cotangents drawn from ``seed``; None when nothing is
    differentiable."""
    leaves = subject.args(case)
    positions = _grad_positions(leaves)
    with torch.random.fork_rng(devices=[] if subject.device == "cpu" else None):
        torch.manual_seed(subject.seed)  # a stochastic target draws the same values on every pass
        outputs = differentiable(outputs_of(subject.call(_arguments(subject.entry, leaves))))
        if not positions or not outputs:
            return None
        grads = torch.autograd.grad(outputs, [leaves[i] for i in positions], grad_outputs(outputs, seed),
                                    retain_graph=True, allow_unused=True)
    return _Pass(leaves, positions, outputs, list(grads))


def _gradient_memory(subject, case) -> None:
    """Returned gradients are not rewritten later, and updating them in place changes nothing else."""
    first = _pass(subject, case, subject.seed)
    if first is None:
        return
    _rewritten(subject, case, first)
    _updated(subject, case, first)


def _rewritten(subject, case, run: _Pass) -> None:
    """A returned gradient keeps its values when the target runs again, with other cotangents."""
    kept = _copies(run.grads)
    _pass(subject, case, subject.seed + 1)
    _unchanged(run, kept, "the next call (forward and backward)", "a buffer kept between calls")
    try:
        run.again(subject.seed + 1)
    except Exception:  # a graph that cannot run backward twice is no sign of shared memory
        return
    _unchanged(run, kept, "a second backward through the same graph (retain_graph=True)", "a workspace on ctx")


def _unchanged(run: _Pass, kept: list, when: str, where: str) -> None:
    for i, grad, copy in zip(run.positions, run.grads, kept):
        delta = _delta(grad, copy)
        if delta:
            raise Violation(f"the gradient of input {i} changed by max |delta| = {delta:.3g} when {when} ran "
                            f"with other cotangents: backward returns memory it writes again ({where}); return "
                            "a new tensor")


def _updated(subject, case, first: _Pass) -> None:
    """Update every returned gradient in place; on a change, name the one gradient that causes it alone."""
    repeats = _repeats(subject, case, first)
    problem = _after_update(subject, case, first, None, repeats)
    if problem is None:
        return
    for n in range(len(first.grads)):
        alone = _after_update(subject, case, _pass(subject, case, subject.seed), n, repeats)
        if alone:
            raise Violation(alone)
    raise Violation(problem)


def _repeats(subject, case, first: _Pass) -> _Repeats:
    tol = subject.tolerance()
    try:
        same_graph = _same(first.again(subject.seed), first.grads, tol)
    except Exception:  # a graph that cannot run backward twice
        same_graph = False
    again = _pass(subject, case, subject.seed)
    return _Repeats(same_graph, _same(again.outputs + again.grads, first.outputs + first.grads, tol))


def _after_update(subject, case, run: _Pass, n: int | None, repeats: _Repeats) -> str | None:
    """What changes after an in-place update of gradient ``n`` of ``run`` (every gradient when None)."""
    named = _named(run)
    before, grads = _copies([t for _, t in named]), _copies(run.grads)
    chosen = [g for k, g in enumerate(run.grads) if n in (None, k)]
    if not any([_bump(g) for g in chosen]):
        return None
    which = "each input" if n is None else f"input {run.positions[n]}"
    said = _UPDATE.format(which=which)
    for (label, now), then in zip(named, before):
        delta = _delta(now, then)
        if delta:
            return (f"after {said}, {label} changed: max |delta| = {delta:.3g}; the gradient is {label}'s own "
                    "memory: return a new tensor (compute it out of place, or .clone())")
    return _later(subject, case, run, grads, said, repeats)


def _named(run: _Pass) -> list[tuple[str, torch.Tensor]]:
    leaves = [(f"input {i}", a) for i, a in enumerate(run.leaves) if isinstance(a, torch.Tensor)]
    return leaves + [(f"output {k}", o) for k, o in enumerate(run.outputs)]


def _later(subject, case, run: _Pass, grads: list, said: str, repeats: _Repeats) -> str | None:
    """The next call, then a second backward through the same graph, against the gradients before."""
    tol = subject.tolerance()
    if repeats.next_call:
        problem = _difference(_pass(subject, case, subject.seed).grads, grads, run.positions, tol)
        if problem:
            return (f"after {said}, the next call gives a different result: {problem}; backward returns "
                    "memory kept between calls (a cache or workspace): return a new tensor")
    if repeats.same_graph:
        try:
            problem = _difference(run.again(subject.seed), grads, run.positions, tol)
        except Exception as exc:  # e.g. autograd's version counter: the update reached a saved tensor
            problem = f"it raises {type(exc).__name__}: {torch_sentence(exc)}"
        if problem:
            return (f"after {said}, a second backward through the same graph gives a different result: "
                    f"{problem}; backward returns memory kept on ctx and read again: return a new tensor")
    return None


def _difference(got: list, expected: list, positions: list[int], tol) -> str | None:
    for i, g, e in zip(positions, got, expected):
        if (g is None) != (e is None):
            return f"the gradient of input {i} is {'None' if g is None else 'a tensor'} where it was not"
        problem = None if g is None else mismatch(g, e, tol)
        if problem:
            return f"gradient of input {i}: {problem}"
    return None


def _same(got: list, expected: list, tol) -> bool:
    return _difference(got, expected, list(range(len(got))), tol) is None


def _bump(grad) -> bool:
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


def _copies(tensors) -> list:
    return [None if t is None else t.detach().clone() for t in tensors]


def _delta(now, then) -> float:
    """The largest change of a tensor against its earlier copy (0 when unchanged; NaN equals NaN)."""
    if now is None:
        return 0.0
    now, then = now.detach().nan_to_num(), then.nan_to_num()
    if torch.equal(now, then):
        return 0.0
    return float((wide(now) - wide(then)).abs().max())


CHECK = declared(
    "alias",
    run=run,
    script="""\
# The audit's property, step by step (audit/checks/alias.py); the first failure is printed and exits 1.
from types import SimpleNamespace

case = fresh(args)  # the case's values, kept apart from every run
UPDATE = "an in-place update of the gradient of {} (grad += 1, as accumulation or in-place clipping does)"


def fail(message):
    print(message)
    sys.exit(1)


def writable(xs):  # the call's arguments: a copy for each input forward declares it writes
    return [x.clone() if torch.is_tensor(x) and i in mutates else x for i, x in enumerate(xs)]


def snapshot(xs):
    return [(x.detach().clone(), x._version) if torch.is_tensor(x) else None for x in xs]


def changed(x, saved):
    copy, version = saved
    return x._version != version or not torch.equal(x.detach().nan_to_num(), copy.nan_to_num())


def mutations(xs, before):
    for i, (x, saved) in enumerate(zip(xs, before)):
        written = saved is not None and changed(x, saved)
        if written and i not in mutates:
            fail(f"forward modified input {i} in place, but mutates does not declare it")
        if i in mutates and saved is not None and not written:
            fail(f"input {i} is declared in mutates but forward left it unchanged")
        if written and kind == "function" and x.requires_grad and type(x.grad_fn).__name__.startswith("CloneBackward"):
            fail(f"forward modified input {i} in place without ctx.mark_dirty")


# Forward: the target itself (unguarded), on a copy of each input it declares it writes.
leaves = fresh(case)
xs = writable(leaves)
before = snapshot(xs)
try:
    outs = tensors_of(_target(*xs))
except RuntimeError as exc:
    if "a leaf Variable that requires grad has been used in an in-place operation" in str(exc):
        copies = [a.clone() if torch.is_tensor(a) else a for a in leaves]  # which input does it write?
        then = snapshot(copies)
        _target(*copies)
        mutations(copies, then)
    raise
if kind == "op":  # the schema's Tensor(a!) arguments against the registry's mutates
    schema = getattr(getattr(_target, "default", _target), "_schema", None)
    written = [a.alias_info for a in schema.arguments] if schema else []
    mutable = {i for i, info in enumerate(written) if info is not None and info.is_write}
    if schema and mutable != set(mutates):
        fail(f"the schema marks arguments {sorted(mutable)} as mutable, the registry's mutates {sorted(mutates)}")
    for i, (x, saved) in enumerate(zip(xs, before)):
        if schema and saved is not None and i not in mutable and changed(x, saved):
            fail(f"the op modified argument {i} in place, but its schema does not mark it mutable")
mutations(xs, before)
for k, out in enumerate(outs):
    for i, x in enumerate(xs):
        if (torch.is_tensor(x) and i not in set(views) | set(mutates) and out.numel() and x.numel()
                and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()):
            fail(f"output {k} shares storage with input {i} (a view or the input itself where a copy was promised)")

# Backward: grad_output and the inputs are left as they were.
positions = [i for i, a in enumerate(leaves) if torch.is_tensor(a) and a.requires_grad]
outs = live(outs)
if positions and outs:
    cots = cotangents(outs)
    kept_cots, kept_inputs = snapshot(cots), snapshot([leaves[i] for i in positions])
    torch.autograd.grad(outs, [leaves[i] for i in positions], cots, allow_unused=True)
    for k, (c, saved) in enumerate(zip(cots, kept_cots)):
        if changed(c, saved):
            fail(f"backward modified grad_output {k} in place")
    for i, saved in zip(positions, kept_inputs):
        if changed(leaves[i], saved):
            fail(f"backward modified input {i} in place")


# Gradient memory: a returned gradient is not written again, and updating it in place changes nothing else.
def one_pass(draw):  # forward and backward on fresh leaves (graph kept), cotangents drawn from `draw`
    leaves = fresh(case)
    outs = live(tensors_of(audited(*writable(leaves))))
    if not positions or not outs:
        return None
    found = torch.autograd.grad(outs, [leaves[i] for i in positions], cotangents(outs, draw), retain_graph=True,
                                allow_unused=True)
    return SimpleNamespace(leaves=leaves, outs=outs, grads=list(found))


def again(run, draw):  # a second backward through the same graph
    found = torch.autograd.grad(run.outs, [run.leaves[i] for i in positions], cotangents(run.outs, draw),
                                retain_graph=True, allow_unused=True)
    return list(found)


def copies(ts):
    return [None if t is None else t.detach().clone() for t in ts]


def delta(now, then):
    if now is None:
        return 0.0
    now, then = now.detach().nan_to_num(), then.nan_to_num()
    return 0.0 if torch.equal(now, then) else float((wide(now) - wide(then)).abs().max())


def difference(got, expected, where):
    for i, g, e in zip(where, got, expected):
        if (g is None) != (e is None):
            return f"the gradient of input {i} is {'None' if g is None else 'a tensor'} where it was not"
        if g is not None and not close(g, e):
            error = (wide(g) - wide(e)).abs().max().item() if g.shape == e.shape else "shape"
            return f"gradient of input {i}: max |got - expected| = {error}"
    return None


def unchanged(run, kept, when, where):
    for i, g, k in zip(positions, run.grads, kept):
        if delta(g, k):
            fail(f"the gradient of input {i} changed by max |delta| = {delta(g, k):.3g} when {when} ran with other "
                 f"cotangents: backward returns memory it writes again ({where})")


def bump(g):  # grad += 1; False where torch refuses (an expanded gradient) or there is nothing to write
    if g is None or g.numel() == 0:
        return False
    try:
        with torch.no_grad():
            g.add_(1)
    except RuntimeError:
        return False
    return True


def after_update(run, n):  # what changes after updating gradient n of run in place (every gradient: None)
    named = [(f"input {i}", a) for i, a in enumerate(run.leaves) if torch.is_tensor(a)]
    named += [(f"output {k}", o) for k, o in enumerate(run.outs)]
    before, grads = copies([t for _, t in named]), copies(run.grads)
    if not any([bump(g) for k, g in enumerate(run.grads) if n in (None, k)]):
        return None
    said = UPDATE.format("each input" if n is None else f"input {positions[n]}")
    for (label, now), then in zip(named, before):
        if delta(now, then):
            return f"after {said}, {label} changed: max |delta| = {delta(now, then):.3g}"
    problem = difference(one_pass(seed).grads, grads, positions) if next_call else None
    if problem:
        return f"after {said}, the next call gives a different result: {problem}"
    if same_graph:
        try:
            problem = difference(again(run, seed), grads, positions)
        except Exception as exc:  # e.g. autograd's version counter: the update reached a saved tensor
            problem = f"it raises {type(exc).__name__}: {exc}"
        if problem:
            return f"after {said}, a second backward through the same graph gives a different result: {problem}"
    return None


first = one_pass(seed)
if first is not None:
    kept = copies(first.grads)
    one_pass(seed + 1)
    unchanged(first, kept, "the next call (forward and backward)", "a buffer kept between calls")
    try:
        again(first, seed + 1)
    except Exception:  # a graph that cannot run backward twice is no sign of shared memory
        pass
    else:
        unchanged(first, kept, "a second backward through the same graph (retain_graph=True)", "a workspace on ctx")
    # Only where the target gives the same gradients again without an update is a difference the update's doing.
    try:
        same_graph = difference(again(first, seed), first.grads, range(len(first.grads))) is None
    except Exception:
        same_graph = False
    rerun = one_pass(seed)
    both = rerun.outs + rerun.grads
    next_call = difference(both, first.outs + first.grads, range(len(both))) is None
    problem = after_update(first, None)
    if problem:
        for n in range(len(first.grads)):  # name the one gradient that does it alone
            alone = after_update(one_pass(seed), n)
            if alone:
                fail(alone)
        fail(problem)
print("holds: no undeclared write or sharing in forward, no write in backward, no gradient memory that changes "
      "a result")
sys.exit(0)
""",
    script_values=tolerance_values,
)
