"""``forward_ad``: forward-mode AD (the jvp) equals finite differences."""

from __future__ import annotations

import torch

from audit.checks import replayable, smoothness
from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.kit import GradcheckError, first_line, grad_inputs, torch_sentence, wrapped
from audit.toolkit.jacobian import differences_meaningful, gradcheck_options, gradcheck_values, wrap

#: How :func:`forward_ad`'s one failure that finite differences can excuse begins (its line says it again: the
#: replay script carries the property, not this module).
MISMATCH = "forward-mode AD: "


def forward_ad(fn, ref, args, *, options) -> list:
    """torch's gradcheck with only the forward-mode comparison turned on, with the audit's ``options`` for the
    cell; a target without a forward-mode formula fails too."""
    inputs = grad_inputs(args)
    if not inputs:
        return ["no input requires a gradient"]
    try:
        torch.autograd.gradcheck(wrapped(fn, args), inputs, check_forward_ad=True, check_backward_ad=False,
                                 check_batched_grad=False, **options)
    except NotImplementedError as exc:
        return [f"no forward-mode formula: {first_line(exc)} (define a jvp staticmethod using ctx.save_for_forward, "
                "or claim supports.forward_ad: false)"]
    except GradcheckError as exc:
        return [f"forward-mode AD: {torch_sentence(exc)}"]
    return []


def run(subject, case) -> None:
    """:func:`forward_ad`; a mismatch with finite differences is excused where the target has no derivative; not
    judged in half precision (:func:`~audit.toolkit.jacobian.differences_meaningful`)."""
    differences_meaningful(subject, "the jvp")
    found = replayable.problems(CHECK, subject, case)
    if not found:
        return
    if found[0].startswith(MISMATCH):
        args = subject.args(case)
        inputs = grad_inputs(args)
        if smoothness.excused(subject, "forward_ad", case, wrap(subject, args), inputs,
                              gradcheck_options(subject, inputs)["eps"]):
            return
    raise Violation(found[0])


CHECK = declared("forward_ad", run=run, replay=forward_ad, script_values=gradcheck_values)
