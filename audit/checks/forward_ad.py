"""``forward_ad``: forward-mode AD (the jvp) equals finite differences."""

from __future__ import annotations

import torch
from torch.autograd.gradcheck import GradcheckError

from audit.checks import smoothness
from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.errors import first_line
from audit.toolkit.jacobian import gradcheck_options, gradcheck_values, torch_sentence, wrap
from audit.toolkit.tensors import grad_inputs


def run(subject, case) -> None:
    """torch's gradcheck with only the forward-mode comparison turned on."""
    args = subject.args(case)
    inputs = grad_inputs(args)
    if not inputs:
        raise Violation("no input requires a gradient")
    options = gradcheck_options(subject, inputs)
    fn = wrap(subject, args)
    try:
        torch.autograd.gradcheck(fn, inputs, check_forward_ad=True,
                                 check_backward_ad=False, check_batched_grad=False, **options)
    except NotImplementedError as exc:
        raise Violation(f"no forward-mode formula: {first_line(exc)} (define a jvp staticmethod "
                        "using ctx.save_for_forward, or claim supports.forward_ad: false)") from None
    except GradcheckError as exc:
        if smoothness.excused(subject, "forward_ad", case, fn, inputs, options["eps"]):
            return
        raise Violation(f"forward-mode AD: {torch_sentence(exc)}") from None


CHECK = declared(
    "forward_ad",
    run=run,
    script="""\
# The audit's property: torch's gradcheck with only the forward-mode comparison, with the audit's options.
# Not replayed: the audit excuses a mismatch at a point where the function is not differentiable
# (audit/checks/smoothness.py); this case is one it did not excuse.
from torch.autograd.gradcheck import GradcheckError

diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]


def f(*xs):
    it = iter(xs)
    outs = [o for o in tensors_of(audited(*[next(it) if torch.is_tensor(a) and a.requires_grad else a for a in args]))
            if floating(o)]
    return tuple(outs) if len(outs) != 1 else outs[0]


if not diff:
    print("no input requires a gradient")
    sys.exit(1)
try:  # the audit's options: eps, tolerances and fast mode for this dtype and size
    torch.autograd.gradcheck(f, diff, check_forward_ad=True, check_backward_ad=False, check_batched_grad=False,
                             **options)
except NotImplementedError as exc:
    print("no forward-mode formula:", exc)
    sys.exit(1)
except GradcheckError as exc:
    print("forward-mode AD:", exc)
    sys.exit(1)
print("holds: the jvp equals finite differences")
sys.exit(0)
""",
    script_values=gradcheck_values,
)
