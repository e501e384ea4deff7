"""``empty``: where a dim may be 0, forward and backward work on empty tensors."""

from __future__ import annotations


from audit.catalog.checks import declared
from audit.kit.autograd import differentiable, grad_inputs, vjp
from audit.kit.tensors import outputs_of


def empty(fn, ref, args, *, seed) -> list:
    """Forward, then backward with cotangents drawn from ``seed``, on a case with an empty tensor: each gradient
    has its input's shape. A target that raises fails too (the exception is the failure)."""
    outputs = differentiable(outputs_of(fn(*args)))
    inputs = grad_inputs(args)
    if not outputs or not inputs:
        return []
    grads = vjp(outputs, inputs, seed, fill=False)
    return [f"gradient of input {i} has shape {list(g.shape)}, expected {list(x.shape)}"
            for i, (g, x) in enumerate(zip(grads, inputs)) if g is not None and g.shape != x.shape]


CHECK = declared("empty", replay=empty)
