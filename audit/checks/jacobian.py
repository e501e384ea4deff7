"""Running torch's gradcheck on a target, and turning its failures into located, sized messages."""

from __future__ import annotations

import re

import torch

from audit.checks.subject import grad_inputs
from audit.checks.tensors import dense, outputs_of

#: Above this many input elements, slow gradcheck (O(n^2) time and memory) gives way to fast mode.
SLOW_MODE_LIMIT = 1024

_EPS = {"float64": 1e-6, "float32": 1e-3, "bfloat16": 1e-2, "float16": 1e-2}
_TOL = {"float64": (1e-5, 1e-3), "float32": (1e-2, 1e-2), "bfloat16": (1e-1, 1e-1), "float16": (5e-2, 5e-2)}


def wrap(subject, args):
    """The target as a function of its grad-requiring tensors only, returning floating outputs (dense)."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]

    def fn(*inputs):
        full = list(args)
        for i, x in zip(positions, inputs):
            full[i] = x
        # a sparse output made dense (masked: its gradient stays on its pattern), as torch's gradcheck asks
        outputs = [dense(o) for o in outputs_of(subject.call(full)) if o.is_floating_point()]
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
    options = {"eps": _EPS[subject.dtype], "atol": atol / scale, "rtol": rtol / scale,
               "fast_mode": fast, "check_undefined_grad": False}
    if any(x.layout != torch.strided for x in inputs):  # only the specified elements of a sparse input count
        options["masked"] = True
    return options


def gradcheck_values(subject, case) -> dict:
    """``script_values`` of the checks that run torch's gradcheck: its options as the audit passes them."""
    return {"options": gradcheck_options(subject, grad_inputs(subject.args(case)))}


def gradcheck_tolerance(subject) -> tuple[float, float]:
    """(atol, rtol) for comparing one finite-difference estimate with another in the cell's dtype."""
    own = subject.entry.tolerance_for(subject.dtype)
    return (own.atol, own.rtol) if own else _TOL[subject.dtype]


def explain_gradcheck_failure(fn, inputs, exc: Exception, options: dict) -> str:
    """The largest analytic-vs-numeric difference and where it is, with torch's own first line where it
    says more than that; torch's line alone when nothing is located."""
    said = torch_sentence(exc)
    if any(x.layout != torch.strided for x in inputs):  # torch's masked comparison: located in its own words
        return f"torch.autograd.gradcheck (masked: unspecified elements of sparse inputs ignored): {said}"
    try:
        located = _locate(fn, inputs, options["eps"], options["atol"], options["rtol"])
    except Exception:  # the diagnosis is a courtesy; torch's message still stands
        located = None
    if not located:
        return f"torch.autograd.gradcheck: {said}"
    return located if located.startswith(f"{said}:") else f"{located}; torch.autograd.gradcheck: {said}"


def torch_sentence(exc: Exception) -> str:
    """The first line of a torch error as a clause to embed: whitespace collapsed, sentences torch glued
    together ("gradient.The tolerance") parted, and trailing punctuation dropped (torch ends
    "Jacobian mismatch for output 0 with respect to input 0," before its matrices)."""
    lines = str(exc).strip().splitlines()
    first = " ".join(lines[0].split()) if lines else type(exc).__name__
    return re.sub(r"(?<=[a-z])\.(?=[A-Z])", ". ", first).rstrip(" ,;:.")


def _locate(fn, inputs, eps, atol, rtol) -> str | None:
    analytic = _analytic(fn, inputs)
    numeric = _numeric(fn, inputs, eps)
    worst = None
    for (o, i), a in analytic.items():
        n = numeric[(o, i)]
        excess = (a - n).abs() - (atol + rtol * n.abs())
        if excess.numel() and (worst is None or excess.max() > worst[0]):
            flat = int(excess.reshape(-1).argmax())
            worst = (excess.max().item(), o, i, flat, a.reshape(-1)[flat].item(), n.reshape(-1)[flat].item(), a.shape)
    if worst is None or worst[0] <= 0:
        return None
    _, o, i, flat, a, n, shape = worst
    row, col = divmod(flat, shape[1])
    out_index = _unravel(row, _output_shapes(fn, inputs)[o])
    in_index = _unravel(col, inputs[i].shape)
    return (f"Jacobian mismatch for output {o} with respect to input {i}: max |analytic - numeric| = "
            f"{abs(a - n):.3g} at d out{list(out_index)} / d in{list(in_index)} (analytic {a:.6g}, "
            f"numeric {n:.6g}) > atol {atol:g} + rtol {rtol:g}·|numeric|")


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
                    rows[r][i] = g.detach().double().reshape(-1)
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
