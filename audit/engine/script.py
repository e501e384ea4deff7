"""A self-contained replay script for a failing cell: nothing but torch and the target's package."""

from __future__ import annotations

import dataclasses

from audit.inputs.case import Case, TensorArg
from audit.registry.model import Entry

HEADER = '''\
"""Replays {name} {check} ({dtype}, {device}), as found by autograd-audit (seed {seed}).

{message}

Owner: {owners}. Needs only torch and the target's package; run: python {{this file}}
"""
import sys

sys.path.insert(0, {base!r})
import torch
'''


def replay_script(entry: Entry, check, case: Case, *, dtype: str, device: str, seed: int,
                  message: str, base: str, tolerance, rng_seed: int = 0, values: dict | None = None) -> str:
    """The script's text; ``tolerance`` is the comparison the check used (atol, rtol), ``rng_seed`` the
    cell's seed, to which a stochastic entry's generators are reset before each call, as in the audit;
    ``values`` the further constants the check's property used (see ``Check.script_values``)."""
    lines = [HEADER.format(name=entry.name, check=check.name, dtype=dtype, device=device, seed=seed,
                           message=_comment(message), owners=", ".join(entry.owners), base=base)]
    lines += [f"import {module}" for module in entry.load]
    lines.append(_target_line("fn", entry.target, entry.kind))
    lines.append(_target_line("ref", entry.reference, "callable") if entry.reference else "ref = None")
    lines.append(f"dtype, device = torch.{dtype}, {device!r}")
    lines.append(f"atol, rtol = {tolerance.atol!r}, {tolerance.rtol!r}")
    lines.append(f"seed = {rng_seed!r}  # the cell's seed: its cotangents are drawn from it")
    values = values or {}
    cases = {name: value for name, value in values.items() if _is_cases(value)}
    if values:
        lines.append("# what the check's property also uses, as the cell used it:")
    lines += [f"{name} = {value!r}" for name, value in values.items() if name not in cases]
    if entry.kind == "module":
        lines.append("torch.manual_seed(0)\nfn = module = make().to(dtype=dtype, device=device)  # built from the audit's seed")
    body = (check.model_script if entry.kind == "model" else check.script) or "print(fn(*args))"
    lines += _guard(entry, rng_seed)
    if entry.kind == "model":
        lines.append(MODEL_HELPER.format(plan=dataclasses.asdict(entry.training)))
        return "\n".join(lines + [body]) + "\n"
    if case.layouts:
        lines.append(LAYOUT_HELPER)
    lines.append("args = [")
    lines += _rendered(case)
    lines.append("]")
    if case.in_dims:
        lines.append(f"in_dims = {list(case.in_dims)!r}  # vmap batch position per argument (None: unbatched)")
    if entry.batch:
        axes = {i: spec.shape.index(entry.batch) for i, spec in entry.tensor_inputs if entry.batch in spec.shape}
        lines.append(f"batch_axes = {axes!r}  # argument -> the axis of the batch dim {entry.batch}")
    lines += _case_lines(cases)
    if any(f"{name}(" in body for name in HELPERS):
        lines.append(GRADS_HELPER)
    lines.append(body)
    return "\n".join(lines) + "\n"


def _rendered(case: Case, indent: str = "    ") -> list[str]:
    """One line per argument of ``case``: its exact values, dtype, shape and memory layout."""
    return [f"{indent}{_laid_out(_arg(a), case.layout(i))}," for i, a in enumerate(case.args)]


def _is_cases(value) -> bool:
    """Whether a ``script_values`` value is a case, or a list of cases, to write as argument lists."""
    return isinstance(value, Case) or (isinstance(value, list) and bool(value) and all(isinstance(v, Case) for v in value))


def _case_lines(cases: dict) -> list[str]:
    """A ``script_values`` :class:`Case` as its argument list, a list of cases as a list of argument lists."""
    lines = []
    for name, value in cases.items():
        if isinstance(value, Case):
            lines += [f"{name} = [", *_rendered(value), "]"]
            continue
        lines.append(f"{name} = [")
        for item in value:
            lines += ["    [", *_rendered(item, "        "), "    ],"]
        lines.append("]")
    return lines


#: The functions GRADS_HELPER defines: a script that calls one gets them all.
HELPERS = ("grads", "differs", "tensors_of", "live", "cotangents", "filled", "vjp", "fresh")

GRADS_HELPER = '''\
def tensors_of(out):
    """The tensors a call returned (a tensor, or those of a tuple or list)."""
    return [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if torch.is_tensor(o)]


def live(outs):
    """The floating outputs that take part in autograd."""
    return [o for o in outs if o.is_floating_point() and o.requires_grad]


def cotangents(outs, seed=seed):
    """One cotangent per output, drawn as the audit draws them: from ``seed`` (the cell's), in float64."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o) for o in outs]


def filled(found, xs):
    """Gradients with each None (input unused) as zeros of its input's shape."""
    return [torch.zeros_like(x) if g is None else g for g, x in zip(found, xs)]


def vjp(outs, xs):
    """Gradients of <the live outputs, their cotangents> for the xs that require grad (zeros where unused);
    [] when nothing is differentiable."""
    outs, diff = live(outs), [x for x in xs if torch.is_tensor(x) and x.requires_grad]
    if not (outs and diff):
        return []
    return filled(torch.autograd.grad(outs, diff, cotangents(outs), allow_unused=True), diff)


def fresh(xs):
    """New leaves with the values of ``xs`` (requires_grad kept), as the audit builds for each run, so that a
    target writing its arguments cannot change the next run; a transposed layout is kept, a strided or offset one
    not (the checks that rebuild draw no layouts)."""
    return [x.detach().clone().requires_grad_(x.requires_grad) if torch.is_tensor(x) else x for x in xs]


def grads(f, xs, layout=None):
    """Floating outputs of f(*xs) and the gradients of <outputs, cotangents drawn from the cell's seed> for
    the inputs that require grad (zeros where unused); ``layout`` lays the cotangents out as the audit did."""
    outs = [o for o in tensors_of(f(*xs)) if o.is_floating_point()]
    live_outs = live(outs)  # one cotangent per differentiable output, in order
    cots = cotangents(live_outs)
    if layout in ("expanded", "expanded values"):  # stride 0, or the same values dense
        cots = [c.reshape(-1)[:1].expand(c.shape) if c.numel() and c.dim() else c for c in cots]
        cots = [c.contiguous() for c in cots] if layout == "expanded values" else cots
    elif layout is not None:
        cots = [laid_out(c, layout if c.dim() >= (2 if layout == "transposed" else 1) else "offset") for c in cots]
    diff = [x for x in xs if torch.is_tensor(x) and x.requires_grad]
    found = torch.autograd.grad(live_outs, diff, cots, allow_unused=True) if live_outs and diff else []
    return [o.detach() for o in outs], filled(found, diff)


def differs(label, got, expected, atol=atol, rtol=rtol):
    """Print and say whether ``got`` is not close to ``expected`` (the audit's atol and rtol)."""
    if len(got) != len(expected):
        print(f"{label}: {len(got)} tensors, expected {len(expected)}")
        return True
    bad = False
    for i, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or not torch.allclose(g.double(), e.double(), atol=atol, rtol=rtol, equal_nan=True):
            what = (f"max |difference| {(g.double() - e.double()).abs().max().item()}" if g.shape == e.shape
                    else f"shape {list(g.shape)}, expected {list(e.shape)}")
            print(f"{label} {i}: {what} (got {g.dtype}, expected {e.dtype})")
            bad = True
    return bad
'''


LAYOUT_HELPER = '''\
def laid_out(x, layout):
    """The same values in a non-contiguous memory layout, as the audit drew it."""
    grad = x.requires_grad
    x = x.detach()
    if layout == "transposed":
        dims = list(reversed(range(x.dim())))
        y = x.permute(*dims).contiguous().permute(*dims)
    elif layout == "strided":
        y = torch.empty(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype, device=x.device)[..., ::2]
        y.copy_(x)
    elif layout == "offset":
        y = torch.empty(x.numel() + 3, dtype=x.dtype, device=x.device)[3:].view(x.shape)
        y.copy_(x)
    elif layout == "channels_last":
        y = x.contiguous(memory_format=torch.channels_last)
    else:
        y = x
    return y.requires_grad_(grad)
'''


def _laid_out(expression: str, layout: str) -> str:
    return expression if layout == "contiguous" else f"laid_out({expression}, {layout!r})"


def _comment(message: str) -> str:
    return message.replace('"""', "'''").replace("\\", "\\\\")


MODEL_HELPER = '''\
plan = {plan!r}  # the entry's training settings


def build():
    """The model as the audit builds it: the factory called from seed 0, at the cell's dtype and device."""
    torch.manual_seed(0)
    model, make_batch, loss_fn = fn()
    return model.to(dtype=dtype, device=device), make_batch, loss_fn


def batch(make_batch, size, batch_seed):
    """make_batch(size, seed), floating tensors in the cell's dtype, all on its device."""
    inputs, targets = make_batch(size, batch_seed)
    cast = lambda x: (x.to(device=device, dtype=dtype) if x.is_floating_point() else x.to(device)) if torch.is_tensor(x) else x
    return tuple(cast(x) for x in inputs), cast(targets)


def step(model, loss_fn, inputs, targets):
    """Forward and backward from zero gradients; the loss."""
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(*inputs), targets)
    loss.backward()
    return loss


def gradients(model):
    """Every parameter's gradient by name (zeros where none arrived)."""
    return {{n: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
            for n, p in model.named_parameters() if p.requires_grad}}


def differ(label, got, expected, atol=atol, rtol=rtol):
    """Print and say whether the gradients ``got`` are not close to ``expected`` (by parameter name)."""
    bad = False
    for name, e in expected.items():
        g = got[name]
        if g.shape != e.shape or not torch.allclose(g.double(), e.double(), atol=atol, rtol=rtol, equal_nan=True):
            error = (g.double() - e.double()).abs().max().item() if g.shape == e.shape else "shape"
            print(f"{{label}} of {{name!r}}: max |difference| {{error}}")
            bad = True
    return bad
'''


def _guard(entry: Entry, rng_seed: int) -> list[str]:
    """The target as the audit calls it (Subject.guard), as ``audited``: a leaf at a mutates position cloned,
    and torch's generator reset to the cell's seed first (the audit also makes a stochastic entry's draws in
    float64 on the CPU: not replayed here, so a float64 contiguous CPU case replays exactly). ``fn`` and ``ref``
    are called so where that changes anything (an in-place or stochastic entry); ``_target`` is the target
    itself, ``kind``, ``mutates`` and ``views`` what the registry says of it."""
    if entry.kind == "model":
        return []
    lines = [f"kind, mutates, views = {entry.kind!r}, {list(entry.mutates)!r}, {list(entry.views)!r}  # registry",
             "_target, _reference = fn, ref  # the target and reference themselves", GUARDED.format(seed=rng_seed), "audited = guarded(_target)"]
    if entry.mutates or not entry.supports.deterministic:
        lines.append("fn, ref = audited, ref and guarded(ref)")
    return lines


GUARDED = '''\
def guarded(f):
    """``f`` called as the audit calls the target and its reference: each leaf at a mutates position replaced
    by its clone (clone=False: the caller passes copies), and torch's generator reset to the cell's seed first."""
    def call(*args, clone=True):
        if clone:
            args = [a.clone() if i in mutates and torch.is_tensor(a) and a.is_leaf else a for i, a in enumerate(args)]
        torch.manual_seed({seed})
        return f(*args)
    return call
'''


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


def _arg(arg) -> str:
    if not isinstance(arg, TensorArg):
        return repr(arg.value)
    dtype = f"torch.{arg.dtype}" if arg.dtype else "dtype"
    values = repr(arg.values.reshape(-1).tolist())
    grad = ".requires_grad_()" if arg.requires_grad else ""
    return (f"torch.tensor({values}, dtype={dtype}, device=device)"
            f".reshape({list(arg.values.shape)!r}){grad}")
