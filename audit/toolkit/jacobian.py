"""Running torch's gradcheck on a target, and turning its failures into located, sized messages."""

from __future__ import annotations

import math

import torch

from audit.contract import real_counterpart
from audit.kit import outputs_without_graph, realified, torch_sentence
from audit.registry.model import Tolerance
from audit.toolkit.tensors import dense, filled, floating, grad_inputs, grad_outputs, number, outputs_of, wide

#: Above this many input elements, slow gradcheck (O(n^2) time and memory) gives way to fast mode.
SLOW_MODE_LIMIT = 1024

_EPS = {"float64": 1e-6, "float32": 1e-3, "bfloat16": 1e-2, "float16": 1e-2}
_TOL = {"float64": (1e-5, 1e-3), "float32": (1e-2, 1e-2), "bfloat16": (1e-1, 1e-1), "float16": (5e-2, 5e-2)}


def wrap(subject, args, call=None):
    """The target (or ``call``, given the full argument list) as a function of its grad-requiring tensors only,
    returning floating outputs (dense)."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    call = call or subject.call

    def fn(*inputs):
        full = list(args)
        for i, x in zip(positions, inputs):
            full[i] = x
        # a sparse output made dense (masked: its gradient stays on its pattern), as torch's gradcheck asks
        outputs = [dense(o) for o in outputs_of(call(full)) if floating(o)]
        return tuple(outputs) if len(outputs) != 1 else outputs[0]

    return fn


def gradcheck_options(subject, inputs) -> dict:
    """eps and tolerances for the dtype; fast mode with atol scaled by size on large inputs.

    With a sparse input, gradcheck runs ``masked``: unspecified elements are neither perturbed nor compared.
    Fast mode compares one random projection vᵀJu, a sum over n terms, and scales atol by
    sum(u)·sum(v) (about 0.75·n): one wrong element then moves vᵀJu by about 1/n of its error,
    far inside the default tolerances. Dividing atol and rtol by n restores the power to catch it.
    """
    atol, rtol = gradcheck_tolerance(subject)
    size = sum(x.numel() for x in inputs)
    fast = size > SLOW_MODE_LIMIT
    scale = size if fast else 1
    options = {"eps": _EPS[real_counterpart(subject.dtype)], "atol": atol / scale, "rtol": rtol / scale,
               "fast_mode": fast, "check_undefined_grad": False}
    if any(x.layout != torch.strided for x in inputs):  # only the specified elements of a sparse input count
        options["masked"] = True
    return options


def gradcheck_values(subject, case) -> dict:
    """``script_values`` of the checks that run torch's gradcheck: its options as the audit passes them."""
    return {"options": gradcheck_options(subject, grad_inputs(subject.args(case)))}


def gradcheck_tolerance(subject) -> tuple[float, float]:
    """(atol, rtol) for comparing one finite-difference estimate with another in the cell's dtype."""
    tol = subject.entry.tolerance_for(subject.dtype, Tolerance(*_TOL[real_counterpart(subject.dtype)]))
    return tol.atol, tol.rtol


def explain_gradcheck_failure(fn, inputs, exc: Exception, options: dict) -> str:
    """The largest analytic-vs-numeric difference and where it is, with torch's own first line where it
    says more than that; torch's line alone when nothing is located."""
    said = torch_sentence(exc)
    if any(x.layout != torch.strided for x in inputs):  # torch's masked comparison: located in its own words
        return f"torch.autograd.gradcheck (masked: unspecified elements of sparse inputs ignored): {said}"
    try:
        conjugated = _conjugated(fn, inputs, options["eps"], options["atol"], options["rtol"])
        located = conjugated or _located(fn, inputs, options)
    except Exception:  # the diagnosis is a courtesy; torch's message still stands
        located = None
    if not located:
        return f"torch.autograd.gradcheck: {said}"
    return located if located.startswith(f"{said}:") else f"{located}; torch.autograd.gradcheck: {said}"


def _locate(fn, inputs, eps, atol, rtol) -> str | None:
    analytic = _analytic(fn, inputs)
    numeric = _numeric(fn, inputs, eps)
    worst = None
    for (o, i), a in analytic.items():
        n = numeric[(o, i)]
        excess = _excess(a, n, atol, rtol)
        if excess.numel() and (worst is None or excess.max() > worst[0]):
            flat = int(excess.reshape(-1).argmax())
            worst = (excess.max().item(), o, i, flat, a, n)
    if worst is None or worst[0] <= 0:
        return None
    _, o, i, flat, a, n = worst
    row, col = divmod(flat, a.shape[1])
    out_index = list(_unravel(row, _output_shapes(fn, inputs)[o]))
    in_index = list(_unravel(col, inputs[i].shape))
    got, want = a.reshape(-1)[flat].item(), n.reshape(-1)[flat].item()
    where = f"Jacobian mismatch for output {o} with respect to input {i}:"
    if not math.isfinite(got) or not math.isfinite(want):
        return f"{where} {_non_finite(got, want, f'd out{out_index} / d in[{i}]{in_index}', a, n)}"
    return (f"{where} max |analytic - numeric| = {abs(got - want):.3g} at d out{out_index} / d in{in_index} "
            f"(analytic {got:.6g}, numeric {want:.6g}) > atol {atol:g} + rtol {rtol:g}·|numeric|")


def _excess(a: torch.Tensor, n: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """How far each analytic element is past its allowance; a NaN or an infinity on one side only is
    infinitely far (first to be named), equal values (equal infinities too) are not past it."""
    excess = ((a - n).abs() - (atol + rtol * n.abs())).nan_to_num(nan=math.inf)
    return excess.masked_fill(a == n, -math.inf)


def _non_finite(got: float, want: float, where: str, a: torch.Tensor, n: torch.Tensor) -> str:
    """"analytic NaN at d out[0] / d in[2][1]; numeric 0.37", and how many elements are so."""
    side, value, other, other_value, block = (("analytic", got, "numeric", want, a) if not math.isfinite(got)
                                              else ("numeric", want, "analytic", got, n))
    count = int((~torch.isfinite(block)).sum())
    hint = ("" if side == "analytic" else
            ": the function is not finite within eps of this point (a domain edge?); narrow `domain`")
    return (f"{side} {number(value)} at {where}; {other} {number(other_value)} ({count} of {block.numel()} "
            f"{side} elements of this block are not finite){hint}")


def _located(fn, inputs, options: dict) -> str | None:
    """:func:`_locate` on the real view of ``fn``, saying how a complex element's index reads."""
    real_fn, real_inputs = realified(fn, inputs)
    found = _locate(real_fn, real_inputs, options["eps"], options["atol"], options["rtol"])
    if found and real_fn is not fn:
        found += " (complex tensors seen as real views: a last index 0 is the real part, 1 the imaginary part)"
    return found


def _conjugated(fn, inputs, eps, atol, rtol) -> str | None:
    """For a complex input whose gradient is the conjugate of the finite-difference one (and not that one): a
    message naming PyTorch's convention. Compared as one vector-Jacobian product with random cotangents, the
    numeric side being dL/da + i·dL/db for the real loss L = Re<cotangents, outputs> of z = a + ib."""
    if not any(x.is_complex() for x in inputs):
        return None
    xs = [x.detach().requires_grad_() for x in inputs]
    outs = _outputs_live(fn, xs)
    cots = grad_outputs(outs, 0)
    analytic = filled(torch.autograd.grad(outs, xs, cots, allow_unused=True), xs)
    loss = lambda *ys: sum(float((c.conj() * o).real.sum()) for o, c in zip(outputs_without_graph(fn, ys), cots))
    for i, (x, got) in enumerate(zip(inputs, analytic)):
        if not x.is_complex():
            continue
        numeric = _wirtinger(loss, [y.detach() for y in inputs], i, eps)
        close = lambda a: bool(((got - a).abs() <= atol + rtol * a.abs()).all())
        if not close(numeric) and close(numeric.conj()):
            return (f"the gradient with respect to input {i} looks conjugated: it equals the conjugate of the "
                    f"finite-difference gradient (max |analytic - numeric| = {float((got - numeric).abs().max()):.3g}, "
                    f"max |analytic - conj(numeric)| = {float((got - numeric.conj()).abs().max()):.3g}); PyTorch's "
                    "convention for complex inputs is the conjugate Wirtinger one, grad = g * conj(df/dz) for a "
                    "holomorphic f (for a real loss L of z = a + ib, grad = dL/da + i·dL/db): return the conjugate "
                    "of what backward returns now (for |z|^2, 2 * g * z, not 2 * g * z.conj())")
    return None


def _outputs_live(fn, xs) -> list:
    """The outputs of ``fn(*xs)`` that carry a gradient."""
    found = fn(*xs)
    return [o for o in (found if isinstance(found, tuple) else (found,)) if o.requires_grad]


def _wirtinger(loss, base, i: int, eps: float) -> torch.Tensor:
    """dL/da + i·dL/db for each element of input ``i`` (a = real part, b = imaginary part), by central differences."""
    x = base[i]
    result = torch.zeros(x.numel(), dtype=torch.complex128)
    for k in range(x.numel()):
        for unit in (1.0, 1j):  # a step along the real part gives dL/da, along the imaginary part i·dL/db
            plus, minus = ([y.clone() for y in base] for _ in range(2))
            plus[i].view(-1)[k] += eps * unit
            minus[i].view(-1)[k] -= eps * unit
            result[k] += unit * (loss(*plus) - loss(*minus)) / (2 * eps)
    return result.reshape(x.shape).to(x.device)


def _output_shapes(fn, inputs):
    with torch.no_grad():
        out = fn(*[x.detach() for x in inputs])
    return [o.shape for o in (out if isinstance(out, tuple) else (out,))]


def _unravel(flat: int, shape) -> tuple:
    if not shape:
        return ()
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape)))


def _analytic(fn, inputs) -> dict:
    xs = [x.detach().requires_grad_() for x in inputs]
    out = fn(*xs)
    outputs = list(out) if isinstance(out, tuple) else [out]
    result = {}
    for o, y in enumerate(outputs):
        rows = [[torch.zeros(x.numel(), dtype=torch.float64) for x in xs] for _ in range(y.numel())]
        for r in range(y.numel()):
            seed = torch.zeros(y.numel(), dtype=y.dtype).index_fill_(0, torch.tensor(r), 1.0).view_as(y)
            if not y.requires_grad:
                continue
            grads = torch.autograd.grad(y, xs, seed, retain_graph=True, allow_unused=True)
            for i, g in enumerate(grads):
                if g is not None:
                    rows[r][i] = wide(g.detach()).reshape(-1)
        for i, x in enumerate(xs):
            result[(o, i)] = torch.stack([row[i] for row in rows]) if rows else torch.zeros(0, x.numel())
    return result


def _numeric(fn, inputs, eps) -> dict:
    result = {}
    base = [x.detach().clone() for x in inputs]
    for i, x in enumerate(base):
        columns = []
        for k in range(x.numel()):
            plus, minus = _shifted(fn, base, i, k, eps), _shifted(fn, base, i, k, -eps)
            columns.append([((p - m) / (2 * eps)).double().reshape(-1) for p, m in zip(plus, minus)])
        for o in range(len(_shifted(fn, base, i, None, 0.0))):
            result[(o, i)] = torch.stack([c[o] for c in columns], dim=1) if columns else torch.zeros(0, 0)
    return result


def _shifted(fn, base, i, k, delta):
    xs = [x.clone() for x in base]
    if k is not None:
        xs[i].view(-1)[k] += delta
    with torch.no_grad():
        out = fn(*xs)
    return [o for o in (out if isinstance(out, tuple) else (out,))]
