"""``determinism``: the same inputs give bitwise-equal outputs and gradients."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.kit.autograd import differentiable, grad_inputs, vjp
from audit.kit.calls import guarded
from audit.kit.tensors import dense, fresh, outputs_of, wide


def determinism(fn, ref, args, *, target, mutates, seed, claimed) -> list:
    """Two runs of the target on fresh copies of ``args``, torch's generator not reset between them (two runs must
    draw apart), every output and gradient bitwise equal; ``claimed``: whether the entry claims determinism (the
    message then says how to claim otherwise)."""
    call = guarded(target, mutates)  # a written input cloned, as the audit calls it; not reseeded
    first, second = one_run(call, args, seed), one_run(call, args, seed)
    for label, a, b in (("output", first[0], second[0]), ("gradient of input", first[1], second[1])):
        for i, (x, y) in enumerate(zip(a, b)):
            if not bitwise_equal(x, y):
                diff = (wide(dense(x)) - wide(dense(y))).abs().nan_to_num(nan=float("inf"))
                hint = "; claim supports.deterministic: false if this is expected" if claimed else ""
                return [f"{label} {i} differs between two runs on the same inputs: max difference "
                        f"{diff.max().item():.3g}{hint}"]
    return []


def one_run(call, args, seed: int):
    """One run on fresh copies of ``args``: its outputs and the gradients of <differentiable outputs, cotangents
    drawn from ``seed``> that arrive (unused inputs left out)."""
    xs = fresh(args)
    outputs = outputs_of(call(*xs))
    inputs, diff = grad_inputs(xs), differentiable(outputs)
    if not inputs or not diff:
        return [o.detach() for o in outputs], []
    grads = vjp(diff, inputs, seed, fill=False)
    return [o.detach() for o in outputs], [g for g in grads if g is not None]


def bitwise_equal(x, y) -> bool:
    """Same shape and the same bits, NaN where the other is NaN (a sparse tensor: its dense values)."""
    x, y = dense(x), dense(y)
    return x.shape == y.shape and torch.equal(torch.nan_to_num(x, nan=0.0), torch.nan_to_num(y, nan=0.0)) \
        and torch.equal(torch.isnan(x), torch.isnan(y))


CHECK = declared(
    "determinism",
    replay=determinism,
    replay_helpers=(one_run, bitwise_equal),
    script_values=lambda subject, case: {"claimed": subject.entry.supports.deterministic},
)
