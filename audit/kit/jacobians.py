"""Jacobians: central differences, the eager Jacobian, and torch.func's refusals."""

from __future__ import annotations

import torch
from audit.kit.tolerance import Tolerance


#: Step and the tolerance a central difference supports, per dtype; lower precisions are not judged.
DIFFERENCE_STEPS = {torch.float64: (1e-6, Tolerance(1e-5, 1e-3)), torch.float32: (1e-3, Tolerance(1e-2, 1e-2))}


#: Columns (input elements) differenced at most: the first ones, in order; the rest are not compared.
DIFFERENCE_COLUMNS = 64


def central_jacobian(f, inputs) -> dict:
    """For each column (input j, flat element e), at most :data:`DIFFERENCE_COLUMNS`: d f_i / d x_j[e] for every
    output i, by central differences with the dtype's step (:data:`DIFFERENCE_STEPS`), divided by the step actually
    taken (2 eps rounds at 1e9: ulp 1.2e-7). ``f`` takes the inputs and returns a tuple of tensors; the inputs are
    not modified."""
    eps = DIFFERENCE_STEPS[inputs[0].dtype][0]
    base = [x.detach().clone() for x in inputs]
    found = {}
    with torch.no_grad():
        for j, e in [(j, e) for j, x in enumerate(base) for e in range(x.numel())][:DIFFERENCE_COLUMNS]:
            plus, minus = [x.clone() for x in base], [x.clone() for x in base]
            plus[j].view(-1)[e] += eps
            minus[j].view(-1)[e] -= eps
            width = plus[j].view(-1)[e] - minus[j].view(-1)[e]
            found[(j, e)] = [(p - m) / width for p, m in zip(f(*plus), f(*minus))]
    return found


def eager_jacobian(f, inputs) -> dict:
    """:func:`central_jacobian`'s columns, by eager autograd instead (one vjp per output element): the Jacobian the
    target's own backward gives, for a backward that is meant not to be its forward's derivative."""
    base = tuple(x.detach().clone().requires_grad_() for x in inputs)
    jac = torch.autograd.functional.jacobian(lambda *xs: tuple(f(*xs)), base)
    columns = [(j, e) for j, x in enumerate(base) for e in range(x.numel())][:DIFFERENCE_COLUMNS]
    with torch.no_grad():
        shapes = [o.shape for o in f(*base)]
    return {(j, e): [jacobian_column(jac, i, j, e, shape, base[j].numel()).detach() for i, shape in enumerate(shapes)]
            for j, e in columns}


def jacobian_column(jac, i: int, j: int, e: int, output_shape, input_numel: int):
    """Column (j, e) for output i of a torch.func Jacobian ``jac[i][j]`` (shape output + input)."""
    return jac[i][j].reshape(tuple(output_shape) + (input_numel,))[..., e]


def outputs_without_graph(fn, inputs) -> list:
    """The outputs of ``fn`` (a tensor or a tuple of them) on detached ``inputs``, without a graph."""
    with torch.no_grad():
        out = fn(*[x.detach() for x in inputs])
    return list(out) if isinstance(out, tuple) else [out]


def realified(fn, inputs):
    """``fn`` as a real function of real tensors, and ``inputs`` as such: each complex input is passed as its
    ``view_as_real`` (a trailing dim of 2: real, imaginary part) and each complex output returned so. Its
    autograd Jacobian is the true real one exactly when the backward follows PyTorch's convention, so the
    real-valued finite-difference machinery judges complex code unchanged. Real ``fn`` and inputs pass as they are."""
    flags = [x.is_complex() for x in inputs]
    if not any(flags) and not any(o.is_complex() for o in outputs_without_graph(fn, inputs)):
        return fn, list(inputs)

    def real_fn(*xs):
        found = fn(*[torch.view_as_complex(x) if c else x for x, c in zip(xs, flags)])
        outs = tuple(torch.view_as_real(o.resolve_conj()) if o.is_complex() else o
                     for o in (found if isinstance(found, tuple) else (found,)))
        return outs if len(outs) != 1 else outs[0]

    return real_fn, [torch.view_as_real(x.detach().resolve_conj()).clone() if c else x for x, c in zip(inputs, flags)]


def is_setup_context_refusal(exc) -> bool:
    """torch.func's refusal of an old-style (ctx in forward) autograd.Function."""
    return isinstance(exc, RuntimeError) and "must override the setup_context staticmethod" in str(exc)
