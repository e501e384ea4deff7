"""A self-contained replay script for a failing cell: nothing but torch and the target's package."""

from __future__ import annotations

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
    lines += [f"{name} = {value!r}" for name, value in (values or {}).items()]
    if entry.kind == "module":
        lines.append("fn = fn.to(dtype=dtype, device=device)")
    lines += _guard(entry, rng_seed)
    if entry.kind == "model":
        lines.append(MODEL_REPLAY.format(batch=entry.training.batch, batches=entry.training.batches))
        return "\n".join(lines) + "\n"
    if case.layouts:
        lines.append(LAYOUT_HELPER)
    lines.append("args = [")
    lines += [f"    {_laid_out(_arg(a), case.layout(i))}," for i, a in enumerate(case.args)]
    lines.append("]")
    if case.in_dims:
        lines.append(f"in_dims = {list(case.in_dims)!r}  # vmap batch position per argument (None: unbatched)")
    if entry.batch:
        axes = {i: spec.shape.index(entry.batch) for i, spec in entry.tensor_inputs if entry.batch in spec.shape}
        lines.append(f"batch_axes = {axes!r}  # argument -> the axis of the batch dim {entry.batch}")
    if "grads(" in (check.script or "") or "differs(" in (check.script or ""):
        lines.append(GRADS_HELPER)
    lines.append(check.script or "print(fn(*args))")
    return "\n".join(lines) + "\n"


GRADS_HELPER = '''\
def grads(f, xs, layout=None):
    """Floating outputs of f(*xs) and the gradients of <outputs, cotangents drawn from the cell's seed> for
    the inputs that require grad (zeros where unused); ``layout`` lays the cotangents out as the audit did."""
    out = f(*xs)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if torch.is_tensor(o) and o.is_floating_point()]
    generator = torch.Generator().manual_seed(seed)
    live = [o for o in outs if o.requires_grad]  # one cotangent per differentiable output, in order
    cots = [torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o) for o in live]
    if layout in ("expanded", "expanded values"):  # stride 0, or the same values dense
        cots = [c.reshape(-1)[:1].expand(c.shape) if c.numel() and c.dim() else c for c in cots]
        cots = [c.contiguous() for c in cots] if layout == "expanded values" else cots
    elif layout is not None:
        cots = [laid_out(c, layout if c.dim() >= (2 if layout == "transposed" else 1) else "offset") for c in cots]
    diff = [x for x in xs if torch.is_tensor(x) and x.requires_grad]
    found = torch.autograd.grad(live, diff, cots, allow_unused=True) if live and diff else []
    return [o.detach() for o in outs], [torch.zeros_like(x) if g is None else g for g, x in zip(found, diff)]


def differs(label, got, expected):
    """Print and say whether ``got`` is not close to ``expected`` (the audit's atol and rtol)."""
    bad = False
    for i, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or not torch.allclose(g.double(), e.double(), atol=atol, rtol=rtol, equal_nan=True):
            error = (g.double() - e.double()).abs().max().item() if g.shape == e.shape else "shape"
            print(f"{label} {i}: max |difference| {error} (got {g.dtype}, expected {e.dtype})")
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


MODEL_REPLAY = '''\
model, make_batch, loss_fn = fn
model = model.to(dtype=dtype, device=device)
for seed in range({batches}):
    inputs, targets = make_batch({batch}, seed)
    model.zero_grad()
    loss = loss_fn(model(*inputs), targets)
    loss.backward()
    norms = [p.grad.norm().item() for p in model.parameters() if p.grad is not None]
    print("batch seed", seed, "loss", loss.item(), "gradient norms", norms)
'''


def _guard(entry: Entry, rng_seed: int) -> list[str]:
    """The target as the audit calls it (Subject.guard): a leaf at a mutates position cloned, and for a
    stochastic entry torch's generator reset first (the audit also makes each draw in float64 on the CPU:
    not replayed here, so a float64 contiguous CPU case replays exactly)."""
    body = []
    if entry.mutates:
        body.append(f"    args = [a.clone() if i in {list(entry.mutates)!r} and torch.is_tensor(a) and a.is_leaf "
                    "else a for i, a in enumerate(args)]")
    if not entry.supports.deterministic:
        body.append(f"    torch.manual_seed({rng_seed})")
    if not body:
        return []
    return ["_target = fn", "def fn(*args):  # as the audit calls the target", *body, "    return _target(*args)"]


def _target_line(name: str, target: str, kind: str) -> str:
    if kind == "op":
        namespace, _, rest = target.partition("::")
        return f"{name} = torch.ops.{namespace}.{rest}"
    module, _, qualname = target.partition(":")
    if kind in ("module", "model"):  # the factory, called from the audit's fixed seed
        return f"import {module}\ntorch.manual_seed(0)\n{name} = {module}.{qualname}()"
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
