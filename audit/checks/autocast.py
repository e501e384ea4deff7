"""``autocast``: under torch.autocast the target runs forward and backward, its outputs have the dtype
autocast's policy implies, and outputs and gradients stay close to float32 at low precision."""

from __future__ import annotations

import torch

from audit.checks.catalog import declared
from audit.checks.interface import NotApplicable, Violation
from audit.contract import COMPLEX_DTYPES
from audit.errors import first_line
from audit.registry.model import DEFAULT_TOLERANCE, Tolerance
from audit.toolkit.tensors import compare_all, gradients, outputs_of

#: The low-precision dtype autocast uses on each device (torch's defaults).
LOW = {"cpu": "bfloat16", "cuda": "float16", "mps": "float16"}
#: How close autocast's results must stay to float32's (a few roundings at the low precision).
TOLERANCE = {"bfloat16": Tolerance(atol=1e-2, rtol=1.6e-2, scale=DEFAULT_TOLERANCE["bfloat16"].scale),
             "float16": Tolerance(atol=1e-3, rtol=1e-3, scale=DEFAULT_TOLERANCE["float16"].scale)}

HINT = ("the backward ran outside autocast on low-precision tensors: decorate forward with "
        "@torch.amp.custom_fwd(device_type=...) and backward with @torch.amp.custom_bwd(device_type=...), or "
        "cast_inputs=torch.float32 to run it in float32")


def run(subject, case) -> None:
    """float32 eager against the same call under autocast (forward inside, backward outside, as in training)."""
    if subject.dtype in COMPLEX_DTYPES:
        raise NotApplicable("torch.autocast casts only real floating tensors (its float16/bfloat16 policy has no "
                            "complex dtype and leaves complex tensors as they are): a complex entry has nothing "
                            "to autocast")
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
    tol = subject.entry.tolerance_for(low, TOLERANCE[low])
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
            raise Violation(f"backward raised: {first_line(exc)}; {HINT}") from None
        raise


def _inputs(args) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


def _implied_dtypes(subject, case) -> list | None:
    """The output dtypes autocast's policy gives the reference (the composite torch code), if there is one."""
    if subject.target.reference is None:
        return None
    with torch.no_grad():
        return [o.dtype for o in outputs_of(subject.evaluate_reference(*subject.args(case, "float32")))]


def _tolerance_values(subject) -> dict:
    """The comparison with float32: the entry's tolerance for the low dtype, else :data:`TOLERANCE`'s."""
    low = LOW[subject.device]
    tol = subject.entry.tolerance_for(low, TOLERANCE[low])
    return {"atol": tol.atol, "rtol": tol.rtol, "scale": tol.scale}


SCRIPT = """\
low = torch.bfloat16 if device == "cpu" else torch.float16  # autocast's low precision on this device


def float32(xs):
    return [x.detach().float().requires_grad_(x.requires_grad) if torch.is_tensor(x) and x.is_floating_point() else x
            for x in xs]


xs = float32(args)
expected_outs = tensors_of(audited(*xs))  # float32, no autocast
expected_grads = vjp(expected_outs, xs)  # cotangents in each output's dtype
xs = float32(args)
with torch.autocast(device_type=device, dtype=low):  # forward inside autocast, backward outside, as in training
    outs = tensors_of(audited(*xs))
    if ref is not None:
        with torch.no_grad():
            implied = [o.dtype for o in tensors_of(guarded(ref)(*float32(args)))]  # autocast's policy for the composite
for i, o in enumerate(outs):
    allowed = {implied[i]} if ref is not None else {torch.float32, low}
    if o.is_floating_point() and o.dtype not in allowed:
        print(f"output {i} is {o.dtype} under autocast({low}); expected {allowed}")
        sys.exit(1)
try:
    low_grads = vjp(outs, xs)  # outside autocast, as in training
except RuntimeError as exc:
    print("backward raised:", (str(exc).strip().splitlines() or [""])[0], "(decorate forward with "
          "@torch.amp.custom_fwd(device_type=...) and backward with @torch.amp.custom_bwd(device_type=...))")
    sys.exit(1)
failed = differs(f"output under autocast({low}) vs float32", [o.float() for o in outs], [o.detach() for o in expected_outs])
diff = [x for x in xs if torch.is_tensor(x) and x.requires_grad]
for i, (g, x) in enumerate(zip(low_grads, diff)):
    if g.dtype != x.dtype or not torch.isfinite(g).all():
        print(f"gradient of input {i} is {g.dtype} (input {x.dtype}), finite: {bool(torch.isfinite(g).all())}")
        failed = True
failed = failed or differs(f"gradient under autocast({low}) vs float32: input", low_grads, expected_grads)
print("autocast differs from float32" if failed else "autocast: the dtypes, outputs and gradients float32 implies")
sys.exit(1 if failed else 0)
"""


CHECK = declared(
    "autocast",
    run=run,
    script=SCRIPT,
    script_values=lambda subject, case: _tolerance_values(subject),
)
