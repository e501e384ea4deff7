"""``saved_tensors``: a tensor modified after forward is either caught by autograd or irrelevant."""

from __future__ import annotations

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.toolkit.tensors import compare_all, differentiable, filled, floating, grad_outputs, outputs_of

ACCEPTED = ("modified by an inplace operation", "is a view and is being modified inplace",
            "has been modified inplace", "a leaf Variable that requires grad")


def run(subject, case) -> None:
    """Modify each input, then each output, in place after forward; backward must raise or not change."""
    baseline = _gradients(subject, case, None)
    if baseline is None:
        return
    tensors = sum(isinstance(a, torch.Tensor) and floating(a) for a in subject.args(case))
    targets = [("input", i) for i in range(tensors)] + [("output", k) for k in range(len(baseline[1]))]
    for target in targets:
        got = _gradients(subject, case, target)
        if got is None:
            continue
        try:
            compare_all("gradient of input", got[0], baseline[0], subject.tolerance())
        except Violation as exc:
            raise Violation(f"after {target[0]} {target[1]} was modified in place between forward and backward, "
                            f"backward silently returned a different gradient: {exc}. The Function keeps that "
                            "tensor outside save_for_backward (e.g. ctx.x = x), bypassing autograd's version "
                            "counters; save it with ctx.save_for_backward") from None


def _gradients(subject, case, target):
    """Gradients w.r.t. the leaves, after modifying ``target`` in place (None: autograd refused, fine)."""
    leaves = subject.args(case)
    args = [a.clone() if isinstance(a, torch.Tensor) and floating(a) else a for a in leaves]
    copies = [a for a in args if isinstance(a, torch.Tensor) and floating(a)]
    inputs = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
    outputs = differentiable(outputs_of(subject.guard(subject.target.fn, clone=False)(*args)))  # args are clones
    if not inputs or not outputs:
        return None
    try:
        if target is not None:
            victim = copies[target[1]] if target[0] == "input" else outputs[target[1]]
            if victim.numel() == 0:
                return None
            with torch.no_grad():
                victim.mul_(2).add_(0.5)
        grads = torch.autograd.grad(outputs, inputs, grad_outputs(outputs, subject.seed), allow_unused=True)
    except RuntimeError as exc:
        if any(words in str(exc) for words in ACCEPTED):
            return None
        raise
    return filled(grads, inputs), outputs


CHECK = declared(
    "saved_tensors",
    run=run,
    script="""\
# The audit's property: after forward, each floating input (its copy passed to the target) and then each
# output is modified in place; backward must then raise autograd's in-place error or give the gradient it gives
# without the write (the cell's cotangents).
ACCEPTED = ("modified by an inplace operation", "is a view and is being modified inplace",
            "has been modified inplace", "a leaf Variable that requires grad")
case = fresh(args)  # the case's values: each run gets its own leaves, as in the audit


def gradients(victim=None):
    leaves = fresh(case)
    diff = [a for a in leaves if torch.is_tensor(a) and a.requires_grad]
    xs = [a.clone() if torch.is_tensor(a) and floating(a) else a for a in leaves]
    copies = [x for x in xs if torch.is_tensor(x) and floating(x)]
    outs = live(tensors_of(audited(*xs, clone=False)))  # xs are copies already
    if not diff or not outs:
        return None
    try:
        if victim is not None:
            written = copies[victim[1]] if victim[0] == "input" else outs[victim[1]]
            if written.numel() == 0:
                return None
            with torch.no_grad():
                written.mul_(2).add_(0.5)
        found = torch.autograd.grad(outs, diff, cotangents(outs), allow_unused=True)
    except RuntimeError as exc:
        if any(words in str(exc) for words in ACCEPTED):
            print(f"with {victim} modified in place, backward raised autograd's error (as it should): {exc}")
            return None
        raise
    return filled(found, diff), outs


baseline = gradients()
failed = False
if baseline is not None:
    count = sum(torch.is_tensor(a) and floating(a) for a in args)
    for victim in [("input", i) for i in range(count)] + [("output", k) for k in range(len(baseline[1]))]:
        got = gradients(victim)
        if got is not None:
            failed |= differs(f"after {victim[0]} {victim[1]} was modified in place, backward silently returned "
                              "a different gradient of input", got[0], baseline[0])
print("fails" if failed else "holds: every in-place write after forward is refused by autograd or changes no gradient")
sys.exit(1 if failed else 0)
""",
    script_values=tolerance_values,
)
