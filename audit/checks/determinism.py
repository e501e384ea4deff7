"""``determinism``: the same inputs give bitwise-equal outputs and gradients."""

from __future__ import annotations

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.toolkit.tensors import dense, differentiable, grad_inputs, grad_outputs, outputs_of, wide


def run(subject, case) -> None:
    """Two runs on fresh copies of the same inputs; every output and gradient bitwise equal."""
    first, second = _run(subject, case), _run(subject, case)
    for label, a, b in (("output", *[r[0] for r in (first, second)]), ("gradient of input", first[1], second[1])):
        for i, (x, y) in enumerate(zip(a, b)):
            if not _bitwise_equal(x, y):
                diff = (wide(dense(x)) - wide(dense(y))).abs().nan_to_num(nan=float("inf"))
                hint = "; claim supports.deterministic: false if this is expected" if subject.entry.supports.deterministic else ""
                raise Violation(f"{label} {i} differs between two runs on the same inputs: max difference "
                                f"{diff.max().item():.3g}{hint}")


def _run(subject, case):
    args = subject.args(case)
    outputs = outputs_of(subject.guard(subject.target.fn, reseed=False)(*args))  # two runs must draw apart
    inputs, diff = grad_inputs(args), differentiable(outputs)
    if not inputs or not diff:
        return [o.detach() for o in outputs], []
    grads = torch.autograd.grad(diff, inputs, grad_outputs(diff, subject.seed), allow_unused=True)
    return [o.detach() for o in outputs], [g for g in grads if g is not None]


def _bitwise_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    x, y = dense(x), dense(y)  # a sparse gradient: its values where specified, zeros elsewhere
    return x.shape == y.shape and torch.equal(torch.nan_to_num(x, nan=0.0), torch.nan_to_num(y, nan=0.0)) \
        and torch.equal(torch.isnan(x), torch.isnan(y))


CHECK = declared(
    "determinism",
    run=run,
    script="""\
def run():
    \"\"\"Outputs and the gradients of <differentiable outputs, the cell's cotangents>, on fresh copies of args.\"\"\"
    xs = fresh(args)
    # as the audit calls it here: a leaf at a mutates position cloned, the generator NOT reset (runs must not differ)
    out = _target(*[x.clone() if i in mutates and torch.is_tensor(x) and x.is_leaf else x for i, x in enumerate(xs)])
    outs = tensors_of(out)
    diff = live(outs)
    inputs = [x for x in xs if torch.is_tensor(x) and x.requires_grad]
    if not (diff and inputs):
        return [o.detach() for o in outs], []
    found = torch.autograd.grad(diff, inputs, cotangents(diff), allow_unused=True)
    return [o.detach() for o in outs], [g for g in found if g is not None]


def bitwise_equal(x, y):
    x, y = [t.to_dense() if t.layout != torch.strided else t for t in (x, y)]  # a sparse gradient: its values
    return x.shape == y.shape and torch.equal(x.nan_to_num(nan=0.0), y.nan_to_num(nan=0.0)) and torch.equal(x.isnan(), y.isnan())


first, second = run(), run()
failed = False
for label, a, b in (("output", first[0], second[0]), ("gradient of input", first[1], second[1])):
    for i, (x, y) in enumerate(zip(a, b)):
        if not bitwise_equal(x, y):
            x, y = [t.to_dense() if t.layout != torch.strided else t for t in (x, y)]
            print(f"{label} {i} differs between two runs on the same inputs: max difference",
                  (wide(x) - wide(y)).abs().nan_to_num(nan=float("inf")).max().item())
            failed = True
print("two runs differ" if failed else "two runs are bitwise equal")
sys.exit(1 if failed else 0)
""",
)
