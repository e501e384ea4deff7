"""Running torch's gradcheck on a target: its options for the cell; turning its failures into located, sized
messages is the replay kit's (:func:`audit.kit.explain.explain_gradcheck_failure`), so that a replay script says it
too."""

from __future__ import annotations

import torch

from audit.core.contract import LOW_PRECISION_DTYPES, real_counterpart
from audit.kit.autograd import grad_inputs, wrapped
from audit.kit.tolerance import Tolerance

#: Above this many input elements, slow gradcheck (O(n^2) time and memory) gives way to fast mode.
SLOW_MODE_LIMIT = 1024

_EPS = {"float64": 1e-6, "float32": 1e-3, "bfloat16": 1e-2, "float16": 1e-2}
_TOL = {"float64": (1e-5, 1e-3), "float32": (1e-2, 1e-2), "bfloat16": (1e-1, 1e-1), "float16": (5e-2, 5e-2)}


def wrap(subject, args, call=None):
    """The target (or ``call``, given the full argument list) as a function of its grad-requiring tensors only,
    returning floating outputs (dense): :func:`audit.kit.autograd.wrapped`."""
    return wrapped(subject.evaluate if call is None else lambda *full: call(list(full)), args)


def gradcheck_options(subject, inputs, *, fast: bool = False) -> dict:
    """eps and tolerances for the dtype; fast mode with atol scaled by size on large inputs, or wherever ``fast``.

    With a sparse input, gradcheck runs ``masked``: unspecified elements are neither perturbed nor compared.
    Fast mode compares one random projection vᵀJu, a sum over n terms, and scales atol by
    sum(u)·sum(v) (about 0.75·n): one wrong element then moves vᵀJu by about 1/n of its error,
    far inside the default tolerances. Dividing atol and rtol by n restores the power to catch it.
    """
    atol, rtol = gradcheck_tolerance(subject)
    size = sum(x.numel() for x in inputs)
    fast = fast or size > SLOW_MODE_LIMIT
    scale = size if fast else 1
    options = {"eps": _EPS[real_counterpart(subject.dtype)], "atol": atol / scale, "rtol": rtol / scale,
               "fast_mode": fast, "check_undefined_grad": False}
    if any(x.layout != torch.strided for x in inputs):  # only the specified elements of a sparse input count
        options["masked"] = True
    return options


def differences_in_half(what: str):
    """A refusal (:mod:`audit.checking.judgement`) of a float16 or bfloat16 cell for a check that judges ``what`` by
    finite differences: a step below one ulp changes nothing, so they are rounding noise there, and the target is
    never run in a dtype it does not claim."""
    def refusal(subject, case) -> str:
        if subject.dtype not in LOW_PRECISION_DTYPES:
            return ""
        return (f"{what} is judged by finite differences, and in {subject.dtype} they are rounding noise (a step "
                "below one ulp changes nothing); the target is never run in a dtype it does not claim: claim float32 "
                "or float64 to check it")

    return refusal


def backward_only(what: str):
    """A refusal (:mod:`audit.checking.judgement`) of an entry whose gradients only .backward() takes
    (``backward_only``: it refuses torch.autograd.grad) in a check that needs ``what``, which the audit's
    .backward() adapter cannot give (it returns ``.grad`` values, not a graph to differentiate again, and has no
    forward-mode formula)."""
    def refusal(subject, case) -> str:
        if not subject.entry.backward_only:
            return ""
        return (f"the entry's gradients are taken through .backward() (backward_only: it refuses "
                f"torch.autograd.grad), and {what} cannot be taken that way: not judged")

    return refusal


def declared_rule(what: str):
    """A refusal (:mod:`audit.checking.judgement`) of an entry with a declared VJP (``vjp``: the intended gradient is
    a rule of its own, not a function's derivative, and may not even be linear in the cotangent) in a check that
    judges ``what``, which such a rule does not define: finite differences would judge the forward's derivative."""
    def refusal(subject, case) -> str:
        if not subject.entry.vjp:
            return ""
        return (f"the entry declares its intended gradient as a rule (vjp: {subject.entry.vjp}), which defines no "
                f"{what} to compare with, and finite differences judge the forward's derivative, which the backward "
                "is meant not to be: not judged (gradcheck and dtype hold the backward to the rule)")

    return refusal


def gradcheck_values(subject, case) -> dict:
    """``script_values`` of the checks that run torch's gradcheck: its options as the audit passes them."""
    return {"options": gradcheck_options(subject, grad_inputs(subject.args(case)))}


def gradcheck_tolerance(subject) -> tuple[float, float]:
    """(atol, rtol) for comparing one finite-difference estimate with another in the cell's dtype."""
    tol = subject.entry.tolerance_for(subject.dtype, Tolerance(*_TOL[real_counterpart(subject.dtype)]))
    return tol.atol, tol.rtol


