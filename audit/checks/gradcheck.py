"""``gradcheck``: the analytic gradient equals finite differences and, given a reference, its gradient."""

from __future__ import annotations

import torch
from torch.autograd.gradcheck import GradcheckError

from audit.checks.interface import Check, Violation
from audit.checks.jacobian import explain_gradcheck_failure, gradcheck_options, wrap
from audit.checks.subject import grad_inputs
from audit.checks.tensors import compare_all, vjp


def run(subject, case) -> None:
    """torch's gradcheck (slow mode on small inputs), then the gradient against the reference's."""
    args = subject.args(case)
    inputs = grad_inputs(args)
    if not inputs:
        raise Violation("no input requires a gradient: mark one tensor input requires_grad: true")
    fn = wrap(subject, args)
    options = gradcheck_options(subject, inputs)
    try:
        torch.autograd.gradcheck(fn, inputs, **options)
    except GradcheckError as exc:
        raise Violation(explain_gradcheck_failure(fn, inputs, exc, options)) from None
    if subject.target.reference is not None:
        _against_reference(subject, case)


def _against_reference(subject, case) -> None:
    seed = subject.seed
    args = subject.args(case)
    ref_args = subject.args(case)
    _, grads = vjp(subject.target.fn, args, grad_inputs(args), seed)
    _, expected = vjp(subject.target.reference, ref_args, grad_inputs(ref_args), seed)
    try:
        compare_all("gradient of input", grads, expected, subject.tolerance(tight=True))
    except Violation as exc:
        raise Violation(f"{exc} against the reference's autograd gradient (vjp with random "
                        "cotangents); a backward computed in lower precision than its input "
                        "passes finite differences but not this") from None


CHECK = Check(
    name="gradcheck",
    contract="the analytic gradient equals central finite differences (torch.autograd.gradcheck, "
             "slow mode up to 256 input elements, fast mode with atol scaled by size beyond), and "
             "with a reference, equals the reference's gradient at float64-tight tolerance",
    run=run,
    script="""\
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]
def f(*xs):
    it = iter(xs)
    return fn(*[next(it) if torch.is_tensor(a) and a.requires_grad else a for a in args])
print(torch.autograd.gradcheck(f, diff, atol=atol, rtol=rtol))
""",
)
