"""``autocast``: under torch.autocast the target runs forward and backward, its outputs have the dtype
autocast's policy implies, and outputs and gradients stay close to float32 at low precision."""

from __future__ import annotations

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.checks.tensors import compare_all, gradients, outputs_of
from audit.registry.model import Tolerance

#: The low-precision dtype autocast uses on each device (torch's defaults).
LOW = {"cpu": "bfloat16", "cuda": "float16", "mps": "float16"}
#: How close autocast's results must stay to float32's (a few roundings at the low precision).
TOLERANCE = {"bfloat16": Tolerance(atol=1e-2, rtol=1.6e-2), "float16": Tolerance(atol=1e-3, rtol=1e-3)}

HINT = ("the backward ran outside autocast on low-precision tensors: decorate forward with "
        "@torch.amp.custom_fwd(device_type=...) and backward with @torch.amp.custom_bwd(device_type=...), or "
        "cast_inputs=torch.float32 to run it in float32")


def run(subject, case) -> None:
    """float32 eager against the same call under autocast (forward inside, backward outside, as in training)."""
    low = LOW[subject.device]
    reference = _run(subject.evaluate, subject.args(case, "float32"), subject.seed)
    args = subject.args(case, "float32")
    with torch.autocast(device_type=subject.device, dtype=getattr(torch, low)):
        outputs = outputs_of(subject.evaluate(*args))
        implied = _implied_dtypes(subject, case)
    for i, output in enumerate(outputs):
        allowed = {implied[i]} if implied else {torch.float32, getattr(torch, low)}
        if output.is_floating_point() and output.dtype not in allowed:
            expected = " or ".join(sorted(str(d).replace("torch.", "") for d in allowed))
            source = "the reference gives" if implied else "autocast gives float32 or"
            raise Violation(f"output {i} is {str(output.dtype).replace('torch.', '')} under autocast({low}); "
                            f"{source} {expected}")
    grads = _backward(outputs, args, subject.seed)
    tol = subject.entry.tolerance_for(low) or TOLERANCE[low]
    compare_all(f"output under autocast({low}) vs float32:", [o.float() for o in outputs], reference[0], tol)
    for i, (grad, x) in enumerate(zip(grads, _inputs(args))):
        if grad.dtype != x.dtype:
            raise Violation(f"gradient of input {i} is {grad.dtype}, not the input's {x.dtype}")
        if not torch.isfinite(grad).all():
            raise Violation(f"gradient of input {i} under autocast({low}) is not finite")
    compare_all(f"gradient under autocast({low}) vs float32: input", grads, reference[1], tol)


def _run(fn, args, seed: int):
    outputs = outputs_of(fn(*args))
    return [o.detach().float() for o in outputs], _backward(outputs, args, seed)


def _backward(outputs, args, seed: int) -> list[torch.Tensor]:
    try:
        return gradients(outputs, args, seed)
    except RuntimeError as exc:
        if "dtype" in str(exc) or "Half" in str(exc) or "BFloat16" in str(exc):
            raise Violation(f"backward raised: {str(exc).strip().splitlines()[0]}; {HINT}") from None
        raise


def _inputs(args) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


def _implied_dtypes(subject, case) -> list | None:
    """The output dtypes autocast's policy gives the reference (the composite torch code), if there is one."""
    if subject.target.reference is None:
        return None
    with torch.no_grad():
        return [o.dtype for o in outputs_of(subject.evaluate_reference(*subject.args(case, "float32")))]


CHECK = declared(
    "autocast",
    run=run,
    script="""\
args = [a.float().detach().requires_grad_(a.requires_grad) if torch.is_tensor(a) and a.is_floating_point() else a
        for a in args]
low = torch.bfloat16 if device == "cpu" else torch.float16
with torch.autocast(device_type=device, dtype=low):
    out = fn(*args)
outs = out if isinstance(out, (tuple, list)) else (out,)
print("outputs under autocast:", [(o.dtype, o) for o in outs])
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]
print("gradients:", torch.autograd.grad([o.float().sum() for o in outs if o.requires_grad], diff))
""",
)
