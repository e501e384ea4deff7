"""``determinism``: the same inputs give bitwise-equal outputs and gradients."""

from __future__ import annotations

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.checks.subject import grad_inputs
from audit.checks.tensors import differentiable, grad_outputs, outputs_of


def run(subject, case) -> None:
    """Two runs on fresh copies of the same inputs; every output and gradient bitwise equal."""
    first, second = _run(subject, case), _run(subject, case)
    for label, a, b in (("output", *[r[0] for r in (first, second)]), ("gradient of input", first[1], second[1])):
        for i, (x, y) in enumerate(zip(a, b)):
            if not _bitwise_equal(x, y):
                diff = (x.double() - y.double()).abs().nan_to_num(nan=float("inf"))
                raise Violation(f"{label} {i} differs between two runs on the same inputs: max difference "
                                f"{diff.max().item():.3g}; claim supports.deterministic: false if this is expected")


def _run(subject, case):
    args = subject.args(case)
    outputs = outputs_of(subject.guard(subject.target.fn, reseed=False)(*args))  # two runs must draw apart
    inputs, diff = grad_inputs(args), differentiable(outputs)
    if not inputs or not diff:
        return [o.detach() for o in outputs], []
    grads = torch.autograd.grad(diff, inputs, grad_outputs(diff, subject.seed), allow_unused=True)
    return [o.detach() for o in outputs], [g for g in grads if g is not None]


def _bitwise_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    return x.shape == y.shape and torch.equal(torch.nan_to_num(x, nan=0.0), torch.nan_to_num(y, nan=0.0)) \
        and torch.equal(torch.isnan(x), torch.isnan(y))


CHECK = declared(
    "determinism",
    run=run,
    script="""\
a = fn(*args); b = fn(*[x.detach().clone().requires_grad_(x.requires_grad) if torch.is_tensor(x) else x for x in args])
outs_a = a if isinstance(a, (tuple, list)) else (a,)
outs_b = b if isinstance(b, (tuple, list)) else (b,)
print([torch.equal(x, y) for x, y in zip(outs_a, outs_b)])
""",
)
