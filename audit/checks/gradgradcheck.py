"""``gradgradcheck``: second derivatives (the backward's own gradient) equal finite differences."""

from __future__ import annotations

import torch
from torch.autograd.gradcheck import GradcheckError

from audit.checks import smoothness
from audit.checks.interface import Check, Violation
from audit.checks.jacobian import gradcheck_options, wrap
from audit.checks.subject import grad_inputs
from audit.checks.tensors import vjp

NOT_DIFFERENTIABLE = ("the backward's result does not require grad: it is computed outside autograd "
                      "(x.detach(), .data, numpy) or marked @once_differentiable; build the backward "
                      "from differentiable torch ops, or claim supports.double_backward: false")


def run(subject, case) -> None:
    """torch's gradgradcheck on the target; explains a backward that autograd cannot see through."""
    args = subject.args(case)
    inputs = grad_inputs(args)
    if not inputs:
        raise Violation("no input requires a gradient")
    _differentiable_backward(subject, args, inputs)
    options = gradcheck_options(subject, inputs)
    fn = wrap(subject, args)
    try:
        torch.autograd.gradgradcheck(fn, inputs, **options)
    except GradcheckError as exc:
        if smoothness.excused(subject, "gradgradcheck", case, smoothness.backward_of(fn, subject.seed), inputs,
                              options["eps"]):
            return
        raise Violation(f"torch.autograd.gradgradcheck: {str(exc).strip().splitlines()[0]}") from None


def _differentiable_backward(subject, args, inputs) -> None:
    try:
        _, grads = vjp(subject.target.fn, args, inputs, subject.seed, create_graph=True)
    except RuntimeError as exc:
        if "once_differentiable" in str(exc):
            raise Violation(NOT_DIFFERENTIABLE) from None
        raise
    stuck = [i for i, g in enumerate(grads) if g.numel() and not g.requires_grad]
    if stuck:
        raise Violation(f"gradient of input {stuck[0]}: {NOT_DIFFERENTIABLE}")


CHECK = Check(
    name="gradgradcheck",
    contract="the backward is itself differentiable and its gradient equals finite differences "
             "(torch.autograd.gradgradcheck); claimed through supports.double_backward",
    run=run,
    claimed=lambda entry: entry.supports.double_backward,
    claim="supports.double_backward",
    script="""\
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]
def f(*xs):
    it = iter(xs)
    return fn(*[next(it) if torch.is_tensor(a) and a.requires_grad else a for a in args])
print(torch.autograd.gradgradcheck(f, diff))
""",
)
