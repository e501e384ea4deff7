"""``saved_tensors``: a tensor modified after forward is either caught by autograd or irrelevant."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.catalog.interface import tolerance_values
from audit.kit.autograd import differentiable, filled, vjp
from audit.kit.compare import mismatches
from audit.kit.tensors import floating, fresh, outputs_of


def saved_tensors(fn, ref, args, *, seed, tol) -> list:
    """After forward, each floating input (the copy the target got) and then each output modified in place:
    backward (cotangents drawn from ``seed``) must then raise autograd's in-place error, or give, within ``tol``,
    the gradient it gives without the write."""
    baseline = gradients_after_write(fn, args, None, seed)
    if baseline is None:
        return []
    count = sum(isinstance(a, torch.Tensor) and floating(a) for a in args)
    for victim in [("input", i) for i in range(count)] + [("output", k) for k in range(len(baseline[1]))]:
        got = gradients_after_write(fn, args, victim, seed)
        found = mismatches("gradient of input", got[0], baseline[0], tol) if got is not None else []
        if found:
            return [f"after {victim[0]} {victim[1]} was modified in place between forward and backward, backward "
                    f"silently returned a different gradient: {found[0]}. The Function keeps that tensor outside "
                    "save_for_backward (e.g. ctx.x = x), bypassing autograd's version counters; save it with "
                    "ctx.save_for_backward"]
    return []


def gradients_after_write(fn, args, victim, seed: int):
    """(gradients w.r.t. new leaves with the values of ``args``, outputs) after writing ``victim`` ("input" or
    "output", its index) in place between forward and backward; None where autograd refused (as it should), or
    where there is nothing to write or differentiate. The target gets copies of the floating inputs, so that
    writing one is writing what it got."""
    leaves = fresh(args)
    copies = [a.clone() if isinstance(a, torch.Tensor) and floating(a) else a for a in leaves]
    inputs = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
    outputs = differentiable(outputs_of(fn(*copies)))
    if not inputs or not outputs:
        return None
    try:
        if victim is not None:
            written = ([c for c in copies if isinstance(c, torch.Tensor) and floating(c)] if victim[0] == "input"
                       else outputs)[victim[1]]
            if written.numel() == 0:
                return None
            with torch.no_grad():
                written.mul_(2).add_(0.5)
        grads = vjp(outputs, inputs, seed, fill=False)
    except RuntimeError as exc:
        if any(words in str(exc) for words in ("modified by an inplace operation", "has been modified inplace",
                                               "is a view and is being modified inplace",
                                               "a leaf Variable that requires grad")):
            return None
        raise
    return filled(grads, inputs), outputs


CHECK = declared("saved_tensors", replay=saved_tensors, replay_helpers=(gradients_after_write,),
                 script_values=tolerance_values)
