"""``autocast``: under torch.autocast the target runs forward and backward, its outputs have the dtype
autocast's policy implies, and outputs and gradients stay close to float32 at low precision."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.core.contract import COMPLEX_DTYPES
from audit.kit.autograd import grad_inputs, gradients
from audit.kit.compare import mismatches
from audit.kit.tolerance import Tolerance
from audit.kit.explain import first_line
from audit.kit.tensors import fresh, outputs_of
from audit.registry.model import DEFAULT_TOLERANCE

#: The low-precision dtype autocast uses on each device (torch's defaults).
LOW = {"cpu": "bfloat16", "cuda": "float16", "mps": "float16"}
#: How close autocast's results must stay to float32's (a few roundings at the low precision).
TOLERANCE = {"bfloat16": Tolerance(atol=1e-2, rtol=1.6e-2, scale=DEFAULT_TOLERANCE["bfloat16"].scale),
             "float16": Tolerance(atol=1e-3, rtol=1e-3, scale=DEFAULT_TOLERANCE["float16"].scale)}


def autocast(fn, ref, args, *, seed, device, low, tol) -> list:
    """float32 eager against the same call under torch.autocast(``device``, ``low``) (forward inside, backward
    outside, as in training): the outputs in the dtype autocast's policy gives the reference (without one, float32
    or ``low``), the gradients finite and in their inputs' dtypes, and both within ``tol`` of float32's. Floating
    arguments are given in float32, autocast's input dtype, whatever the cell's."""
    args = [a.detach().float().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a for a in args]
    expected = float32_run(fn, args, seed)
    if isinstance(expected[1], str):
        return [expected[1]]
    xs = fresh(args)
    with torch.autocast(device_type=device, dtype=getattr(torch, low)):
        outputs = outputs_of(fn(*xs))
        if ref is not None:  # autocast's policy for the composite torch code
            with torch.no_grad():
                implied = [o.dtype for o in outputs_of(ref(*fresh(args)))]
    for i, output in enumerate(outputs):
        allowed = {implied[i]} if ref is not None else {torch.float32, getattr(torch, low)}
        if output.is_floating_point() and output.dtype not in allowed:
            said = " or ".join(sorted(str(d).replace("torch.", "") for d in allowed))
            source = "the reference gives" if ref is not None else "autocast gives float32 or"
            return [f"output {i} is {str(output.dtype).replace('torch.', '')} under autocast({low}); {source} {said}"]
    grads = low_backward(outputs, xs, seed)
    if isinstance(grads, str):
        return [grads]
    found = mismatches(f"output under autocast({low}) vs float32:", [o.float() for o in outputs], expected[0], tol)
    if found:
        return found
    for i, (grad, x) in enumerate(zip(grads, grad_inputs(xs))):
        if grad.dtype != x.dtype:
            return [f"gradient of input {i} is {grad.dtype}, not the input's {x.dtype}"]
        if not torch.isfinite(grad).all():
            return [f"gradient of input {i} under autocast({low}) is not finite"]
    return mismatches(f"gradient under autocast({low}) vs float32: input", grads, expected[1], tol)


def float32_run(fn, args, seed: int):
    """Outputs (in float32) and gradients of ``fn`` on copies of ``args``, no autocast (the gradients: the
    message of :func:`low_backward` where it refuses)."""
    xs = fresh(args)
    outputs = outputs_of(fn(*xs))
    return [o.detach().float() for o in outputs], low_backward(outputs, xs, seed)


def low_backward(outputs, args, seed: int):
    """The gradients of <``outputs``, cotangents drawn from ``seed``>, or the message (a str) when backward
    refuses low-precision tensors."""
    try:
        return gradients(outputs, args, seed)
    except RuntimeError as exc:
        if "dtype" in str(exc) or "Half" in str(exc) or "BFloat16" in str(exc):
            return (f"backward raised: {first_line(exc)}; the backward ran outside autocast on low-precision "
                    "tensors: decorate forward with @torch.amp.custom_fwd(device_type=...) and backward with "
                    "@torch.amp.custom_bwd(device_type=...), or cast_inputs=torch.float32 to run it in float32")
        raise


def complex_entry(subject, case) -> str:
    """Why a complex cell has nothing to autocast."""
    if subject.dtype in COMPLEX_DTYPES:
        return ("torch.autocast casts only real floating tensors (its float16/bfloat16 policy has no complex dtype "
                "and leaves complex tensors as they are): a complex entry has nothing to autocast")
    return ""


def half_only(subject, case) -> str:
    """Why a half-only kernel is not run in float32."""
    if not set(subject.entry.supports.dtypes) & {"float32", "float64"}:
        return ("torch.autocast takes float32 inputs and casts them down inside, and the entry claims only half "
                "precision: the target is never run in a dtype it does not claim")
    return ""


def _values(subject, case) -> dict:
    """The low dtype of the cell's device, and the comparison with float32: the entry's tolerance for the low
    dtype, else :data:`TOLERANCE`'s."""
    low = LOW[subject.device]
    tol = subject.entry.tolerance_for(low, TOLERANCE[low])
    return {"low": low, "tol": tol}


CHECK = declared(
    "autocast",
    refusals=(complex_entry, half_only),
    replay=autocast,
    replay_helpers=(float32_run, low_backward),
    script_values=_values,
)
