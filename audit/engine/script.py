"""A self-contained replay script for a failing cell: nothing but torch and the target's package."""

from __future__ import annotations

import dataclasses

import numpy as np

from audit.contract import COMPLEX_DTYPES
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


def floating(x):
    """Whether autograd differentiates x's dtype: real floating or complex."""
    return x.is_floating_point() or x.is_complex()


def widest(x):
    """The dtype x is compared in (and its cotangents drawn in): complex128 if complex, else float64."""
    return torch.complex128 if x.is_complex() else torch.float64


def wide(x):
    """x in its comparison dtype (complex128 or float64)."""
    return x.to(widest(x))
'''


#: The audit's comparison (audit.toolkit.tensors.mismatch), in every script: ``scale`` is a share of the
#: expected tensor's largest value, added to atol (8 eps in float16 and bfloat16, else 0).
CLOSE = '''

def close(got, expected, atol=atol, rtol=rtol, scale=scale, magnitude=0.0):
    """|got - expected| <= atol + scale * max(max|expected|, magnitude) + rtol * |expected| everywhere, as the
    audit compares (magnitude: the largest value the float64 computation passes through, where measured)."""
    got, expected = wide(got.detach()).cpu(), wide(expected.detach()).cpu()
    if got.shape != expected.shape:
        return False
    if scale and expected.numel():
        atol = atol + scale * max(expected.abs().nan_to_num(nan=0.0, posinf=0.0).max().item(), magnitude)
    return torch.allclose(got, expected, atol=atol, rtol=rtol, equal_nan=True)
'''


def replay_script(entry: Entry, check, case: Case, *, dtype: str, device: str, seed: int,
                  message: str, base: str, tolerance, rng_seed: int = 0, values: dict | None = None) -> str:
    """The script's text; ``tolerance`` is the comparison the check used (atol, rtol), ``rng_seed`` the
    cell's seed, to which a stochastic entry's generators are reset before each call, as in the audit;
    ``values`` the further constants the check's property used (see ``Check.script_values``)."""
    lines = [HEADER.format(name=entry.name, check=check.name, dtype=dtype, device=device, seed=seed,
                           message=_comment(message), owners=", ".join(entry.owners), base=base)]
    if entry.triton == "interpret":  # before anything imports triton, as the audit's worker does
        lines.append("import os\n\nif not torch.cuda.is_available():  # Triton kernels through Triton's interpreter\n"
                     "    os.environ.setdefault('TRITON_INTERPRET', '1')")
    lines += [f"import {module}" for module in entry.load]
    lines.append(_target_line("fn", entry.target, entry.kind))
    lines.append(_target_line("ref", entry.reference, "callable") if entry.reference else "ref = None")
    lines.append(f"dtype, device = torch.{dtype}, {device!r}")
    lines.append(f"atol, rtol, scale = {tolerance.atol!r}, {tolerance.rtol!r}, {tolerance.scale!r}")
    lines.append(CLOSE)
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
    if _has_sparse([case, *cases.values()]):
        lines.append(_sparse_helper())
        lines.append("ref = ref and through_dense(ref)  # a sparse input reaches the reference dense, as in the audit")
    lines.append("args = [")
    lines += _rendered(case, dtype)
    lines.append("]")
    if case.in_dims:
        lines.append(f"in_dims = {list(case.in_dims)!r}  # vmap batch position per argument (None: unbatched)")
    if entry.batch:
        axes = {i: spec.shape.index(entry.batch) for i, spec in entry.tensor_inputs if entry.batch in spec.shape}
        lines.append(f"batch_axes = {axes!r}  # argument -> the axis of the batch dim {entry.batch}")
    lines += _case_lines(cases, dtype)
    if any(f"{name}(" in body for name in HELPERS):
        lines.append(GRADS_HELPER)
    if "largest_value(" in body:
        lines.append(_largest_helper())
    if "defined_only(" in body:
        lines.append(_reference_helper())
    if "spread(" in body:
        from audit.toolkit import noise

        lines.append(noise.script_helper())
    lines.append(body)
    return "\n".join(lines) + "\n"


def _rendered(case: Case, dtype: str, indent: str = "    ") -> list[str]:
    """One line per argument of ``case`` in a ``dtype`` cell: its exact values, dtype, shape and memory layout."""
    return [f"{indent}{_laid_out(_arg(a, dtype), case.layout(i))}," for i, a in enumerate(case.args)]


def _has_sparse(cases: list) -> bool:
    """Whether a sparse tensor is among the arguments of ``cases`` (cases, or lists of cases)."""
    flat = [c for item in cases for c in (item if isinstance(item, list) else [item])]
    return any(isinstance(a, TensorArg) and a.sparse_layout for c in flat for a in c.args)


def _largest_helper() -> str:
    """How the audit measures the largest value a computation passes through (audit.toolkit.rounding), as
    source: the script allows low-precision rounding exactly as the cell did."""
    import inspect

    from audit.toolkit import rounding

    return ("from torch.utils._python_dispatch import TorchDispatchMode\n\n\n"
            + "\n\n".join(inspect.getsource(f) for f in (rounding.Largest, rounding.largest_value)))


def _sparse_helper() -> str:
    """The functions the audit builds sparse inputs and judges their gradients with, as source: the script
    rebuilds and judges them exactly."""
    from audit.inputs.sparse import SCRIPT_FUNCTIONS

    return _sources(SCRIPT_FUNCTIONS)


def _reference_helper() -> str:
    """How the audit leaves out the elements where the reference is undefined (audit.checks.reference), as
    source: the script compares with the reference exactly as the cell did."""
    from audit.checks import reference

    return _sources((reference.undefined_where, reference.defined_only))


def _sources(functions) -> str:
    import inspect

    return "\n\n".join(inspect.getsource(f) for f in functions)


def _is_cases(value) -> bool:
    """Whether a ``script_values`` value is a case, or a list of cases, to write as argument lists."""
    return isinstance(value, Case) or (isinstance(value, list) and bool(value) and all(isinstance(v, Case) for v in value))


def _case_lines(cases: dict, dtype: str) -> list[str]:
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



#: The functions GRADS_HELPER defines: a script that calls one gets them all.
HELPERS = ("grads", "differs", "tensors_of", "live", "cotangents", "filled", "vjp", "fresh")

GRADS_HELPER = '''\
def tensors_of(out):
    """The tensors a call returned (a tensor, or those of a tuple or list)."""
    return [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if torch.is_tensor(o)]


def live(outs):
    """The floating outputs that take part in autograd."""
    return [o for o in outs if floating(o) and o.requires_grad]


def cotangents(outs, seed=seed):
    """One cotangent per output, drawn as the audit draws them: from ``seed`` (the cell's), in float64 (complex128
    for a complex output)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o) for o in outs]


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
    outs = [o for o in tensors_of(f(*xs)) if floating(o)]
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


def differs(label, got, expected, atol=atol, rtol=rtol, magnitude=0.0):
    """Print and say whether ``got`` is not close to ``expected`` (the audit's comparison, see close)."""
    if len(got) != len(expected):
        print(f"{label}: {len(got)} tensors, expected {len(expected)}")
        return True
    bad = False
    for i, (g, e) in enumerate(zip(got, expected)):
        g, e = [t.to_dense() if t.layout != torch.strided else t for t in (g, e)]  # sparse: its values, zeros elsewhere
        if not close(g, e, atol, rtol, magnitude=magnitude):
            what = (f"max |difference| {(wide(g) - wide(e)).abs().max().item()}" if g.shape == e.shape
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
    cast = lambda x: (x.to(device=device, dtype=dtype) if floating(x) else x.to(device)) if torch.is_tensor(x) else x
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
        if not close(g, e, atol, rtol):
            error = (wide(g) - wide(e)).abs().max().item() if g.shape == e.shape else "shape"
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


def _arg(arg, cell_dtype: str) -> str:
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
    if arg.sparse_layout:  # the values everywhere, and which of them the sparse tensor holds
        pattern = f"torch.tensor({arg.pattern.reshape(-1).tolist()!r}, dtype=torch.bool, device=device).reshape({shape!r})"
        return f"sparse_from({dense}, {pattern}, {arg.sparse_layout!r}){grad}"
    return f"{dense}{grad}"
